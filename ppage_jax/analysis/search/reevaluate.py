"""Honest selection: the selected design is re-trained on fresh training seeds and evaluated
on fresh held-out layouts, beside the reference arms re-trained on the same seeds and
layouts, all in one compiled program (the sweep's).

The search picked its best candidate by a noisy score, so that score is biased upwards (the
winner's curse); only the re-evaluation, on seeds and layouts the search never saw, measures
the design. Per run it keeps the sweep's metrics and, per episode, the turns played and
whether it ended in a capture (``reevaluation/episodes.csv``): the statistics pair the arms
over layouts (:mod:`.report`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ppage_jax.analysis.search.spec import SearchSpec
from ppage_jax.analysis.sweep.monitoring import arm_monitors, monitor_run
from ppage_jax.analysis.sweep.spec import Arm
from ppage_jax.analysis.sweep.trainers import TrainFn
from ppage_jax.env import GridWorld
from ppage_jax.tracking.sweep import SweepRecorder


def reevaluate(
    spec: SearchSpec,
    env: GridWorld,
    selected: Arm,
    horizon: int,
    progress: bool = True,
    loggers: Sequence[str] = (),
    out_dir: str | Path = ".",
    train_fn: TrainFn | None = None,
    env_steps_per_update: int | None = None,
) -> tuple[dict, list]:
    """Results ``{(arm, seed): metrics}`` and episode rows ``(arm, seed, episode, length,
    captured)`` of ``selected`` and the references on the re-evaluation's seeds/layouts
    (``train_fn``: the search's own, when it was given one; the evaluation is always the
    re-evaluation's fresh block)."""
    from tqdm.auto import tqdm

    from ppage_jax.analysis.search.programs import RunProgram

    rspec = spec.reevaluation_sweep(selected)
    program = RunProgram(rspec, env, train_fn, None, env_steps_per_update)
    runs, keys, inputs = program.inputs(rspec)
    bar = tqdm(total=len(runs), unit="run", desc="re-evaluation", disable=not progress)
    metrics, episodes = program(keys, inputs)
    bar.update(len(runs))
    bar.close()
    names = [a.name for a in rspec.arms]
    monitors = arm_monitors(rspec.config, env, rspec.arm_params(env), names, rspec.eval_seed)
    recorder = SweepRecorder(loggers, Path(out_dir) / "reevaluation", rspec)
    results: dict = {}
    rows: list = []
    lengths = np.asarray(episodes["episode_length"])
    captured = np.asarray(episodes["captured"])
    for j, (arm, seed) in enumerate(runs):
        result, curve = program.results(metrics, episodes, j, horizon)
        result.update(monitor_run(monitors[arm], seed, curve))
        results[arm, seed] = result
        recorder.add(arm, seed, result, curve)
        for e in range(lengths.shape[1]):
            rows.append((arm, seed, e, int(lengths[j, e]), int(captured[j, e])))
    return results, rows
