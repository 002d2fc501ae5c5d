"""Host-side driver of a training run: all seeds at once (``vmap``), in compiled chunks of
updates so a progress bar can follow; the result equals ``jax.vmap(train)`` over the seeds.

Between chunks (never inside compiled code) the driver checks for divergence
(:mod:`ppage_jax.train.run.divergence`), writes a training checkpoint when one is due
(:class:`~ppage_jax.train.run.checkpoint.TrainingCheckpoints`) and honours a stop request
(Ctrl-C). Given checkpoints, it first restores the newest one and continues from there with
the same compiled chunk, so a resumed run ends with the same metrics and parameters as an
uninterrupted one (bit for bit on the same device and software).

With several processes (:mod:`ppage_jax.distributed`) each process trains its own share of
the seeds on its own devices (:func:`~ppage_jax.sharding.process_rows`); every chunk's
metrics, the checkpoints and the final state are gathered so every process holds all seeds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax import distributed
from ppage_jax.artifacts import fault, fault_soon
from ppage_jax.sharding import check_divisible, gather_rows, make_mesh, process_rows
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.registry import algorithm
from ppage_jax.train.run.checkpoint import TrainingCheckpoints
from ppage_jax.train.run.curriculum import Curriculum, apply_curriculum
from ppage_jax.train.run.divergence import DivergenceCheck, DivergenceError
from ppage_jax.train.run.progress import run_updates


@dataclasses.dataclass
class TrainResult:
    """A finished (or stopped) run: final runner states and metrics, leading seed axis."""

    runner: Any
    metrics: dict  # arrays [num_seeds, num_updates, ...] (only the updates run)
    policies: Any  # policy_state stacked over seeds
    seconds: float  # wall time of training, compile included
    compile_seconds: float  # time to the end of the first chunk's compile
    env_steps: int  # env steps taken per seed
    updates: int = 0  # updates done, restored ones included
    resumed_from: int = 0  # updates restored from a checkpoint before this call
    stopped: bool = False  # stopped at a stop request before the end (resume to finish)
    checkpoint: int | None = None  # update of the newest training checkpoint on disk


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """Training seed ``i`` uses ``PRNGKey(seed + i)``."""
    return jax.vmap(jax.random.PRNGKey)(jnp.arange(seed, seed + num_seeds))


def chunk_size(num_updates: int, target_chunks: int = 40) -> int:
    """The largest divisor of ``num_updates`` giving at least ``target_chunks`` chunks (so
    every chunk has the same compiled shape), but at most ``num_updates``."""
    best = 1
    for size in range(1, num_updates + 1):
        if num_updates % size == 0 and num_updates // size >= min(target_chunks, num_updates):
            best = size
    return best


def _concat(rows: list[dict]) -> dict:
    return jax.tree.map(lambda *a: np.concatenate(a, axis=1), *rows)


def _check_everywhere(
    check: DivergenceCheck, metrics: dict, done: int, runner: Any, mine: slice, name: str
) -> None:
    """``check`` on every process at once: the metrics hold every seed, the runner only this
    process's share, so a parameter that is not finite on one process stops them all."""
    try:
        check(metrics, done, runner)
    except DivergenceError as err:
        if jax.process_count() > 1:
            distributed.any_process(True)
            if err.quantity.startswith("parameter"):  # a seed of this process's share
                seed = err.seed + mine.start
                err = DivergenceError(err.update, name, err.quantity, err.value, seed)
        raise err from None
    if distributed.any_process(False):
        size = np.asarray(metrics["active"]).shape[1]
        raise DivergenceError(done + size, name, "a parameter on another process", "not finite", -1)


def run_training(
    tc: TrainConfig,
    params: EnvParams,
    seed: int,
    num_seeds: int,
    on_chunk: Callable[[dict, int, Any], None] | None = None,
    target_chunks: int = 40,
    *,
    checkpoints: TrainingCheckpoints | None = None,
    should_stop: Callable[[], bool] | None = None,
    check_divergence: bool = True,
    curriculum: Curriculum | None = None,
) -> TrainResult:
    """Train ``num_seeds`` seeds together; ``on_chunk(metrics_chunk, env_steps_done,
    runner)`` is called after each compiled chunk (metrics arrays [num_seeds, chunk, ...];
    ``runner`` the current runner state, leading seed axis).

    ``checkpoints``: restore the newest training checkpoint first (if any), then write one
    every ``checkpoints.every`` updates (at the next chunk boundary), at a stop and at the
    end. ``should_stop()`` is asked between chunks; when true the run stops there (result
    ``stopped``). With ``check_divergence`` a non-finite loss, return or parameter raises
    :class:`~ppage_jax.train.run.divergence.DivergenceError` (the checkpoints written before it
    are kept; ``err.metrics`` holds the rows up to it). ``curriculum`` (traced) schedules
    EnvParams leaves over env steps (:mod:`ppage_jax.train.run.curriculum`).
    """
    module = algorithm(tc.algorithm)
    start = time.perf_counter()
    multi = jax.process_count() > 1  # this process trains seeds[mine]
    if multi:
        check_divisible(num_seeds, make_mesh(), "experiment.num_seeds")
    mine = process_rows(num_seeds, make_mesh()) if multi else slice(0, num_seeds)
    runner = jax.jit(jax.vmap(module.init, in_axes=(0, None, None)))(
        seed_keys(seed, num_seeds)[mine], tc, apply_curriculum(curriculum, params, jnp.int32(0))[0]
    )
    size = chunk_size(tc.num_updates, target_chunks)
    done, finished, rows = 0, False, []
    restored = None
    if checkpoints is not None:
        restored = checkpoints.restore(gather_rows(runner) if multi else runner)
    if restored is not None and multi:
        restored.runner = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[mine]), restored.runner)
    if restored is not None:
        runner, done, finished, size = (
            restored.runner,
            restored.updates,
            restored.finished,
            restored.chunk_size,
        )
        rows.append(restored.metrics)
    resumed_from = done
    check = DivergenceCheck(tc, module.policy_state) if check_divergence else None
    if check is not None and rows:
        check.prime(rows[0])
    asked = (lambda: False) if should_stop is None else should_stop
    stop = (lambda: distributed.any_process(asked())) if multi else asked  # all or none

    compile_seconds = 0.0
    stopped = False
    if not finished:

        def chunk(runner, params, curriculum):
            return run_updates(module.update, runner, tc, params, size, curriculum)

        lowered = jax.jit(jax.vmap(chunk, in_axes=(0, None, None))).lower(
            runner, params, curriculum
        )
        fault_soon("compile")  # testing hook: killed while XLA compiles
        compiled = lowered.compile()
        compile_seconds = time.perf_counter() - start
    chunks = 0
    while not finished:
        if stop():
            stopped = True
            break
        following, metrics = compiled(runner, params, curriculum)
        chunks += 1
        fault(f"chunk:{chunks}")  # testing hook: killed while a chunk runs
        metrics = gather_rows(metrics) if multi else jax.device_get(metrics)
        if check is not None:
            try:
                _check_everywhere(check, metrics, done, following, mine, tc.algorithm)
            except DivergenceError as err:
                err.metrics = _concat(rows + [metrics])
                err.checkpoint = checkpoints.last_update if checkpoints is not None else None
                raise
        runner = following
        rows.append(metrics)
        done += size
        if on_chunk is not None:
            on_chunk(metrics, done * tc.env_steps_per_update, runner)
        finished = done >= tc.num_updates or (
            tc.episodes is not None and not np.asarray(metrics["active"]).any()
        )
        if checkpoints is not None and (finished or stop() or checkpoints.due(done - size, done)):
            whole = gather_rows(runner) if multi else runner
            checkpoints.save(done, whole, _concat(rows), finished, size)
            fault(f"between:{checkpoints.saved}")  # testing hook: killed between chunks
    jax.block_until_ready(runner)
    if multi:
        runner = gather_rows(runner)
    seconds = time.perf_counter() - start
    metrics = _concat(rows) if rows else {}
    steps = int(np.asarray(jax.device_get(runner.progress.env_steps)).max())
    policies = module.policy_state(runner)  # leaves keep the leading seed axis
    return TrainResult(
        runner,
        metrics,
        policies,
        seconds,
        compile_seconds,
        steps,
        updates=done,
        resumed_from=resumed_from,
        stopped=stopped,
        checkpoint=checkpoints.last_update if checkpoints is not None else None,
    )
