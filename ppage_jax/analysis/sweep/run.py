"""Reward-ablation sweeps: every (arm, seed) run as one compiled program.

A sweep (``ppage_jax.analysis.sweep.spec``) lists arms (reward designs in one shared term
structure) and a number of seeds. Each run trains with ``train(key, params)`` and then plays
the held-out evaluation block greedily; the runs are stacked on one leading axis (arm-major,
seed ``i`` of every arm starting from the same key, so environment seeds are paired across
arms), split across every process's devices with :mod:`ppage_jax.sharding`, and executed in
chunks of one compiled program (the last chunk padded, so every chunk reuses the same
executable; sized from the device memory when not given,
:mod:`ppage_jax.analysis.batch.program`). With several processes
(:mod:`ppage_jax.distributed`) every process runs ``run_sweep`` with the same arguments, and
only process 0 reads and writes the output directory, reports and logs. Results are
committed after every chunk (:mod:`.writer`), so an interrupted sweep keeps what finished
and ``run_sweep(..., resume=True)`` (``ppage-jax sweep --resume OUT_DIR``) runs only the
rest:

- ``audit.csv``: the reward audit of every arm, run before training
  (:mod:`ppage_jax.analysis.batch.auditing`; skipped with ``audit: false``, and on resume
  when the file is there);
- ``baselines.csv``: the fixed baselines (random and greedy BFS chase or evade) on the same
  held-out layouts (:mod:`.baselines`; kept on resume);
- ``results.csv``: tidy ``arm, seed, metric, value`` rows of the evaluation (capture rate,
  time to capture censored at the step limit: ``rmst`` and ``km_median``, the share that hit
  the limit, episode length, steps to capture of the captured episodes, base-reward return
  per role at unit weight, per-term return per role as paid;
  :mod:`ppage_jax.analysis.batch.metrics`) and of the reward-hacking monitor over the run's
  training curve (``monitor/...`` flags and ``monitor_first/...`` env steps;
  :mod:`ppage_jax.analysis.batch.monitoring`);
- ``curves.csv``: ``arm, seed, update, env_steps, metric, value`` per training update;
- ``sweep.json``: the resolved arms, seeds and timings; then ``report.md`` and plots
  (:mod:`ppage_jax.analysis.sweep.report`).

Modules of this package: ``spec`` (the sweep file), ``plan`` (what a sweep runs, settled
first), ``chunks`` (compiling, then training, scoring and keeping chunk after chunk),
``baselines`` (the fixed baselines), ``writer`` (files), ``run`` (:func:`run_sweep`:
:func:`plan_sweep`, then the stages in order), ``report`` and ``figures``. The trainers, the
program, the per-run metrics, the monitor and the audit rows are
:mod:`ppage_jax.analysis.batch`'s, shared with the reward search.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppage_jax import distributed
from ppage_jax.analysis.batch.auditing import AUDIT_FILE, audit_rows, write_audit
from ppage_jax.analysis.batch.monitoring import arm_monitors, describe_monitors
from ppage_jax.analysis.batch.output import MANIFEST, identity_hash
from ppage_jax.analysis.batch.spec import SweepSpec
from ppage_jax.analysis.batch.trainers import EvalFn, TrainFn
from ppage_jax.analysis.family.endpoints import DERIVED, NoHeadroom, score_scale
from ppage_jax.analysis.family.paired import COMPARISONS_FILE
from ppage_jax.analysis.sweep.baselines import (
    BASELINES_FILE,
    CHECKPOINT_BLOCK,
    EVAL_BLOCK,
    baseline_levels,
    baseline_rows,
    write_baselines,
)
from ppage_jax.analysis.sweep.chunks import (
    FinishedRuns,
    choose_chunk_size,
    compile_unfinished,
    stop_signal,
    train_chunks,
)
from ppage_jax.analysis.sweep.plan import SweepPlan, Writer, open_writer, plan_sweep
from ppage_jax.analysis.sweep.spec import ScenarioSweep
from ppage_jax.analysis.sweep.writer import DESCRIPTION, MANIFEST_FORMAT, resumed_manifest
from ppage_jax.artifacts import clear_output, prepare_output_dir, write_json
from ppage_jax.config import ConfigError
from ppage_jax.tracking.status import status
from ppage_jax.tracking.sweep import SweepRecorder


def keep_resumed_layout(plan: SweepPlan, writer: Writer, layout: str | None) -> SweepPlan:
    """``plan`` with the layout of the sweep ``writer`` resumes (a resumed sweep keeps its
    own, recorded again in sweep.json); ValueError when ``layout`` asks for another one."""
    if writer.layout is None or writer.layout == plan.layout:
        return plan
    if layout is not None:
        raise ValueError(
            f"layout {layout!r} differs from the sweep's {writer.layout!r}: a resumed "
            f"sweep keeps its layout (the two give different floats)"
        )
    writer.write_description(layout=writer.layout)
    return dataclasses.replace(plan, layout=writer.layout)


def start_sweep(plan: SweepPlan, writer: Writer, say: Callable[[str], Any]) -> dict:
    """The reward-hacking monitors of every arm, then process 0's stages before training
    (:func:`before_training`), each announced by ``say``: the monitors (empty on the other
    processes)."""
    spec = plan.spec
    say(f"the monitors' start: random actions under each of {len(plan.arm_names)} arms")
    if not distributed.is_writer():
        return {}
    monitors = arm_monitors(spec.config, plan.env, plan.arm_params, plan.arm_names, spec.eval_seed)
    if spec.audit and not (plan.out_dir / AUDIT_FILE).is_file():
        say(f"auditing the rewards of {len(plan.arm_names)} arms with baseline policies")
    if not (plan.out_dir / BASELINES_FILE).is_file():
        say(f"the baselines on {spec.eval_episodes} held-out layouts")
    before_training(plan, writer, monitors)
    return monitors


def audit_stage(plan: SweepPlan) -> None:
    """audit.csv: the reward audit of every arm (skipped with ``audit: false``, and on
    resume when the file is there)."""
    if plan.spec.audit and not (plan.out_dir / AUDIT_FILE).is_file():
        rows = audit_rows(plan.env, plan.arm_params, plan.arm_names, plan.horizon)
        write_audit(plan.out_dir, rows)


def baselines_stage(plan: SweepPlan) -> None:
    """baselines.csv: the fixed baselines on the held-out layouts, and on the checkpoint
    block when the sweep has one (kept on resume); then the headroom the declared analysis
    needs (:func:`check_headroom`)."""
    path = plan.out_dir / BASELINES_FILE
    if not path.is_file():
        spec, env = plan.spec, plan.env
        blocks = [(EVAL_BLOCK, spec.eval_seed, spec.eval_episodes)]
        if spec.checkpoints is not None:
            points = spec.checkpoints
            blocks.append((CHECKPOINT_BLOCK, points.seed, points.episodes))
        rows = []
        for block, seed, episodes in blocks:
            rows += baseline_rows(
                spec.config, env, env.default_params, seed, episodes, spec.eval_max_steps, block
            )
        write_baselines(plan.out_dir, rows)
    check_headroom(plan.spec, path)


def check_headroom(spec: SweepSpec, path: Path) -> None:
    """A ConfigError at ``sweep.analysis.endpoint`` when the declared analysis reads the
    normalised score (``score``, ``auc``) and the baselines in ``path`` leave no headroom
    between random and the scripted policy (:func:`score_scale`), before anything trains."""
    needs = [e for e in spec.analysis.endpoints if e in DERIVED]
    if not spec.analysis.declared or not needs:
        return
    block = CHECKPOINT_BLOCK if needs == ["auc"] else EVAL_BLOCK
    where = f"scenario {spec.scenario}: " if spec.scenario else ""
    try:
        score_scale(baseline_levels(path, block), where)
        if "auc" in needs:
            score_scale(baseline_levels(path, CHECKPOINT_BLOCK), where)
    except NoHeadroom as err:
        raise ConfigError(spec.path, "sweep.analysis.endpoint", needs[0], str(err)) from None


def before_training(plan: SweepPlan, writer: Writer, monitors: dict) -> None:
    """Process 0's stages before anything trains: the monitor's settings into sweep.json,
    then :func:`audit_stage` and :func:`baselines_stage`."""
    writer.write_description(
        monitor=describe_monitors(plan.spec.config, monitors), audit=plan.spec.audit
    )
    audit_stage(plan)
    baselines_stage(plan)


def run_scenarios(
    spec: ScenarioSweep,
    output_dir: str | Path | None = None,
    report: bool = True,
    *,
    resume: bool = False,
    overwrite: bool = False,
    source: dict | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Run a sweep with ``scenarios``: each scenario's sweep in turn, in its own directory
    ``OUT/<scenario>`` (:func:`run_sweep`, with ``kwargs``), then the family's analysis over
    all of them at the top (report.md, comparisons.csv). The top directory's manifest.json
    holds the identity of the whole (every scenario's) and ``source``, for ``--resume``; a
    resumed scenario sweep resumes where its own manifest is, and starts where none is yet.

    Returns ``{"scenarios": {name: run_sweep's summary}, "seconds", "output_dir",
    "stopped", "report"}``, the summaries of the scenarios that ran (it stops at the first
    one that stops)."""
    out = prepare_output_dir(Path(output_dir or spec.output_dir), "sweep directory")
    lead = distributed.is_writer()
    names = (MANIFEST, DESCRIPTION, "report.md", COMPARISONS_FILE, *spec.scenarios)
    identity = identity_hash(
        {
            name: {k: v for k, v in sub.describe().items() if k not in ("sweep", "config")}
            for name, sub in spec.scenarios.items()
        }
    )
    if lead:
        if resume:
            resumed_manifest(out, identity)
        else:
            clear_output(out, names, "sweep", overwrite, f"--resume {out}")
            write_json(
                out / MANIFEST,
                {"format": MANIFEST_FORMAT, "identity": identity, "source": source},
                indent=1,
            )
    summaries, seconds, stopped = {}, 0.0, False
    for name, sub in spec.scenarios.items():
        where = out / name
        again = resume and (where / MANIFEST).is_file()
        summary = run_sweep(
            sub, output_dir=where, report=report, resume=again, overwrite=False, **kwargs
        )
        summaries[name] = summary
        seconds += _recorded_seconds(where)
        if summary["stopped"]:
            stopped = True
            break
    result: dict[str, Any] = {
        "scenarios": summaries,
        "seconds": seconds,
        "output_dir": str(out),
        "stopped": stopped,
    }
    if lead:
        write_json(out / DESCRIPTION, dict(spec.describe(), seconds=round(seconds, 2)), indent=2)
        if report and not stopped:
            from ppage_jax.analysis.sweep.report import write_report

            result["report"] = str(write_report(out))
    return result


def _recorded_seconds(directory: Path) -> float:
    """The ``seconds`` a sweep directory's sweep.json records (0 when none)."""
    try:
        return float(json.loads((directory / DESCRIPTION).read_text()).get("seconds") or 0.0)
    except (OSError, ValueError):
        return 0.0


def run_sweep(
    spec: SweepSpec | ScenarioSweep,
    train_fn: TrainFn | None = None,
    eval_fn: EvalFn | None = None,
    env_steps_per_update: int | None = None,
    output_dir: str | Path | None = None,
    progress: bool = True,
    report: bool = True,
    loggers: Sequence[str] = (),
    *,
    resume: bool = False,
    overwrite: bool = False,
    should_stop: Callable[[], bool] | None = None,
    source: dict | None = None,
    memory_budget_bytes: int | str | None = None,
    layout: str | None = None,
) -> dict[str, Any]:
    """Run every (arm, seed) of ``spec``; write results as chunks finish; return a summary.

    ``train_fn``/``eval_fn`` default to the config's training algorithm and greedy
    evaluation on the held-out block (:func:`~ppage_jax.analysis.batch.trainers.trainer_functions`);
    pass your own to sweep anything with the same contract. Chunks: ``spec.chunk_size`` runs
    per call, else as many runs as fit the memory budget: ``memory_budget_bytes`` (bytes or
    ``"512M"``) or ``PPAGE_JAX_MEMORY_BUDGET`` when set, else 70 % of the device's memory
    (:func:`~ppage_jax.analysis.batch.program.memory_budget`), starting from
    :data:`~ppage_jax.analysis.sweep.chunks.CPU_CHUNKS` chunks on CPU without a set budget
    (for the progress bar and early results). ``layout`` (``"vmap"``, the default, or
    ``"sequential"``: :func:`~ppage_jax.analysis.sweep.plan.choose_layout`) says
    whether a chunk trains as one vmapped program or run after run in a program compiled
    for one run: the same computation, rounded differently by XLA, so learned runs differ
    in their floats between layouts (a resumed sweep keeps its layout).
    ``loggers`` (``ppage_jax.tracking`` backends) receive every run as it finishes.

    An output directory that already holds a sweep is refused
    (:class:`~ppage_jax.artifacts.OutputError`) unless ``resume`` (the same sweep: finished
    chunks are read back, the others run with the recorded chunk size, giving the same
    results.csv as an uninterrupted sweep) or ``overwrite``. ``should_stop()`` is asked
    between chunks; when true the sweep stops there (``summary["stopped"]``, no report).
    ``source`` (how to rebuild ``spec``) is recorded for ``ppage-jax sweep --resume``.

    With several processes the runs are split over every process's devices (a chunk is a
    multiple of the global device count); only process 0 writes, reports and logs, and
    its summary alone holds the results (the others' ``results`` and ``curves`` are empty).

    Returns ``{"runs", "results", "curves", "chunk_size", "chunks", "chunks_run", "layout",
    "compile_seconds", "seconds", "output_dir", "stopped"}`` (results: {(arm, seed):
    metrics}; ``chunks`` counts the finished chunks, ``chunks_run`` those run by this call).
    A :class:`~ppage_jax.analysis.sweep.spec.ScenarioSweep` runs through
    :func:`run_scenarios` and returns its summary.
    """
    if isinstance(spec, ScenarioSweep):  # one sweep per scenario, then the family
        return run_scenarios(
            spec,
            output_dir,
            report,
            resume=resume,
            overwrite=overwrite,
            source=source,
            train_fn=train_fn,
            eval_fn=eval_fn,
            env_steps_per_update=env_steps_per_update,
            progress=progress,
            loggers=loggers,
            should_stop=should_stop,
            memory_budget_bytes=memory_budget_bytes,
            layout=layout,
        )
    plan = plan_sweep(spec, train_fn, eval_fn, env_steps_per_update, output_dir, layout)
    lead = distributed.is_writer()
    writer = open_writer(plan, source, resume, overwrite)
    plan = keep_resumed_layout(plan, writer, layout)
    finished = FinishedRuns(writer, SweepRecorder(loggers if lead else (), plan.out_dir, spec))
    say = status if progress and lead else (lambda *_: None)
    monitors = start_sweep(plan, writer, say)
    chunk, budget = choose_chunk_size(plan, writer.chunk_size, memory_budget_bytes)
    finished.read_back()
    stop = stop_signal(should_stop)

    start = time.perf_counter()
    compiled, chunk, compiling, todo = compile_unfinished(plan, writer, chunk, budget, stop, say)
    ran, stopped = train_chunks(
        plan,
        compiled,
        chunk,
        todo,
        monitors=monitors,
        finished=finished,
        stop=stop,
        progress=progress and lead,
    )
    seconds = time.perf_counter() - start
    writer.write_description(
        seconds=round(writer.seconds_before + seconds, 2), chunks=len(writer.finished())
    )
    summary = {
        "runs": plan.runs,
        "results": finished.results,
        "curves": finished.curves,
        "chunk_size": chunk,
        "chunks": len(writer.finished()),
        "chunks_run": ran,
        "layout": plan.layout,
        "compile_seconds": compiling,
        "seconds": seconds,
        "output_dir": str(plan.out_dir),
        "stopped": stopped,
    }
    if report and lead and not stopped:
        from ppage_jax.analysis.sweep.report import write_report

        summary["report"] = str(write_report(plan.out_dir))
    return summary
