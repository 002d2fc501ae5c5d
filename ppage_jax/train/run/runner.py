"""Host-side driver of a training run: all seeds at once (``vmap``), in compiled chunks of
updates so a progress bar can follow; the result equals ``jax.vmap(train)`` over the seeds.
A run of one seed compiles the unbatched program instead (on the default config it runs
faster than a ``vmap`` over a batch of one; docs/performance.md); its runner state and
metrics still carry the leading seed axis (of size 1), so checkpoints, policies and metrics
rows look the same either way. The compiled programs are cached per config, so another run
of the same config in this process does not compile again.

Between chunks (never inside compiled code) the driver checks for divergence
(:mod:`ppage_jax.train.run.divergence`), writes a training checkpoint when one is due
(:class:`~ppage_jax.train.run.checkpoint.TrainingCheckpoints`) and honours a stop request
(Ctrl-C). Once a chunk's metrics are read and checked, the next chunk is dispatched before
the rest of the host work (logging, checkpoints), which then runs while the device computes.
Given checkpoints, it first restores the newest one and continues from there with the same
compiled chunk, so a resumed run ends with the same metrics and parameters as an
uninterrupted one (bit for bit on the same device and software).

With several processes (:mod:`ppage_jax.distributed`) each process trains its own share of
the seeds on its own devices (:func:`~ppage_jax.sharding.process_rows`); every chunk's
metrics, the checkpoints and the final state are gathered so every process holds all seeds.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax import distributed
from ppage_jax.artifacts import fault, fault_armed, fault_soon
from ppage_jax.compilation.programs import (
    STATE_FIRST,
    PendingProgram,
    ProgramStore,
    known_structure,
)
from ppage_jax.sharding import check_divisible, gather_rows, make_mesh, process_rows
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit.loop import run_updates
from ppage_jax.train.kit.schedules import Curriculum, apply_curriculum
from ppage_jax.train.registry import algorithm
from ppage_jax.train.run.checkpoint import TrainingCheckpoints
from ppage_jax.train.run.divergence import DivergenceCheck, DivergenceError


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
    # host work between chunks (checks, on_chunk, checkpoints), not waiting for the device
    host_seconds: float = 0.0


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """Training seed ``i`` uses ``PRNGKey(seed + i)``."""
    return jax.vmap(jax.random.PRNGKey)(jnp.arange(seed, seed + num_seeds))


# Chunks a run aims at: enough for the progress bar, the checkpoints and Ctrl-C, few enough
# that their boundaries cost little (each about 30 ms on a 2-core CPU, 5 % of a default
# update; docs/performance.md): a 48-update run has chunks of 3 updates, the default's 366
# updates chunks of 6.
TARGET_CHUNKS = 16


def chunk_size(num_updates: int, target_chunks: int = TARGET_CHUNKS) -> int:
    """The largest divisor of ``num_updates`` giving at least ``target_chunks`` chunks (so
    every chunk has the same compiled shape), but at most ``num_updates``."""
    best = 1
    for size in range(1, num_updates + 1):
        if num_updates % size == 0 and num_updates // size >= min(target_chunks, num_updates):
            best = size
    return best


def _concat(rows: list[dict]) -> dict:
    return jax.tree.map(lambda *a: np.concatenate(a, axis=1), *rows)


def _per_seed(fn: Callable, batch: bool) -> Callable:
    """``fn(x, config, params)`` over the leading seed axis of ``x`` (and of the results):
    vmapped, or for a batch of one seed the unbatched ``fn`` between dropping that axis from
    ``x`` and adding it back to the results (free reshapes inside the compiled program)."""
    if batch:
        return jax.vmap(fn, in_axes=(0, None, None))

    def one(x, config, params):
        out = fn(jax.tree.map(lambda a: a[0], x), config, params)
        return jax.tree.map(lambda a: jnp.asarray(a)[None], out)

    return one


@functools.partial(jax.jit, static_argnames=("batch",))
def _init_seeds(keys: jax.Array, tc: TrainConfig, params: EnvParams, *, batch: bool) -> Any:
    """The runner states of the seeds of ``keys`` (leading seed axis)."""
    return _per_seed(algorithm(tc.algorithm).init, batch)(keys, tc, params)


@functools.partial(jax.jit, static_argnames=("size", "batch"))
def _chunk_seeds(
    runner: Any,
    tc: TrainConfig,
    params: EnvParams,
    curriculum: Curriculum | None,
    *,
    size: int,
    batch: bool,
) -> tuple[Any, dict]:
    """``size`` updates of every seed of ``runner``: the runner states after them and the
    metrics rows [num_seeds, size, ...]. Jitted once for the module, so that another run of
    the same config in this process reuses the compiled program."""
    update = algorithm(tc.algorithm).update

    def chunk(runner, params, curriculum):
        return run_updates(update, runner, tc, params, size, curriculum)

    return _per_seed(chunk, batch)(runner, params, curriculum)


def _init_entry(
    tc: TrainConfig,
    params: EnvParams,
    curriculum: Curriculum | None,
    seed: int,
    num_seeds: int,
    batch: bool,
    mine: slice,
) -> tuple[str, dict, tuple]:
    """The program store's name, static part and arguments of the init of the seeds
    ``mine`` (the environment at the curriculum's start)."""
    keys = seed_keys(seed, num_seeds)[mine]
    first = apply_curriculum(curriculum, params, jnp.int32(0))[0]
    static = {"config": tc.config_hash, "algorithm": tc.algorithm, "hp": repr(tc.hp)}
    return "train_init", {**static, "batch": batch}, (keys, tc, first)


def _first_states(
    programs: ProgramStore | None, tc: TrainConfig, entry: tuple[str, dict, tuple]
) -> Any:
    """The seeds' fresh runner states (:func:`_init_seeds` of ``entry``'s arguments). With a
    store and a run made of its config alone, the init program is loaded whole (or compiled
    and kept): the runner's structure holds the optimisers' functions, which no stored
    program can give back, so it comes from tracing ``init`` alone (``eval_shape``),
    without lowering or compiling."""
    name, static, args = entry
    init = functools.partial(_init_seeds, batch=static["batch"])
    if programs is None or not _storable(tc):
        return init(*args)
    split = known_structure(jax.tree.structure(jax.eval_shape(init, *args)))
    return programs.load_soon(name, static, args, background=False).get(init, args, split)(*args)


def _storable(tc: TrainConfig) -> bool:
    """Whether ``tc``'s programs are made of its config alone (no trained start policy, no
    frozen opponents read from files), so the program store may key them by its hash."""
    return tc.start is None and all(isinstance(role, str) for role in tc.roles)


def _chunk_static(tc: TrainConfig, size: int, batch: bool, num_seeds: int) -> dict:
    """The training chunk's static part, for the program store's key."""
    return {
        "config": tc.config_hash,
        "algorithm": tc.algorithm,
        "hp": repr(tc.hp),
        "shape": (tc.num_envs, tc.num_updates, tc.episodes, tc.stagger_starts),
        "roles": repr(tc.roles),
        "chunk": (size, batch, num_seeds),
    }


def _chunk_entry(
    tc: TrainConfig,
    params: EnvParams,
    curriculum: Curriculum | None,
    num_seeds: int,
    size: int,
    batch_seeds: bool | None,
) -> tuple[str, dict, tuple]:
    """The program store's name, static part and key arguments of a fresh run's chunk."""
    static = _chunk_static(tc, size, _batch_seeds(batch_seeds, num_seeds, False), num_seeds)
    return "train_chunk", static, (tc, params, curriculum)


def prefetch_training(
    programs: ProgramStore | None,
    tc: TrainConfig,
    params: EnvParams,
    seed: int,
    num_seeds: int,
    *,
    curriculum: Curriculum | None = None,
    target_chunks: int = TARGET_CHUNKS,
    batch_seeds: bool | None = None,
) -> None:
    """Start loading, in threads, the stored init and training chunk that
    :func:`run_training` of a fresh run with the same arguments will take, so that the
    loads overlap the caller's work before training (``ppage-jax run``: the monitor's
    untrained run). Nothing without a store or for a run that is not stored."""
    if programs is None or not _storable(tc):
        return
    size = chunk_size(tc.num_updates, target_chunks)
    programs.prefetch(*_chunk_entry(tc, params, curriculum, num_seeds, size, batch_seeds))
    batch = _batch_seeds(batch_seeds, num_seeds, False)
    programs.prefetch(
        *_init_entry(tc, params, curriculum, seed, num_seeds, batch, slice(0, num_seeds))
    )


def _chunk_program(
    programs: ProgramStore | None,
    pending: PendingProgram | None,
    run: _Start,
    tc: TrainConfig,
    params: EnvParams,
    curriculum: Curriculum | None,
) -> Callable:
    """The training chunk compiled for ``run``: loaded whole from ``programs`` (``pending``
    when it was started for this run's chunk size), or compiled and stored there, when given
    and the run reads nothing beyond its config; else through the module's jitted
    :func:`_chunk_seeds`."""
    args = (run.runner, tc, params, curriculum)
    if programs is None or not _storable(tc):
        lowered = _chunk_seeds.lower(*args, size=run.size, batch=run.batch)
        fault_soon("compile")  # testing hook: killed while XLA compiles
        return lowered.compile()
    fault_soon("compile")
    static = _chunk_static(tc, run.size, run.batch, int(run.mine.stop - run.mine.start))
    key_args = (tc, params, curriculum)
    if pending is None or pending.path != programs.path("train_chunk", static, key_args):
        pending = programs.load_soon("train_chunk", static, key_args, background=False)
    chunk = functools.partial(_chunk_seeds, size=run.size, batch=run.batch)
    return pending.get(chunk, args, STATE_FIRST)


def _batch_seeds(batch_seeds: bool | None, num_seeds: int, multi: bool) -> bool:
    """Whether the seeds run vmapped: always with several seeds or processes; by default
    (``None``) not for a single seed."""
    if batch_seeds is None:
        return num_seeds != 1 or multi
    if not batch_seeds and (num_seeds != 1 or multi):
        raise ValueError(
            f"batch_seeds=False trains a single seed in a single process; got "
            f"{num_seeds} seeds on {jax.process_count()} process(es)"
        )
    return bool(batch_seeds)


def _hook(point: str, checkpoints: TrainingCheckpoints | None) -> None:
    """Testing hook ``point`` (:func:`~ppage_jax.artifacts.fault`), met with the checkpoint
    saved before it complete on disk (saves commit in the background)."""
    if checkpoints is not None and fault_armed(point):
        checkpoints.wait()
    fault(point)


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


@dataclasses.dataclass
class _Start:
    """Where a run starts: the runner states (this process's seeds), the updates done, the
    metrics rows restored and the chunk size (a restored run keeps its own)."""

    runner: Any
    done: int
    finished: bool
    size: int
    rows: list[dict]
    mine: slice  # this process's seeds
    multi: bool
    batch: bool


def _start(
    tc: TrainConfig,
    params: EnvParams,
    seed: int,
    num_seeds: int,
    target_chunks: int,
    checkpoints: TrainingCheckpoints | None,
    curriculum: Curriculum | None,
    batch_seeds: bool | None,
    programs: ProgramStore | None,
) -> _Start:
    """The fresh runner states of the seeds, or the newest training checkpoint's."""
    multi = jax.process_count() > 1  # this process trains seeds[mine]
    if multi:
        check_divisible(num_seeds, make_mesh(), "experiment.num_seeds")
    mine = process_rows(num_seeds, make_mesh()) if multi else slice(0, num_seeds)
    batch = _batch_seeds(batch_seeds, num_seeds, multi)
    entry = _init_entry(tc, params, curriculum, seed, num_seeds, batch, mine)
    runner = _first_states(programs, tc, entry)
    start = _Start(
        runner, 0, False, chunk_size(tc.num_updates, target_chunks), [], mine, multi, batch
    )
    restored = None
    if checkpoints is not None:
        restored = checkpoints.restore(gather_rows(runner) if multi else runner)
    if restored is None:
        return start
    if multi:
        restored.runner = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[mine]), restored.runner)
    start.runner, start.done = restored.runner, restored.updates
    start.finished, start.size = restored.finished, restored.chunk_size
    start.rows.append(restored.metrics)
    return start


@dataclasses.dataclass
class _ChunkLoop:
    """The loop over compiled chunks: read a chunk's metrics, check them, dispatch the next
    chunk, then the host work (``on_chunk``, the checkpoint) while the device computes.

    should_stop is asked as often and in the same order with or without prefetch: for the
    chunk's checkpoint, then whether to go on."""

    tc: TrainConfig
    params: EnvParams
    curriculum: Curriculum | None
    compiled: Callable
    run: _Start
    check: DivergenceCheck | None
    checkpoints: TrainingCheckpoints | None
    stop: Callable[[], bool]
    on_chunk: Callable[[dict, int, Any], None] | None
    prefetch: bool
    # the loop's time outside the wait for a chunk's metrics and the next chunk's dispatch
    host_seconds: float = 0.0
    chunks: int = 0
    stopped: bool = False

    def checkpoint_due(self) -> bool:
        run = self.run
        return self.checkpoints is not None and (
            run.finished or self.stop() or self.checkpoints.due(run.done - run.size, run.done)
        )

    def dispatch_next(self) -> tuple[bool, Any]:
        """Whether to go on and, if so, the next chunk dispatched from this chunk's runner
        (kept, not donated, for on_chunk and the checkpoint)."""
        if self.run.finished or self.stop():
            return False, None
        dispatch = time.perf_counter()
        following = self.compiled(self.run.runner, self.tc, self.params, self.curriculum)
        self.host_seconds -= time.perf_counter() - dispatch  # may run the chunk (a CPU does)
        return True, following

    def go(self) -> None:
        """Run chunks until the end, a stop request or a divergence."""
        # pending: (runner, metrics) of the chunk dispatched (JAX runs it asynchronously)
        # and not read yet; a diverged chunk is never followed by another
        if self.run.finished:
            return
        if self.stop():
            self.stopped = True
            return
        pending = self.compiled(self.run.runner, self.tc, self.params, self.curriculum)
        self.chunks = 1
        fault("chunk:1")  # testing hook: killed while a chunk runs
        while pending is not None:
            pending = self.step(*pending)

    def step(self, following: Any, metrics: dict) -> Any:
        """Take one chunk's results; return the next chunk dispatched, or None at the end."""
        run, checkpoints = self.run, self.checkpoints
        metrics = gather_rows(metrics) if run.multi else jax.device_get(metrics)
        host_start = time.perf_counter()
        if self.check is not None:
            try:
                _check_everywhere(
                    self.check, metrics, run.done, following, run.mine, self.tc.algorithm
                )
            except DivergenceError as err:
                err.metrics = _concat(run.rows + [metrics])
                if checkpoints is not None:
                    checkpoints.wait()
                err.checkpoint = checkpoints.last_update if checkpoints is not None else None
                raise
        run.runner = following
        run.rows.append(metrics)
        run.done += run.size
        run.finished = run.done >= self.tc.num_updates or (
            self.tc.episodes is not None and not np.asarray(metrics["active"]).any()
        )
        pending = None
        if self.prefetch:
            save = self.checkpoint_due()
            go_on, pending = self.dispatch_next()
        if self.on_chunk is not None:
            self.on_chunk(metrics, run.done * self.tc.env_steps_per_update, run.runner)
        if not self.prefetch:
            save = self.checkpoint_due()
        if save and checkpoints is not None:
            whole = gather_rows(run.runner) if run.multi else run.runner
            checkpoints.save(run.done, whole, _concat(run.rows), run.finished, run.size)
            del whole  # not kept alive beside the next chunks' runners
            _hook(f"between:{checkpoints.saved}", checkpoints)  # killed between chunks
        if not self.prefetch:
            go_on, pending = self.dispatch_next()
        if go_on:
            self.chunks += 1
            _hook(f"chunk:{self.chunks}", checkpoints)  # killed while a chunk runs
        else:
            self.stopped = not run.finished
        self.host_seconds += time.perf_counter() - host_start
        return pending


def run_training(
    tc: TrainConfig,
    params: EnvParams,
    seed: int,
    num_seeds: int,
    on_chunk: Callable[[dict, int, Any], None] | None = None,
    target_chunks: int = TARGET_CHUNKS,
    *,
    checkpoints: TrainingCheckpoints | None = None,
    should_stop: Callable[[], bool] | None = None,
    check_divergence: bool = True,
    curriculum: Curriculum | None = None,
    batch_seeds: bool | None = None,
    prefetch: bool = True,
    programs: ProgramStore | None = None,
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
    EnvParams leaves over env steps (:mod:`ppage_jax.train.kit.schedules`).

    ``batch_seeds``: run the seeds through ``vmap`` (True) or, for one seed in one process,
    the unbatched program (False); by default (None) the unbatched one exactly when there is
    one seed. Both give the same results up to float rounding and read each other's
    checkpoints. ``prefetch``: dispatch the next chunk before ``on_chunk`` and the checkpoint
    of the current one, so that host work overlaps the device's (False: one after the
    other); the results are the same. ``programs``: a
    :class:`~ppage_jax.compilation.programs.ProgramStore` that keeps the compiled training
    chunk whole, so a rerun of the same config in a new process loads it without tracing.
    """
    module = algorithm(tc.algorithm)
    start = time.perf_counter()
    size = chunk_size(tc.num_updates, target_chunks)
    pending = None
    if programs is not None and _storable(tc):  # loads in a thread while the seeds initialise
        entry = _chunk_entry(tc, params, curriculum, num_seeds, size, batch_seeds)
        pending = programs.load_soon(*entry)  # or takes the load prefetch_training started
    run = _start(
        tc, params, seed, num_seeds, target_chunks, checkpoints, curriculum, batch_seeds, programs
    )
    resumed_from = run.done
    check = DivergenceCheck(tc, module.policy_state) if check_divergence else None
    if check is not None and run.rows:
        check.prime(run.rows[0])
    asked = (lambda: False) if should_stop is None else should_stop
    stop = (lambda: distributed.any_process(asked())) if run.multi else asked  # all or none

    compile_seconds = 0.0
    compiled: Callable = _chunk_seeds
    if not run.finished:
        compiled = _chunk_program(programs, pending, run, tc, params, curriculum)
        if check is not None:
            check.compile(run.runner, programs if _storable(tc) else None)
        compile_seconds = time.perf_counter() - start

    loop = _ChunkLoop(
        tc, params, curriculum, compiled, run, check, checkpoints, stop, on_chunk, prefetch
    )
    loop.go()
    if checkpoints is not None:
        checkpoints.wait()  # the last checkpoint complete on disk
    runner = run.runner
    jax.block_until_ready(runner)
    if run.multi:
        runner = gather_rows(runner)
    seconds = time.perf_counter() - start
    metrics = _concat(run.rows) if run.rows else {}
    steps = int(np.asarray(jax.device_get(runner.progress.env_steps)).max())
    policies = module.policy_state(runner)  # leaves keep the leading seed axis
    return TrainResult(
        runner,
        metrics,
        policies,
        seconds,
        compile_seconds,
        steps,
        updates=run.done,
        resumed_from=resumed_from,
        stopped=loop.stopped,
        checkpoint=checkpoints.last_update if checkpoints is not None else None,
        host_seconds=loop.host_seconds,
    )
