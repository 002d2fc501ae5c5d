"""Reward-ablation sweeps: every (arm, seed) run as one compiled program.

A sweep (``ppage_jax.analysis.sweep.spec``) lists arms (reward designs in one shared term structure)
and a number of seeds. Each run trains with ``train(key, params)`` and then plays the
held-out evaluation block greedily; the runs are stacked on one leading axis (arm-major,
seed ``i`` of every arm starting from the same key, so environment seeds are paired across
arms), split across every process's devices with :mod:`ppage_jax.sharding`, and executed in
chunks of one compiled program (the last chunk padded, so every chunk reuses the same
executable; sized from the device memory when not given, :mod:`.program`). With several
processes (:mod:`ppage_jax.distributed`) every process runs ``run_sweep`` with the same
arguments, and only process 0 reads and writes the output directory, reports and logs.
Results are committed after every chunk (:mod:`.writer`), so an interrupted sweep keeps what
finished and ``run_sweep(..., resume=True)`` (``ppage-jax sweep --resume OUT_DIR``) runs only
the rest:

- ``audit.csv``: the reward audit of every arm, run before training (:mod:`.auditing`;
  skipped with ``audit: false``, and on resume when the file is there);
- ``baselines.csv``: the fixed baselines (random and greedy BFS chase or evade) on the same
  held-out layouts (:mod:`.baselines`; kept on resume);
- ``results.csv``: tidy ``arm, seed, metric, value`` rows of the evaluation (capture rate,
  time to capture censored at the step limit: ``rmst`` and ``km_median``, the share that hit
  the limit, episode length, steps to capture of the captured episodes, base-reward return
  per role at unit weight, per-term return per role as paid; :mod:`.metrics`) and of the
  reward-hacking monitor over the run's training curve (``monitor/...`` flags and
  ``monitor_first/...`` env steps; :mod:`.monitoring`);
- ``curves.csv``: ``arm, seed, update, env_steps, metric, value`` per training update;
- ``sweep.json``: the resolved arms, seeds and timings; then ``report.md`` and plots
  (:mod:`ppage_jax.analysis.sweep.report`).

Modules: ``trainers`` (the default train/eval functions), ``program`` (stacking, compiling,
chunking), ``metrics`` (per-run numbers), ``monitoring`` (the reward-hacking monitor per run),
``auditing`` (the audit stage), ``writer`` (files), ``run`` (:func:`run_sweep`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ppage_jax import distributed
from ppage_jax.analysis.sweep.auditing import AUDIT_FILE, audit_rows, write_audit
from ppage_jax.analysis.sweep.baselines import BASELINES_FILE, baseline_rows, write_baselines
from ppage_jax.analysis.sweep.metrics import curve_rows, run_metrics
from ppage_jax.analysis.sweep.monitoring import arm_monitors, monitor_run
from ppage_jax.analysis.sweep.program import (
    MEMORY_BUDGET_ENV,
    compile_chunk,
    make_program,
    memory_budget,
    stack_hyperparams,
    stack_runs,
    take,
)
from ppage_jax.analysis.sweep.spec import SweepSpec
from ppage_jax.analysis.sweep.trainers import EvalFn, TrainFn, trainer_functions
from ppage_jax.analysis.sweep.writer import open_sweep_writer
from ppage_jax.artifacts import fault
from ppage_jax.sharding import make_mesh, shard_global, to_host
from ppage_jax.tracking.sweep import SweepRecorder

# On CPU, without an explicit chunk_size, the runs are split into this many chunks.
CPU_CHUNKS = 4


def sweep_identity(
    spec: SweepSpec, runs: list[tuple[str, int]], env_steps_per_update: int, horizon: int
) -> dict[str, Any]:
    """What defines a sweep's results (hashed into its manifest): the arms, seeds, eval
    block and config (by hash; not the paths they were read from) and the runs in order."""
    described = {k: v for k, v in spec.describe().items() if k not in ("sweep", "config")}
    return dict(
        described,
        runs=[list(r) for r in runs],
        env_steps_per_update=env_steps_per_update,
        eval_step_limit=horizon,
    )


def run_sweep(
    spec: SweepSpec,
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
) -> dict[str, Any]:
    """Run every (arm, seed) of ``spec``; write results as chunks finish; return a summary.

    ``train_fn``/``eval_fn`` default to the config's training algorithm and greedy
    evaluation on the held-out block (:func:`trainer_functions`); pass your own to sweep
    anything with the same contract. Chunks: ``spec.chunk_size`` runs per call, else as many
    runs as fit the memory budget: ``memory_budget_bytes`` (bytes or ``"512M"``) or
    ``PPAGE_JAX_MEMORY_BUDGET`` when set, else 70 % of the device's memory
    (:func:`~ppage_jax.analysis.sweep.program.memory_budget`), starting from ``CPU_CHUNKS``
    chunks on CPU without a set budget (for the progress bar and early results).
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

    Returns ``{"runs", "results", "curves", "chunk_size", "chunks", "chunks_run",
    "compile_seconds", "seconds", "output_dir", "stopped"}`` (results: {(arm, seed):
    metrics}; ``chunks`` counts the finished chunks, ``chunks_run`` those run by this call).
    """
    from tqdm.auto import tqdm

    env = spec.make_env()
    if train_fn is None or eval_fn is None:
        default_train, default_eval, default_steps = trainer_functions(spec, env)
        train_fn = train_fn or default_train
        eval_fn = eval_fn or default_eval
        env_steps_per_update = env_steps_per_update or default_steps
    env_steps_per_update = env_steps_per_update or 1
    out_dir = Path(output_dir or spec.output_dir)
    runs, keys, params = stack_runs(spec, env)
    horizon = spec.eval_max_steps or int(np.asarray(params.max_steps).reshape(-1)[0])
    hyper = stack_hyperparams(spec)
    inputs = (params, hyper) if hyper else params  # what the program takes per run
    total = len(runs)
    mesh = make_mesh()
    n_dev = mesh.devices.size
    lead = distributed.is_writer()
    writer = open_sweep_writer(
        out_dir,
        dict(
            spec.describe(),
            runs=total,
            devices=n_dev,
            processes=jax.process_count(),
            platform=jax.devices()[0].platform,
            env_steps_per_update=env_steps_per_update,
            eval_step_limit=horizon,
        ),
        sweep_identity(spec, runs, env_steps_per_update, horizon),
        source=source,
        resume=resume,
        overwrite=overwrite,
    )
    recorder = SweepRecorder(loggers if lead else (), out_dir, spec)
    names = [arm.name for arm in spec.arms]
    arm_params = spec.arm_params(env)
    monitors = arm_monitors(spec.config, env, arm_params, names) if lead else {}
    if lead:
        writer.write_description(
            monitor={
                "config": spec.config["experiment"].get("monitor") or {},
                "watched": {n: list(m.columns) if m else [] for n, m in monitors.items()},
                "warmup_updates": max((m.warmup for m in monitors.values() if m), default=0),
            },
            audit=spec.audit,
        )
        if spec.audit and not (out_dir / AUDIT_FILE).is_file():  # resume keeps it
            write_audit(out_dir, audit_rows(env, arm_params, names, horizon))
        if not (out_dir / BASELINES_FILE).is_file():  # resume keeps it
            rows = baseline_rows(
                spec.config,
                env,
                env.default_params,
                spec.eval_seed,
                spec.eval_episodes,
                spec.eval_max_steps,
            )
            write_baselines(out_dir, rows)
    budget = None
    if writer.chunk_size is not None:  # resuming: the recorded chunks, the same program
        chunk = writer.chunk_size
    elif spec.chunk_size is not None:
        chunk = int(math.ceil(min(spec.chunk_size, total) / n_dev)) * n_dev
    else:
        budget = distributed.share(memory_budget(memory_budget_bytes))  # process 0's
        given = memory_budget_bytes is not None or bool(os.environ.get(MEMORY_BUDGET_ENV))
        if jax.devices()[0].platform == "cpu" and not given:
            # a few cores gain little from a wider vmap: chunk for progress and early results
            chunk = int(math.ceil(math.ceil(total / CPU_CHUNKS) / n_dev)) * n_dev
        else:  # as many runs as fit the budget
            chunk = int(math.ceil(total / n_dev)) * n_dev
    results: dict[tuple[str, int], dict[str, float]] = {}
    curves: dict[tuple[str, int], list] = {}
    for index in writer.finished():
        done_results, done_curves = writer.read_chunk(index)
        results.update(done_results)
        curves.update(done_curves)
    asked = (lambda: False) if should_stop is None else should_stop

    def stop() -> bool:  # every process stops at the same chunk
        return distributed.any_process(asked())

    start = time.perf_counter()
    compile_seconds = 0.0
    n_chunks = math.ceil(total / chunk)
    todo = [i for i in range(n_chunks) if i not in set(writer.finished())]
    compiled = None
    if todo and not stop():
        program = make_program(train_fn, eval_fn)
        compiled, chunk, need = compile_chunk(program, keys, inputs, chunk, mesh, budget)
        agreed = distributed.share(chunk)
        if agreed != chunk:  # another process measured otherwise: process 0's size
            compiled, chunk, need = compile_chunk(program, keys, inputs, agreed, mesh)
        compile_seconds = time.perf_counter() - start
        writer.set_chunk_size(chunk)
        writer.write_description(
            chunk_size=chunk,
            compile_seconds=round(compile_seconds, 2),
            memory_budget_bytes=budget,
            program_bytes_per_device=need,
        )
        n_chunks = math.ceil(total / chunk)
        todo = [i for i in range(n_chunks) if i not in set(writer.finished())]
    bar = tqdm(
        total=total, unit="run", desc="sweep", disable=not (progress and lead), initial=len(results)
    )
    ran, stopped = 0, False
    for index in todo:
        if compiled is None or stop():
            stopped = True
            break
        first = index * chunk
        positions = np.arange(first, first + chunk)
        real = int((positions < total).sum())
        positions = np.minimum(positions, total - 1)  # pad the last chunk with its last run
        args = shard_global((np.asarray(keys)[positions], take(inputs, positions)), mesh)
        metrics, episodes = compiled(*args)
        fault(f"chunk:{ran + 1}")  # testing hook: killed while a chunk runs
        metrics, episodes = to_host((metrics, episodes))  # every process: collective
        finished = []
        for j in range(real if lead else 0):
            arm, seed = runs[first + j]
            result = run_metrics(env, take(episodes, j), horizon)
            curve = curve_rows(env, take(metrics, j), env_steps_per_update)
            result.update(monitor_run(monitors[arm], seed, curve))
            results[(arm, seed)], curves[(arm, seed)] = result, curve
            finished.append((arm, seed, result, curve))
            recorder.add(arm, seed, result, curve)
        writer.add_chunk(index, first, finished)
        ran += 1
        fault(f"between:{ran}")  # testing hook: killed between chunks
        bar.update(real)
        if lead:
            rates = [r["capture_rate"] for r in results.values()]
            bar.set_postfix(capture_rate=f"{np.mean(rates):.2f}")
    bar.close()
    if not todo:
        writer.write_tables()  # a kill may have come before they were written
    seconds = time.perf_counter() - start
    writer.write_description(seconds=round(seconds, 2), chunks=len(writer.finished()))
    summary = {
        "runs": runs,
        "results": results,
        "curves": curves,
        "chunk_size": chunk,
        "chunks": len(writer.finished()),
        "chunks_run": ran,
        "compile_seconds": compile_seconds,
        "seconds": seconds,
        "output_dir": str(out_dir),
        "stopped": stopped,
    }
    if report and lead and not stopped:
        from ppage_jax.analysis.sweep.report import write_report

        summary["report"] = str(write_report(out_dir))
    return summary
