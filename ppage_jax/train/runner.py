"""Host-side driver of a training run: all seeds at once (``vmap``), in compiled chunks of
updates so a progress bar can follow; the result equals ``jax.vmap(train)`` over the seeds.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.state import EnvParams
from ppage_jax.train import common
from ppage_jax.train.common import TrainConfig
from ppage_jax.train.experiment import algorithm


@dataclasses.dataclass
class TrainResult:
    """A finished run: final runner states and metrics, both with a leading seed axis."""

    runner: Any
    metrics: dict            # arrays [num_seeds, num_updates, ...] (only the updates run)
    policies: Any            # policy_state stacked over seeds
    seconds: float           # wall time of training, compile included
    compile_seconds: float   # time to the end of the first chunk's compile
    env_steps: int           # env steps taken per seed


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


def run_training(tc: TrainConfig, params: EnvParams, seed: int, num_seeds: int,
                 on_chunk: Callable[[dict, int, Any], None] | None = None,
                 target_chunks: int = 40) -> TrainResult:
    """Train ``num_seeds`` seeds together; ``on_chunk(metrics_chunk, env_steps_done,
    runner)`` is called after each compiled chunk (metrics arrays [num_seeds, chunk, ...];
    ``runner`` the current runner state, leading seed axis)."""
    module = algorithm(tc.algorithm)
    start = time.perf_counter()
    runner = jax.jit(jax.vmap(module.init, in_axes=(0, None, None)))(
        seed_keys(seed, num_seeds), tc, params)
    size = chunk_size(tc.num_updates, target_chunks)

    def chunk(runner, params):
        return common.run_updates(module.update, runner, tc, params, size)

    compiled = jax.jit(jax.vmap(chunk, in_axes=(0, None))).lower(runner, params).compile()
    compile_seconds = time.perf_counter() - start
    rows = []
    done_updates = 0
    for _ in range(tc.num_updates // size):
        runner, metrics = compiled(runner, params)
        metrics = jax.device_get(metrics)
        rows.append(metrics)
        done_updates += size
        if on_chunk is not None:
            on_chunk(metrics, done_updates * tc.env_steps_per_update, runner)
        if tc.episodes is not None and not np.asarray(metrics["active"]).any():
            break
    jax.block_until_ready(runner)
    seconds = time.perf_counter() - start
    metrics = jax.tree.map(lambda *a: np.concatenate(a, axis=1), *rows)
    steps = int(np.asarray(jax.device_get(runner.progress.env_steps)).max())
    policies = module.policy_state(runner)   # leaves keep the leading seed axis
    return TrainResult(runner, metrics, policies, seconds, compile_seconds, steps)
