"""Dense shaping terms (direct, not potential-based): they can move the optimum."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.rewards.registry import RewardContext, register_reward


def manhattan(a: jax.Array, b: jax.Array) -> jax.Array:
    """int32[N, M] Manhattan distances between the [x, y] rows of ``a`` and ``b``."""
    return jnp.abs(a[:, None, :] - b[None, :, :]).sum(-1)


def nearest_distance(positions: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per agent: Manhattan distance to the nearest target agent, and whether any exists.

    ``targets`` is a bool[A] mask over the same agent rows.
    """
    dist = manhattan(positions, positions)
    big = jnp.iinfo(jnp.int32).max
    nearest = jnp.where(targets[None, :], dist, big).min(axis=1)
    any_target = targets.any()
    return jnp.where(any_target, nearest, 0), any_target


@register_reward("predator_distance", applies_to="predator")
def predator_distance(ctx: RewardContext) -> jax.Array:
    """Predators: -(Manhattan distance to the nearest uncaptured prey); 0 when none is left."""
    nearest, _ = nearest_distance(ctx.state.positions, ctx.free_prey)
    return jnp.where(ctx.is_predator, -nearest, 0).astype(jnp.float32)


@register_reward("survival", applies_to="prey")
def survival(ctx: RewardContext) -> jax.Array:
    """+1 to each prey that is still uncaptured after the sub-step."""
    return ctx.free_prey.astype(jnp.float32)
