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


@register_reward("prey_distance", applies_to="prey")
def prey_distance(ctx: RewardContext) -> jax.Array:
    """Uncaptured prey: +(Manhattan distance to the nearest predator), so farther is better.

    Sign convention: a reward, not a cost (PPAGE's ``PreyDistanceReward``: ``+w * distance``).
    Captured prey and predators get 0; with no predator on the grid every agent gets 0.
    """
    nearest, _ = nearest_distance(ctx.state.positions, ctx.is_predator)
    return jnp.where(ctx.free_prey, nearest, 0).astype(jnp.float32)


@register_reward("capture_proximity", params={"radius": 1.0}, applies_to="all")
def capture_proximity(ctx: RewardContext) -> jax.Array:
    """Pressure near a capture, per sub-step, within Manhattan distance ``radius``.

    Predators: +1 when some uncaptured prey is within ``radius``. Uncaptured prey: -1 when
    some predator is within ``radius``. Everyone else (and everyone, once no uncaptured prey
    is left) gets 0. Like SISL pursuit's tag reward it repeats every sub-step, so a large
    weight can pay predators for hovering next to prey instead of catching it.
    """
    radius = ctx.params["radius"]
    to_prey, any_prey = nearest_distance(ctx.state.positions, ctx.free_prey)
    to_predator, any_predator = nearest_distance(ctx.state.positions, ctx.is_predator)
    hunting = ctx.is_predator & any_prey & (to_prey <= radius)
    hunted = ctx.free_prey & any_predator & (to_predator <= radius)
    return hunting.astype(jnp.float32) - hunted.astype(jnp.float32)
