"""Train the configured algorithm (the main job), evaluate it on held-out seeds beside
baselines (random and greedy-chase predators against the same prey; random and greedy-evade
prey against the same predators), and write a run directory: config.yaml (resolved, with its
hash), metrics.csv, checkpoint.msgpack, summary.json, learning_curves.png,
capture_curves.png, episode.gif and episode.html (one episode of the trained policy as the
headline row plays it, sampled for a stochastic learner, captioned with that row's RMST).

Training checkpoints are written to RUN_DIR/checkpoints every experiment.checkpoint_every
updates: after Ctrl-C (exit 130) or a crash, `ppage-jax run --resume RUN_DIR` continues and
ends with the same metrics and parameters. A directory that already holds a run is refused
unless --resume or --overwrite is given; a diverging run (NaN or inf loss, return or
parameter) stops with exit status 1 (docs/runs.md).

On several processes (`ppage-jax launch -n N -- run ...`, or --coordinator/--num-processes/
--process-id) each process trains its share of experiment.num_seeds (a multiple of the
device count) and process 0 alone writes the run directory and evaluates (docs/scaling.md)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ppage_jax import distributed
from ppage_jax.artifacts import (
    DirectoryLock,
    OutputError,
    fault,
    prepare_output_dir,
    remove_partial_files,
)
from ppage_jax.cli.args import (
    EXIT_BAD_INPUT,
    EXIT_DIVERGED,
    add_config_arguments,
    add_import_argument,
    add_output_arguments,
    flags_given,
    import_flags,
    import_user_modules,
    load_cli_config,
)
from ppage_jax.compilation.times import CompileTimes
from ppage_jax.defaults import VERSION
from ppage_jax.tracking.status import phase, refreshing
from ppage_jax.train.run.interrupt import EXIT_INTERRUPTED, StopRequest

if TYPE_CHECKING:
    from ppage_jax.config import Config
    from ppage_jax.train.run.divergence import DivergenceError

MULTI_PROCESS = True
# The training bar: tqdm's own rate left out (its first update includes the compile), the
# postfix carries the throughput since the first chunk (on_chunk).
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, required=False)
    add_import_argument(parser)
    parser.set_defaults(config=None)
    parser.add_argument(
        "--out",
        metavar="RUN_DIR",
        default=None,
        help="run directory (default: <output_dir>/<algorithm>-<hash>-<time>)",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN_DIR",
        default=None,
        help="continue the interrupted run in RUN_DIR from its last checkpoint "
        "(with its own config.yaml)",
    )
    add_output_arguments(parser, "replace the run already in --out (its artifacts and checkpoints)")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 3 when the reward-hacking monitor flags the run",
    )
    distributed.add_arguments(parser)


def open_run(args: argparse.Namespace) -> tuple[Path, Config, bool, DirectoryLock]:
    """``(run_dir, config, resuming, lock)``: a new run directory (refused when it holds a
    run, unless --overwrite) or the one to resume, locked for this process (a second writer
    is refused, naming this one's PID); :class:`OutputError` (one line) otherwise. A new
    run's config is read and checked before JAX and the learners load."""
    if args.resume is None:
        if args.config is None:
            raise OutputError("give CONFIG_DIR to start a run, or --resume RUN_DIR to continue one")
        config = load_cli_config(args)
        from ppage_jax.train.run import report

        run_dir, lock = report.prepare_run_dir(config, args.out, args.overwrite)
        return run_dir, config, False, lock
    from ppage_jax.config import load_config
    from ppage_jax.train.run import report

    given = flags_given(
        [
            ("CONFIG_DIR", args.config),
            ("--set", args.overrides),
            ("--experiment", args.experiment),
            ("--out", args.out),
            ("--overwrite", args.overwrite),
        ]
    )
    if given:
        raise OutputError(
            f"--resume continues {args.resume} with its own "
            f"{report.CONFIG_FILE}; drop {', '.join(given)}"
        )
    run_dir = Path(args.resume)
    try:
        is_run = (run_dir / report.CONFIG_FILE).is_file()
    except OSError as err:  # a name the OS refuses (too long)
        raise OutputError(f"cannot use run directory {run_dir}: {err.strerror or err}") from None
    if not is_run:
        raise OutputError(f"{run_dir} is not a run directory (no {report.CONFIG_FILE})")
    prepare_output_dir(run_dir, "run directory")
    lock = DirectoryLock(run_dir, "run directory").acquire()
    try:
        remove_partial_files(run_dir)
        return run_dir, load_config(run_dir / report.CONFIG_FILE), True, lock
    except BaseException:
        lock.release()
        raise


def open_shared_run(args: argparse.Namespace) -> tuple[Path, Config, bool, DirectoryLock | None]:
    """:func:`open_run` on process 0; the other processes get its run directory (and load
    the same config) or its refusal."""
    if not distributed.is_initialized():  # one process
        return open_run(args)
    from ppage_jax.config import ConfigError, load_config
    from ppage_jax.train.run import report

    opened, found, error = None, None, None
    if distributed.is_writer():
        try:
            opened = open_run(args)
            found = {"run_dir": str(opened[0]), "resuming": opened[2]}
        except (OutputError, ConfigError) as err:
            found, error = {"error": str(err)}, err
    found = distributed.share(found)
    if error is not None:
        raise error
    if "error" in found:
        raise OutputError(found["error"])
    if opened is not None:
        return opened
    run_dir = Path(found["run_dir"])
    if found["resuming"]:
        return run_dir, load_config(run_dir / report.CONFIG_FILE), True, None
    return run_dir, load_cli_config(args), False, None


def main(args: argparse.Namespace) -> int:
    distributed.initialize_from_args(args)  # before any JAX work
    import_user_modules(args.imports)  # before the config names their terms
    run_dir, config, resuming, lock = open_shared_run(args)
    from ppage_jax.compilation.programs import program_store

    args.programs = program_store()  # compiled programs kept whole, beside the compile cache
    try:
        with CompileTimes() as compile_times:  # summary.json's compile_seconds_by_program
            args.compile_times = compile_times
            return train_and_report(args, run_dir, config, resuming)
    finally:
        if lock is not None:
            lock.release()


def train_and_report(
    args: argparse.Namespace, run_dir: Path, config: Config, resuming: bool
) -> int:
    """Train (or resume) the run in ``run_dir``, evaluate it and write its artifacts."""
    import jax

    from ppage_jax.tracking.training import TrainingRecorder
    from ppage_jax.train import make_train_config
    from ppage_jax.train.run import report
    from ppage_jax.train.run.checkpoint import CheckpointError, TrainingCheckpoints
    from ppage_jax.train.run.curriculum import config_curriculum
    from ppage_jax.train.run.divergence import DivergenceError
    from ppage_jax.train.run.runner import prefetch_training, run_training

    lead = distributed.is_writer()
    tc = make_train_config(config)
    exp = config["experiment"]
    if jax.process_count() > 1 and exp["num_seeds"] % jax.device_count():  # seeds are split
        print(
            f"ppage-jax run: with {jax.process_count()} processes, experiment.num_seeds must "
            f"be a multiple of the {jax.device_count()} devices; got {exp['num_seeds']}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    say = print if lead else (lambda *_, **__: None)
    params = tc.env.default_params
    resume_command = f"ppage-jax run --resume {run_dir}{import_flags(args.imports)}"
    checkpoints = TrainingCheckpoints(
        run_dir / report.TRAINING_CHECKPOINTS, tc, exp["checkpoint_every"]
    )
    try:
        latest = checkpoints.latest()  # a bad checkpoint fails now, before any work
    except CheckpointError as err:
        say(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if resuming and (run_dir / report.SUMMARY_FILE).is_file():
        say(f"{run_dir} is already complete ({report.SUMMARY_FILE}); nothing to resume")
        return 0
    if resuming:
        say(
            f"resuming {run_dir} from "
            + (f"update {latest['updates']}" if latest else "the start (no checkpoint was written)")
        )
    elif lead:
        report.write_config(run_dir, config)
    restored_steps = (latest["updates"] if latest else 0) * tc.env_steps_per_update
    curriculum = config_curriculum(config)
    # the stored programs load in threads meanwhile (XLA loads without holding the GIL),
    # and Orbax is imported for the first checkpoint
    prefetch_training(
        args.programs, tc, params, exp["seed"], exp["num_seeds"], curriculum=curriculum
    )
    checkpoints.import_soon()
    say(describe_run(config, tc))
    # the loggers and the monitor's start (its untrained run) before training is announced:
    # from that line on, Ctrl-C stops after the current chunk
    starting = (
        phase("the reward-hacking monitor's start: random actions on held-out layouts")
        if lead and exp["monitor"]["enabled"]
        else contextlib.nullcontext()
    )
    with starting:
        recorder = TrainingRecorder(tc, config, params, run_dir, args.logger if lead else ())
    roles = ", ".join(f"{r}s: {p}" for r, p in zip(("predator", "prey"), tc.roles, strict=True))
    say(
        f"training {tc.algorithm} ({roles}): "
        f"{exp['num_seeds']} seed(s) x {tc.num_envs} grids x {tc.num_updates} updates of "
        f"{tc.steps_per_update} turns on {jax.devices()[0].platform} -> {run_dir}"
    )

    bar = TrainingBar(tc, recorder, exp["num_seeds"], restored_steps, lead, args.no_progress)
    with StopRequest("stopping after the current chunk (Ctrl-C again to quit at once)") as stop:
        try:
            with refreshing(bar.bar):  # the elapsed time moves while a compile or a chunk runs
                result = run_training(
                    tc,
                    params,
                    exp["seed"],
                    exp["num_seeds"],
                    bar.on_chunk,
                    curriculum=curriculum,
                    checkpoints=checkpoints,
                    should_stop=stop,
                    programs=args.programs,
                )
        except CheckpointError as err:
            bar.close()
            say(f"error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except DivergenceError as err:
            bar.close()
            if not lead:
                return EXIT_DIVERGED
            return diverged(err, tc, run_dir, recorder, resume_command)
        finally:
            checkpoints.close()
        bar.close()
        if not lead:  # process 0 evaluates and writes the run directory
            recorder.close()
            return EXIT_INTERRUPTED if result.stopped else 0
        if result.stopped:
            kept = (
                f"checkpoint of update {result.checkpoint} in {checkpoints.directory}"
                if result.checkpoint is not None
                else f"{run_dir / report.CONFIG_FILE} (no update finished)"
            )
            print(f"interrupted: kept {kept}; resume with: {resume_command}", file=sys.stderr)
            recorder.close()
            return EXIT_INTERRUPTED
        return finish(args, config, tc, run_dir, result, recorder, stop, resume_command)


class TrainingBar:
    """The training progress bar and its ``on_chunk``: env steps over every seed, one
    throughput figure (since the first chunk, so the compile is left out), the chunk's
    capture rate and episode length, and the monitor's flags written above the bar."""

    def __init__(
        self, tc, recorder, num_seeds: int, restored_steps: int, lead: bool, quiet: bool
    ) -> None:
        from tqdm import tqdm

        self.tc, self.recorder, self.num_seeds, self.lead = tc, recorder, num_seeds, lead
        done_before = restored_steps * num_seeds
        self.bar = tqdm(
            total=tc.num_updates * tc.env_steps_per_update * num_seeds,
            unit="step",
            unit_scale=True,
            disable=quiet or not lead,
            desc="compiling",
            dynamic_ncols=True,
            initial=done_before,
            bar_format=BAR_FORMAT,  # one throughput figure: on_chunk's, compile excluded
        )
        self.steps, self.start_steps = done_before, done_before
        self.start: float | None = None

    def on_chunk(self, metrics: dict, env_steps: int, runner) -> None:
        import numpy as np
        from tqdm import tqdm

        for flag in self.recorder.add_chunk(metrics, env_steps):
            if self.lead:
                tqdm.write(flag.message)
        done = env_steps * self.num_seeds
        now = time.perf_counter()
        if self.start is None:  # the first chunk includes the compile: time from here
            self.bar.set_description(self.tc.algorithm)
            self.start, self.start_steps = now, done
        self.bar.update(done - self.steps)
        self.steps = done
        elapsed = now - self.start
        rate = (done - self.start_steps) / elapsed if elapsed > 0 else float("nan")
        active = np.asarray(metrics["active"])
        capture = np.asarray(metrics["capture_rate"])[active]
        length = np.asarray(metrics["episode_length"])[active]
        parts = [f"{rate:,.0f} env-steps/s"] if np.isfinite(rate) else []
        if np.isfinite(capture).any():  # a chunk with finished episodes
            parts += [f"capture {np.nanmean(capture):.2f}", f"ep len {np.nanmean(length):.1f}"]
        self.bar.set_postfix_str(", ".join(parts))

    def close(self) -> None:
        self.bar.close()


def describe_run(config: Config, tc) -> str:
    """The line that names what the run trains on: config, agents, grid, observation, terms."""
    env = tc.env
    return (
        f"config {config.path} (hash {tc.config_hash}): {env.num_agents} agents "
        f"{list(env.agent_names)}, {env.layout.size}x{env.layout.size}, "
        f"{env.layout.num_obstacles} obstacles, observation {env.observation.name} "
        f"({env.observation_size}), terms {list(env.reward_terms)}"
    )


def diverged(err: DivergenceError, tc, run_dir: Path, recorder, resume_command: str) -> int:
    """Report a diverged run: the error, metrics.csv up to it, the last good checkpoint."""
    from ppage_jax.train.run import report

    recorder.close()
    if err.metrics:
        report.write_metrics(run_dir, recorder.final_rows(err.metrics))
    kept = (
        f"the last good checkpoint is update {err.checkpoint} in "
        f"{run_dir / report.TRAINING_CHECKPOINTS}"
        if err.checkpoint is not None
        else "no checkpoint was written before it"
    )
    hint = (
        "check the named reward term: it returned a non-finite value"
        if "reward term" in str(err)
        else "lower the learning rate or check the reward weights"
    )
    print(
        f"error: {err}; {kept}; {run_dir / report.METRICS_FILE} holds every update up to "
        f"it ({hint})",
        file=sys.stderr,
    )
    return EXIT_DIVERGED


def picture_label(algorithm: str, row: dict) -> str:
    """The caption of episode.gif and episode.html: who plays, and the headline row's RMST
    (``row`` is the evaluation's ``trained`` row)."""
    from ppage_jax.stats.survival import number_text

    return (
        f"{algorithm}: {row['predators']} predators vs {row['prey']} prey, seed 0; "
        f"evaluation row 'trained': RMST {number_text(row['rmst'])} turns"
    )


def finish(
    args: argparse.Namespace,
    config: Config,
    tc,
    run_dir: Path,
    result,
    recorder,
    stop,
    resume_command: str,
) -> int:
    """Evaluate the trained policy and write the run's artifacts (summary.json last)."""

    from ppage_jax.cli.evaluate import run_evaluation
    from ppage_jax.train.run import report
    from ppage_jax.train.run.checkpoint import save_checkpoint
    from ppage_jax.train.run.policy import trained_policy
    from ppage_jax.train.run.report import monitor_table
    from ppage_jax.viz.run_figures import plot_learning_curves, read_metrics
    from ppage_jax.viz.run_gif import GIF_FILE
    from ppage_jax.viz.run_pictures import write_run_pictures

    exp = config["experiment"]
    params = tc.env.default_params

    def interrupted() -> bool:
        if stop():
            print(
                f"interrupted after training (its checkpoint, update {result.checkpoint}, "
                f"is kept); resume with: {resume_command} to write the evaluation and "
                f"reports",
                file=sys.stderr,
            )
        return stop()

    steps_per_second = result.env_steps * exp["num_seeds"] / result.seconds
    running = max(result.seconds - result.compile_seconds, 1e-9)
    steps_after_compile = result.env_steps * exp["num_seeds"] / running
    print(
        f"trained {result.env_steps:,} env steps per seed in {result.seconds:.1f} s "
        f"({steps_per_second:,.0f} env-steps/s incl. {result.compile_seconds:.1f} s compile; "
        f"{steps_after_compile:,.0f} after it)"
        + (f"; resumed from update {result.resumed_from}" if result.resumed_from else "")
    )

    rows = recorder.final_rows(result.metrics)  # report.metric_rows + monitor columns
    report.write_metrics(run_dir, rows)
    save_checkpoint(run_dir / report.CHECKPOINT_FILE, tc, result.policies)

    ev = exp["eval"]
    if interrupted():
        return EXIT_INTERRUPTED
    fault("eval")  # testing hook: killed during the evaluation
    evaluation = run_evaluation(run_dir, config, tc, result.policies, params)
    if interrupted():
        return EXIT_INTERRUPTED
    # the figures are drawn from what the run saved: metrics.csv and the evaluation
    with phase("drawing learning_curves.png, episode.gif and episode.html"):
        plot_learning_curves(
            run_dir,
            read_metrics(run_dir / report.METRICS_FILE),
            tc.algorithm,
            evaluation["rows"].get("random"),
        )
        # The pictures show the policy of the headline row ("trained": sampled for a
        # stochastic learner), seed 0, labelled with that row's RMST.
        policy = trained_policy(tc, result.policies, params, mode="sampled")
        label = picture_label(tc.algorithm, evaluation["rows"]["trained"])
        write_run_pictures(run_dir, tc.env, policy, params, seed=ev["seed"], label=label)
    if interrupted():
        return EXIT_INTERRUPTED
    summary = run_summary(config, tc, result, rows, evaluation, recorder)
    summary["compile_seconds_by_program"] = args.compile_times.by_program()
    # programs loaded whole from the program store (no tracing, no compile)
    summary["programs_loaded"] = list(args.programs.loaded) if args.programs else []
    report.write_summary(run_dir, summary)
    recorder.finish(evaluation, run_dir / GIF_FILE)
    print("\n" + monitor_table(recorder.monitor.summary(), exp["num_seeds"]))
    spent = recorder.seconds()
    print(
        "tracking: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in spent.items())
        + f" ({100 * sum(spent.values()) / result.seconds:.1f} % of the "
        f"{result.seconds:.1f} s of training)"
    )
    print(f"\nrun directory: {run_dir}")
    if args.strict:
        return strict_verdict(exp["monitor"], recorder.monitor)
    return 0


def run_summary(config: Config, tc, result, rows: list[dict], evaluation: dict, recorder) -> dict:
    """summary.json's fields (``compile_seconds_by_program`` is added by the caller)."""
    import jax
    import numpy as np

    from ppage_jax.train.run import report

    exp = config["experiment"]
    running = max(result.seconds - result.compile_seconds, 1e-9)
    return {
        "version": VERSION,
        "config_hash": tc.config_hash,
        "algorithm": tc.algorithm,
        "roles": dict(zip(("predators", "preys"), tc.roles, strict=True)),
        "num_seeds": exp["num_seeds"],
        "num_envs": tc.num_envs,
        "num_updates_run": int(np.asarray(result.metrics["active"]).shape[1]),
        "env_steps_per_seed": result.env_steps,
        "train_seconds": result.seconds,
        "compile_seconds": result.compile_seconds,
        "resumed_from_update": result.resumed_from,
        # end to end: compile included
        "env_steps_per_second": result.env_steps * exp["num_seeds"] / result.seconds,
        "train_seconds_excluding_compile": running,
        "env_steps_per_second_excluding_compile": result.env_steps * exp["num_seeds"] / running,
        # host work between chunks (metrics, monitor, bar, checkpoints, divergence checks),
        # whether or not it overlapped the next chunk
        "host_seconds": result.host_seconds,
        "host_share": result.host_seconds / running,
        "device": str(jax.devices()[0]),
        "final_training": report.last_active_rows(rows),
        "evaluation": evaluation,
        "monitor": recorder.monitor.summary(),
    }


def strict_verdict(monitor_config: dict, monitor) -> int:
    """``--strict``'s exit status: 3 when the reward-hacking monitor flagged the run, else
    0, saying so when nothing was checked."""
    if not monitor_config["enabled"]:
        print(
            "--strict: nothing was checked, the reward-hacking monitor is disabled "
            "(experiment.monitor.enabled: false)"
        )
    elif not monitor.windows_checked:
        print(
            "--strict: nothing was checked, the run is shorter than one monitor window "
            f"({monitor_config['window']} blocks of >= {monitor_config['min_episodes']} "
            "episodes after the warm-up)"
        )
    if monitor.flags:
        print("--strict: the reward-hacking monitor flagged this run (exit status 3)")
        return 3
    return 0
