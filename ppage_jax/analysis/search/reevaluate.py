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
from ppage_jax.analysis.sweep.spec import Arm, SweepSpec
from ppage_jax.analysis.sweep.trainers import TrainFn
from ppage_jax.config import Config
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
    schedule: Config | None = None,
    references: bool = True,
) -> tuple[dict, list]:
    """Results ``{(arm, seed): metrics}`` and episode rows ``(arm, seed, episode, length,
    captured)`` of ``selected`` and the references on the re-evaluation's seeds/layouts
    (``train_fn``: the search's own, when it was given one; the evaluation is always the
    re-evaluation's fresh block). ``schedule``: a config whose ``experiment.curriculum``
    the selected design trains under (a PBT schedule; the references then train in a
    program of their own, without it). ``references=False``: the selected design alone (the
    references re-evaluated once elsewhere, on the same seeds and layouts)."""
    import dataclasses

    rspec = spec.reevaluation_sweep(selected)
    refs = tuple(r for r in rspec.arms if r.name != selected.name) if references else ()
    if schedule is None:
        parts = [dataclasses.replace(rspec, arms=(selected, *refs))]
    else:
        parts = [dataclasses.replace(rspec, config=schedule, arms=(selected,))]
        if refs:
            parts.append(dataclasses.replace(rspec, arms=refs))
    return run_parts(
        parts, spec.config, env, horizon, progress, loggers, out_dir, train_fn, env_steps_per_update
    )


def run_parts(
    parts: Sequence[SweepSpec],
    config: Config,
    env: GridWorld,
    horizon: int,
    progress: bool = True,
    loggers: Sequence[str] = (),
    out_dir: str | Path = ".",
    train_fn: TrainFn | None = None,
    env_steps_per_update: int | None = None,
) -> tuple[dict, list]:
    """Train and evaluate every arm x seed of each sweep spec of ``parts`` (one compiled
    program each; ``train_fn`` only for those on ``config``, the search's own): results
    ``{(arm, seed): metrics}`` (with the monitor's columns) and episode rows ``(arm, seed,
    episode, length, captured)``."""
    from tqdm.auto import tqdm

    from ppage_jax.analysis.search.programs import RunProgram

    total = sum(len(p.arms) * p.seeds for p in parts)
    bar = tqdm(total=total, unit="run", desc="re-evaluation", disable=not progress)
    results: dict = {}
    rows: list = []
    for part in parts:
        own_train = train_fn if part.config is config else None
        program = RunProgram(part, env, own_train, None, env_steps_per_update)
        runs, keys, inputs = program.inputs(part)
        metrics, episodes = program(keys, inputs)
        bar.update(len(runs))
        names = [a.name for a in part.arms]
        monitors = arm_monitors(part.config, env, part.arm_params(env), names, part.eval_seed)
        recorder = SweepRecorder(loggers, Path(out_dir) / "reevaluation", part)
        lengths = np.asarray(episodes["episode_length"])
        captured = np.asarray(episodes["captured"])
        for j, (arm, seed) in enumerate(runs):
            result, curve = program.results(metrics, episodes, j, horizon)
            result.update(monitor_run(monitors[arm], seed, curve))
            results[arm, seed] = result
            recorder.add(arm, seed, result, curve)
            for e in range(lengths.shape[1]):
                rows.append((arm, seed, e, int(lengths[j, e]), int(captured[j, e])))
    bar.close()
    return results, rows
