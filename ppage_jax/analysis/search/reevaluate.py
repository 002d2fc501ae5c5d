"""Honest selection: the selected design is re-trained on fresh training seeds and evaluated
on fresh held-out layouts, beside the reference arms re-trained on the same seeds and
layouts, all in one compiled program (the sweep's).

The search picked its best candidate by a noisy score, so that score is biased upwards (the
winner's curse); only the re-evaluation, on seeds and layouts the search never saw, measures
the design. Per run it keeps the sweep's metrics and, per episode, the turns played and
whether it ended in a capture (``reevaluation/episodes.csv``): the statistics pair the arms
over layouts (:mod:`.report`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ppage_jax.analysis.batch.monitoring import arm_monitors, monitor_run
from ppage_jax.analysis.batch.spec import Arm, SweepSpec
from ppage_jax.analysis.batch.trainers import TrainFn
from ppage_jax.analysis.search.spec import SearchSpec
from ppage_jax.config import Config
from ppage_jax.env import GridWorld
from ppage_jax.tracking.sweep import SweepRecorder


@dataclasses.dataclass(frozen=True)
class RunSetup:
    """How the re-evaluation's runs train and where they report: the env, the evaluation's
    step limit (time to capture is censored there), the progress bar, the trackers and the
    directory they log under (its ``reevaluation/``), and the search's own train function
    with its env steps per update (None: the config's)."""

    env: GridWorld
    horizon: int
    progress: bool = True
    loggers: Sequence[str] = ()
    out_dir: str | Path = "."
    train_fn: TrainFn | None = None
    env_steps_per_update: int | None = None


def reevaluate(
    spec: SearchSpec,
    selected: Arm,
    setup: RunSetup,
    schedule: Config | None = None,
    references: bool = True,
) -> tuple[dict, list]:
    """Results ``{(arm, seed): metrics}`` and episode rows ``(arm, seed, episode, length,
    captured)`` of ``selected`` and the references on the re-evaluation's seeds/layouts
    (``setup.train_fn``: the search's own, when it was given one; the evaluation is always
    the re-evaluation's fresh block). ``schedule``: a config whose ``experiment.curriculum``
    the selected design trains under (a PBT schedule; the references then train in a
    program of their own, without it). ``references=False``: the selected design alone (the
    references re-evaluated once elsewhere, on the same seeds and layouts)."""
    rspec = spec.reevaluation_sweep(selected)
    refs = tuple(r for r in rspec.arms if r.name != selected.name) if references else ()
    if schedule is None:
        return run_parts([dataclasses.replace(rspec, arms=(selected, *refs))], spec.config, setup)
    part = dataclasses.replace(rspec, config=schedule, arms=(selected,))
    results, rows = replay_schedule(spec, part, setup)
    if refs:
        plain = dataclasses.replace(setup, train_fn=None, env_steps_per_update=None)
        more, more_rows = run_parts([dataclasses.replace(rspec, arms=refs)], spec.config, plain)
        results.update(more)
        rows += more_rows
    return results, rows


def replay_command(spec: SearchSpec, config_path: str | Path) -> str:
    """The ``ppage-jax run`` call that replays a PBT schedule written at ``config_path`` on
    the re-evaluation's seeds and layouts (:func:`replay_schedule` gives the same bits)."""
    sets = " ".join(f"--set {k}={v}" for k, v in replay_overrides(spec).items())
    return f"ppage-jax run {config_path} {sets}"


def replay_overrides(spec: SearchSpec) -> dict[str, object]:
    """The experiment keys that put a run on the re-evaluation's seeds and layouts."""
    re = spec.reevaluate
    out: dict[str, object] = {
        "experiment.seed": re.train_seed,
        "experiment.num_seeds": re.seeds,
        "experiment.eval.seed": re.eval_seed,
        "experiment.eval.episodes": re.episodes,
    }
    if spec.eval_max_steps is not None:
        out["experiment.eval.max_steps"] = spec.eval_max_steps
    return out


def replay_schedule(spec: SearchSpec, part: SweepSpec, setup: RunSetup) -> tuple[dict, list]:
    """A PBT pick (``part``: its one arm, on the schedule's config) trained and evaluated by
    the program ``ppage-jax run`` runs: the seeds vmapped in the runner's compiled chunks
    under the config's curriculum, then the run's evaluation rows on the re-evaluation's
    layouts, the row of the search's evaluation policy kept. So the replay
    (:func:`replay_command`) reproduces the re-evaluated scores bit for bit. Results and
    episode rows as :func:`run_parts` (``setup``'s train function is not used)."""
    from ppage_jax.analysis.batch.metrics import curve_rows, run_metrics
    from ppage_jax.analysis.batch.program import take
    from ppage_jax.env import make
    from ppage_jax.tracking.status import phase
    from ppage_jax.train.run.curriculum import config_curriculum
    from ppage_jax.train.run.evaluate import evaluate_episodes, rows_for
    from ppage_jax.train.run.experiment import make_train_config
    from ppage_jax.train.run.runner import run_training

    (selected,) = part.arms
    config = part.config.with_overrides(replay_overrides(spec))
    run_env = make(config)
    tc = make_train_config(config, run_env)
    params = run_env.default_params
    ev = config["experiment"]["eval"]
    row = "trained_greedy" if spec.eval_policy == "greedy" else "trained"
    which = rows_for(tc)
    if row not in which:  # a deterministic learner: its one row is its greedy policy
        row = "trained"
    with (
        phase(
            f"re-evaluation: {selected.name}'s schedule, {part.seeds} seeds trained as "
            f"ppage-jax run trains them, then {ev['episodes']} held-out episodes each",
            stderr=True,
        )
        if setup.progress
        else contextlib.nullcontext()
    ):
        result = run_training(
            tc, params, part.train_seed, part.seeds, curriculum=config_curriculum(config)
        )
        played = evaluate_episodes(
            tc, result.policies, params, ev["seed"], ev["episodes"], ev["max_steps"], which
        )[row]
    env = setup.env
    monitor = arm_monitors(part.config, env, part.arm_params(env), [selected.name], part.eval_seed)
    recorder = SweepRecorder(setup.loggers, Path(setup.out_dir) / "reevaluation", part)
    results: dict = {}
    rows: list = []
    # a learner without parameters (random) plays one policy: one row of episodes, the
    # same for every seed
    per_seed = len(played["captured"]) == part.seeds
    for j in range(part.seeds):
        seed = part.train_seed + j
        episodes = take(played, j if per_seed else 0)
        result_j = run_metrics(run_env, episodes, setup.horizon)
        curve = curve_rows(run_env, take(result.metrics, j), tc.env_steps_per_update)
        result_j.update(monitor_run(monitor[selected.name], seed, curve))
        results[selected.name, seed] = result_j
        recorder.add(selected.name, seed, result_j, curve)
        for e, (length, captured) in enumerate(
            zip(episodes["episode_length"], episodes["captured"], strict=True)
        ):
            rows.append((selected.name, seed, e, int(length), int(captured)))
    return results, rows


def run_parts(parts: Sequence[SweepSpec], config: Config, setup: RunSetup) -> tuple[dict, list]:
    """Train and evaluate every arm x seed of each sweep spec of ``parts`` (one compiled
    program each; ``setup.train_fn`` only for those on ``config``, the search's own): results
    ``{(arm, seed): metrics}`` (with the monitor's columns) and episode rows ``(arm, seed,
    episode, length, captured)``."""
    from tqdm.auto import tqdm

    from ppage_jax.analysis.search.programs import RunProgram

    total = sum(len(p.arms) * p.seeds for p in parts)
    bar = tqdm(total=total, unit="run", desc="re-evaluation", disable=not setup.progress)
    env = setup.env
    results: dict = {}
    rows: list = []
    for part in parts:
        own_train = setup.train_fn if part.config is config else None
        program = RunProgram(part, env, own_train, None, setup.env_steps_per_update)
        runs, keys, inputs = program.inputs(part)
        metrics, episodes = program(keys, inputs)
        bar.update(len(runs))
        names = [a.name for a in part.arms]
        monitors = arm_monitors(part.config, env, part.arm_params(env), names, part.eval_seed)
        recorder = SweepRecorder(setup.loggers, Path(setup.out_dir) / "reevaluation", part)
        lengths = np.asarray(episodes["episode_length"])
        captured = np.asarray(episodes["captured"])
        for j, (arm, seed) in enumerate(runs):
            result, curve = program.results(metrics, episodes, j, setup.horizon)
            result.update(monitor_run(monitors[arm], seed, curve))
            results[arm, seed] = result
            recorder.add(arm, seed, result, curve)
            for e in range(lengths.shape[1]):
                rows.append((arm, seed, e, int(lengths[j, e]), int(captured[j, e])))
    bar.close()
    return results, rows
