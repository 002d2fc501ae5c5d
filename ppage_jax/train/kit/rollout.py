"""Stepping a learner's batch of grids: auto-reset, episode statistics, valid-transition masks.

- A transition of agent ``i`` at step ``t`` is *valid* when the agent was not a captured prey
  before the step. Invalid transitions are masked out of every loss and table update (PPAGE
  keeps updating captured prey; we do not). The step on which a prey is captured is valid and
  is terminal for that prey (``agent_terminal``), so nothing after its capture flows back.
- ``terminated`` cuts the bootstrap; ``truncated`` does not: the bootstrap value is computed on
  ``info["final_obs"]``, the last observation of the finished episode.
- Grids step through the fast batched auto-reset (:class:`BatchedAutoResetEnv`) and their
  batch axis is split across the local devices (:func:`shard_envs`, ``jax.sharding``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.episodes.stats import (
    EpisodeStats,
    episode_stats_init,
    episode_stats_update,
    hovering,
)
from ppage_jax.sharding import batch_sharding, make_mesh
from ppage_jax.state import NO_TRUNCATION, EnvParams, State
from ppage_jax.train.config import TrainConfig
from ppage_jax.types import Replaceable, pytree_dataclass
from ppage_jax.wrappers import BatchedAutoResetEnv


@pytree_dataclass
class EnvCarry(Replaceable):
    """The batch of grids between steps: observations, states and running episode stats."""

    obs: jax.Array  # float32[E, A, F]
    state: State  # batched over E
    stats: EpisodeStats  # batched over E


@pytree_dataclass
class Step(Replaceable):
    """What one batched env step tells a learner (E grids, A agents)."""

    reward: jax.Array  # float32[E, A]
    valid: jax.Array  # bool[E, A]: not a captured prey before the step
    agent_terminal: jax.Array  # bool[E, A]: terminated, or this prey was captured
    episode_end: jax.Array  # bool[E]: terminated | truncated (the grid was reset)
    final_obs: jax.Array  # float32[E, A, F]: obs after the step, before any reset
    final_state: State  # [E]: the state after the step, before any reset
    next_obs: jax.Array  # float32[E, A, F]: obs to act on next (reset where ended)
    finished: dict  # episode_stats_update's `finished`, per grid


# The random stream of the staggered starts: fold_in(reset key, STAGGER_STREAM).
STAGGER_STREAM = 7_919


def _auto_reset(tc: TrainConfig) -> BatchedAutoResetEnv:
    return BatchedAutoResetEnv(tc.env, tc.num_envs)


def shard_envs(tree: Any) -> Any:
    """Split the leading (grid) axis of every leaf across the local devices inside a jitted
    program (``jax.sharding``; the helper's mesh). A no-op on one device, or when the batch
    does not divide evenly by the device count."""
    n_dev = jax.local_device_count()
    leaves = jax.tree.leaves(tree)
    if n_dev == 1 or any(np.ndim(x) == 0 or np.shape(x)[0] % n_dev for x in leaves):
        return tree
    sharding = batch_sharding(make_mesh(devices=jax.local_devices()))
    return jax.lax.with_sharding_constraint(tree, sharding)


def env_reset(tc: TrainConfig, key: jax.Array, params: EnvParams) -> EnvCarry:
    """Reset ``tc.num_envs`` grids. With ``tc.stagger_starts`` each grid's turn counter
    starts at a uniform random turn below the step limit, so the first episodes end at
    different turns and the grids' truncations never come in waves (the first episode of a
    grid is that much shorter; later ones are whole)."""
    obs, state = _auto_reset(tc).reset(key, params)
    if tc.stagger_starts:
        limit = jnp.asarray(params.max_steps, jnp.int32)
        start = jax.random.randint(
            jax.random.fold_in(key, STAGGER_STREAM), (tc.num_envs,), 0, jnp.maximum(limit, 1)
        )
        finite = limit < NO_TRUNCATION
        state = state.replace(turn=jnp.where(finite, start, state.turn).astype(state.turn.dtype))
    return shard_envs(EnvCarry(obs, state, episode_stats_init(tc.env, (tc.num_envs,))))


def env_step(
    tc: TrainConfig,
    key: jax.Array,
    carry: EnvCarry,
    actions: jax.Array,
    params: EnvParams,
    gamma: jax.Array | float,
) -> tuple[EnvCarry, Step]:
    """Step every grid with the batched auto-reset; return the new carry and the learner's
    view of the step."""
    was_captured = carry.state.captured
    obs, state, reward, terminated, truncated, info = _auto_reset(tc).step(
        key, carry.state, actions, params
    )
    hover = hovering(tc.env, info["final_state"], info["captures"])
    stats, finished = episode_stats_update(carry.stats, info, terminated, truncated, gamma, hover)
    is_prey = ~jnp.asarray(tc.env.is_predator)
    step = Step(
        reward=reward,
        valid=~was_captured,
        agent_terminal=terminated[:, None] | (info["captured"] & is_prey),
        episode_end=terminated | truncated,
        final_obs=info["final_obs"],
        final_state=info["final_state"],
        next_obs=obs,
        finished=finished,
    )
    return shard_envs(EnvCarry(obs, state, stats)), step


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of ``x`` over the entries where ``mask`` is set (0 when none is), e.g. over the
    valid transitions (``Step.valid``)."""
    mask = mask.astype(x.dtype)
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)
