"""A sweep's runs in chunks of one compiled program: the chunk size (:func:`choose_chunk_size`),
compiling (:func:`compile_sweep`), training, scoring and keeping each chunk
(:func:`train_chunks`, :class:`FinishedRuns`), and the stop request asked between chunks."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ppage_jax import distributed
from ppage_jax.analysis.batch.metrics import checkpoint_rows, curve_rows, run_metrics
from ppage_jax.analysis.batch.monitoring import monitor_run
from ppage_jax.analysis.batch.program import (
    MEMORY_BUDGET_ENV,
    compile_chunk,
    make_program,
    memory_budget,
    take,
)
from ppage_jax.analysis.sweep.plan import SweepPlan, Writer
from ppage_jax.artifacts import fault
from ppage_jax.compilation.programs import program_store
from ppage_jax.sharding import shard_global, to_host
from ppage_jax.tracking.sweep import SweepRecorder

# On CPU, without an explicit chunk_size, the runs are split into this many chunks.
CPU_CHUNKS = 4
# One scored run of a chunk: (arm, seed, results, training curve rows).
ScoredRun = tuple[str, int, dict[str, float], list]


def choose_chunk_size(
    plan: SweepPlan, recorded: int | None, memory_budget_bytes: int | str | None
) -> tuple[int, int | None]:
    """``(chunk, budget)``: the runs per compiled call to start from, a multiple of the
    devices, and the memory budget per device it is to be shrunk to (None: the chunk is
    fixed). A resumed sweep keeps its ``recorded`` chunk size (the same program), then
    ``spec.chunk_size``; else every run at once within the budget (process 0's), or
    ``CPU_CHUNKS`` chunks on CPU without a set budget."""
    total, n_dev = plan.total, plan.devices
    if recorded is not None:
        return recorded, None
    if plan.spec.chunk_size is not None:
        return int(math.ceil(min(plan.spec.chunk_size, total) / n_dev)) * n_dev, None
    budget = distributed.share(memory_budget(memory_budget_bytes))  # process 0's
    given = memory_budget_bytes is not None or bool(os.environ.get(MEMORY_BUDGET_ENV))
    if jax.devices()[0].platform == "cpu" and not given:
        # a few cores gain little from a wider vmap: chunk for progress and early results
        return int(math.ceil(math.ceil(total / CPU_CHUNKS) / n_dev)) * n_dev, budget
    return int(math.ceil(total / n_dev)) * n_dev, budget


def unfinished_chunks(writer: Writer, total: int, chunk: int) -> list[int]:
    """Indices of the chunks of ``chunk`` runs the output directory does not hold yet."""
    done = set(writer.finished())
    return [i for i in range(math.ceil(total / chunk)) if i not in done]


@dataclasses.dataclass
class FinishedRuns:
    """The sweep's finished runs (process 0's; empty on the others): their results and
    training curves, kept in the output directory and logged to the trackers as each chunk
    finishes."""

    writer: Writer
    recorder: SweepRecorder
    results: dict[tuple[str, int], dict[str, float]] = dataclasses.field(default_factory=dict)
    curves: dict[tuple[str, int], list] = dataclasses.field(default_factory=dict)

    def read_back(self) -> None:
        """Take in the chunks the output directory already holds (a resumed sweep)."""
        for index in self.writer.finished():
            results, curves = self.writer.read_chunk(index)
            self.results.update(results)
            self.curves.update(curves)

    def keep(self, index: int, first: int, scored: list[ScoredRun]) -> None:
        """Chunk ``index``'s scored runs (from run ``first``): into the tables, to the
        trackers, then committed to the output directory."""
        for arm, seed, result, curve in scored:
            self.results[arm, seed], self.curves[arm, seed] = result, curve
            self.recorder.add(arm, seed, result, curve)
        self.writer.add_chunk(index, first, scored)


def compile_sweep(
    plan: SweepPlan, writer: Writer, chunk: int, budget: int | None
) -> tuple[Any, int, float]:
    """``(compiled, chunk, seconds)``: the train-then-evaluate program compiled for a chunk
    (:func:`compile_chunk`, shrunk to the ``budget``), every process at process 0's size;
    the chunk size is committed and sweep.json gains the compile time and program size.
    With the sequential layout the program takes one run per device, and ``chunk`` runs
    are committed together."""
    start = time.perf_counter()
    program = make_program(plan.train_fn, plan.eval_fn)
    programs = program_store()
    static = plan.program_static
    store = (programs, static) if programs is not None and static is not None else None
    if plan.layout == "sequential":
        compiled, _, need = compile_chunk(
            program, plan.keys, plan.inputs, plan.devices, plan.mesh, store=store
        )
        budget = None
    else:
        compiled, chunk, need = compile_chunk(
            program, plan.keys, plan.inputs, chunk, plan.mesh, budget, store
        )
    agreed = distributed.share(chunk)
    if agreed != chunk and plan.layout == "vmap":  # another process measured otherwise
        compiled, chunk, need = compile_chunk(
            program, plan.keys, plan.inputs, agreed, plan.mesh, store=store
        )
    chunk = agreed
    seconds = time.perf_counter() - start
    writer.set_chunk_size(chunk)
    writer.set_layout(plan.layout)
    writer.write_description(
        chunk_size=chunk,
        compile_seconds=round(seconds, 2),
        memory_budget_bytes=budget,
        program_bytes_per_device=need,
    )
    return compiled, chunk, seconds


def compile_unfinished(
    plan: SweepPlan,
    writer: Writer,
    chunk: int,
    budget: int | None,
    stop: Callable[[], bool],
    say: Callable[[str], Any],
) -> tuple[Any, int, float, list[int]]:
    """``(compiled, chunk, seconds, todo)``: the chunks the output directory does not hold
    yet and the program compiled for them (:func:`compile_sweep`, announced by ``say``);
    nothing is compiled (None, 0 s) when none is left or ``stop()`` asks first."""
    todo = unfinished_chunks(writer, plan.total, chunk)
    if not todo or stop():
        return None, chunk, 0.0, todo
    say(f"compiling the sweep's program (chunks of {chunk} runs: train, then evaluate)")
    compiled, chunk, seconds = compile_sweep(plan, writer, chunk, budget)
    return compiled, chunk, seconds, unfinished_chunks(writer, plan.total, chunk)


def train_chunk(
    plan: SweepPlan, compiled: Any, index: int, chunk: int, number: int
) -> tuple[int, int, Any, Any]:
    """Train and evaluate chunk ``index`` (its ``number``-th of this call): ``(first, real,
    metrics, episodes)``, the index of its first run, how many runs are real (the last chunk
    is padded with its last run) and the host copies of the outputs (a collective).

    The vmap layout trains the chunk in one call. The sequential layout dispatches one call
    per run (per device), all before the first is read back, so the device never waits on
    the host between runs; only the real runs are trained."""
    first = index * chunk
    real = min(chunk, plan.total - first)
    per_call = chunk if plan.layout == "vmap" else plan.devices
    calls = math.ceil(real / per_call)
    positions = np.minimum(np.arange(first, first + calls * per_call), plan.total - 1)
    keys = np.asarray(plan.keys)
    outputs = []
    for start in range(0, calls * per_call, per_call):
        at = positions[start : start + per_call]
        outputs.append(compiled(*shard_global((keys[at], take(plan.inputs, at)), plan.mesh)))
    fault(f"chunk:{number}")  # testing hook: killed while a chunk runs
    outputs = [to_host(out) for out in outputs]
    metrics, episodes = jax.tree.map(lambda *xs: np.concatenate(xs), *outputs)
    return first, real, metrics, episodes


def score_runs(
    plan: SweepPlan, monitors: dict, metrics: Any, episodes: Any, first: int, count: int
) -> list[ScoredRun]:
    """The first ``count`` runs of a trained chunk (starting at run ``first``): each one's
    evaluation metrics, training curve and reward-hacking monitor columns."""
    scored = []
    for j in range(count):
        arm, seed = plan.runs[first + j]
        result = run_metrics(plan.env, take(episodes, j), plan.horizon)
        run = take(metrics, j)
        curve = curve_rows(plan.env, run, plan.env_steps_per_update)
        result.update(monitor_run(monitors[arm], seed, curve))
        if "checkpoints" in run:  # the evaluation curve (sweep.checkpoints)
            updates = int(np.asarray(run["active"]).shape[0])
            curve += checkpoint_rows(
                run["checkpoints"], plan.horizon, updates, plan.env_steps_per_update
            )
        scored.append((arm, seed, result, curve))
    return scored


def train_chunks(
    plan: SweepPlan,
    compiled: Any,
    chunk: int,
    todo: list[int],
    *,
    monitors: dict,
    finished: FinishedRuns,
    stop: Callable[[], bool],
    progress: bool,
) -> tuple[int, bool]:
    """Train, score and keep the ``todo`` chunks in order, asking ``stop()`` before each:
    ``(chunks run, stopped)``. Without a ``compiled`` program (stopped before compiling)
    nothing runs; without ``todo`` chunks the tables are written again (a kill may have come
    before they were). ``progress``: a progress bar over every run of the sweep."""
    from tqdm.auto import tqdm

    lead = distributed.is_writer()
    bar = tqdm(
        total=plan.total,
        unit="run",
        desc="sweep",
        disable=not progress,
        initial=len(finished.results),
    )
    ran, stopped = 0, False
    for index in todo:
        if compiled is None or stop():
            stopped = True
            break
        first, real, metrics, episodes = train_chunk(plan, compiled, index, chunk, ran + 1)
        scored = score_runs(plan, monitors, metrics, episodes, first, real if lead else 0)
        finished.keep(index, first, scored)
        ran += 1
        fault(f"between:{ran}")  # testing hook: killed between chunks
        bar.update(real)
        if lead:
            rates = [r["capture_rate"] for r in finished.results.values()]
            bar.set_postfix(capture_rate=f"{np.mean(rates):.2f}")
    bar.close()
    if not todo:
        finished.writer.write_tables()
    return ran, stopped


def stop_signal(should_stop: Callable[[], bool] | None) -> Callable[[], bool]:
    """``should_stop`` asked on every process; true on all when true on any, so every
    process stops at the same chunk."""
    asked = (lambda: False) if should_stop is None else should_stop
    return lambda: distributed.any_process(asked())
