"""A sweep as one compiled program: the (arm, seed) runs stacked on a leading axis, train then
evaluate vmapped over them, split across local devices and compiled for a chunk of runs
(halved until it fits in memory when the chunk size is automatic)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.analysis.sweep.spec import SweepSpec
from ppage_jax.analysis.sweep.trainers import EvalFn, TrainFn
from ppage_jax.artifacts import fault_soon
from ppage_jax.env import GridWorld
from ppage_jax.sharding import shard_batch
from ppage_jax.state import EnvParams


def stack_runs(
    spec: SweepSpec, env: GridWorld
) -> tuple[list[tuple[str, int]], jax.Array, EnvParams]:
    """The runs (arm-major): names ``[(arm, seed)]``, keys [R] and stacked params [R].

    Seed ``i`` of every arm trains from ``PRNGKey(train_seed + i)``: paired across arms.
    """
    arm_params = spec.arm_params(env)
    runs, keys, params = [], [], []
    for arm, p in zip(spec.arms, arm_params, strict=True):
        for i in range(spec.seeds):
            runs.append((arm.name, spec.train_seed + i))
            keys.append(jax.random.PRNGKey(spec.train_seed + i))
            params.append(p)
    return runs, jnp.stack(keys), jax.tree.map(lambda *xs: jnp.stack(xs), *params)


def make_program(train_fn: TrainFn, eval_fn: EvalFn) -> Callable:
    """``vmap`` over runs of train-then-evaluate: ``(keys [R], params [R]) -> (metrics, eval)``."""

    def one_run(key: jax.Array, params: EnvParams):
        runner, metrics = train_fn(key, params)
        return metrics, eval_fn(runner, params)

    return jax.vmap(one_run)


def take(tree: Any, index: np.ndarray) -> Any:
    return jax.tree.map(lambda x: x[index], tree)


def _device_memory_limit() -> int | None:
    device = jax.local_devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:  # backends without memory stats
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _program_bytes(compiled) -> int | None:
    try:
        ma = compiled.memory_analysis()
    except Exception:
        return None
    if ma is None:
        return None
    return int(ma.temp_size_in_bytes + ma.argument_size_in_bytes + ma.output_size_in_bytes)


def compile_chunk(
    program: Callable,
    keys: jax.Array,
    params: EnvParams,
    chunk: int,
    mesh,
    auto: bool,
    memory_fraction: float = 0.7,
):
    """Compile ``program`` for ``chunk`` runs (a multiple of the device count). With
    ``auto``, halve the chunk until the compiled program's memory fits ``memory_fraction``
    of one device's memory. Returns ``(compiled, chunk)``."""
    n_dev = len(mesh.devices.flat)
    limit = _device_memory_limit() if auto else None
    while True:
        index = np.arange(chunk) % keys.shape[0]
        args = shard_batch((keys[index], take(params, index)), mesh)
        lowered = jax.jit(program).lower(*args)
        fault_soon("compile")  # testing hook: killed while XLA compiles
        compiled = lowered.compile()
        need = _program_bytes(compiled)
        per_device = need / n_dev if need is not None else None
        if (
            not auto
            or limit is None
            or per_device is None
            or chunk <= n_dev
            or per_device <= memory_fraction * limit
        ):
            return compiled, chunk
        chunk = max(n_dev, int(math.ceil(chunk / 2 / n_dev)) * n_dev)
