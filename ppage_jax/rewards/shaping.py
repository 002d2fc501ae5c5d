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


def _span(params, size: int) -> float:
    """The largest Manhattan distance on a ``size`` x ``size`` grid."""
    return 2.0 * max(size - 1, 1)


@register_reward(
    "predator_distance", applies_to="predator", bounds=lambda p, size: (-_span(p, size), 0.0)
)
def predator_distance(ctx: RewardContext) -> jax.Array:
    """Predators: -(Manhattan distance to the nearest uncaptured prey); 0 when none is left."""
    nearest, _ = nearest_distance(ctx.state.positions, ctx.free_prey)
    return jnp.where(ctx.is_predator, -nearest, 0).astype(jnp.float32)


@register_reward("predator_closeness", applies_to="predator", bounds=(0.0, 1.0))
def predator_closeness(ctx: RewardContext) -> jax.Array:
    """Predators: +(1 - d / (2 (size - 1))), d the Manhattan distance to the nearest uncaptured
    prey: 1 on its cell, 0 from the far corner; 0 when none is left.

    The closeness signal of ``predator_distance`` as a payment: paid every sub-step with no
    matching cost, it pays for staying near prey, so without a time cost that outweighs it an
    agent earns more by keeping the episode going than by ending it with a capture.
    """
    nearest, _ = nearest_distance(ctx.state.positions, ctx.free_prey)
    span = 2.0 * jnp.maximum(ctx.grid_size - 1, 1)
    paid = ctx.is_predator & ctx.free_prey.any()
    return jnp.where(paid, 1.0 - nearest / span, 0.0).astype(jnp.float32)


@register_reward(
    "prey_in_range", params={"near": 2.0, "far": 4.0}, applies_to="predator", bounds=(0.0, 1.0)
)
def prey_in_range(ctx: RewardContext) -> jax.Array:
    """Predators: +1 while the nearest uncaptured prey is between ``near`` and ``far`` cells
    away (Manhattan, inclusive); 0 otherwise and when none is left.

    Meant as pursuit pressure (keep the prey within reach), it pays every sub-step for
    holding a prey at a distance: closing in to catch it stops the payment, and so does the
    capture. A farmable term by design: hovering in range collects it until the step limit.
    """
    nearest, any_prey = nearest_distance(ctx.state.positions, ctx.free_prey)
    p = ctx.params
    held = ctx.is_predator & any_prey & (nearest >= p["near"]) & (nearest <= p["far"])
    return held.astype(jnp.float32)


@register_reward(
    "predator_cohesion", params={"radius": 1.0}, applies_to="predator", bounds=(0.0, 1.0)
)
def predator_cohesion(ctx: RewardContext) -> jax.Array:
    """Predators: +1 while another predator is within ``radius`` cells (Manhattan,
    inclusive); 0 otherwise and once no uncaptured prey is left.

    Meant as a teamwork bonus (hunt as a pack), it pays for standing together whether or not
    anyone hunts: two predators parked side by side collect it every sub-step, and a capture,
    which ends the episode, ends the pay. A farmable term by design.
    """
    dist = manhattan(ctx.state.positions, ctx.state.positions)
    others = ctx.is_predator[None, :] & ~jnp.eye(dist.shape[0], dtype=bool)
    close = (others & (dist <= ctx.params["radius"])).any(axis=1)
    return (ctx.is_predator & close & ctx.free_prey.any()).astype(jnp.float32)


@register_reward(
    "place_bonus",
    params={"x": 0.0, "y": 0.0, "radius": 1.0},
    applies_to="predator",
    bounds=(0.0, 1.0),
)
def place_bonus(ctx: RewardContext) -> jax.Array:
    """+1 while an agent (a captured prey excepted) stands within ``radius`` cells
    (Manhattan, inclusive) of the cell (``x``, ``y``), default a corner; 0 otherwise and
    once no uncaptured prey is left.

    Meant as a nudge towards a place (a den, a choke point), it pays for being there whether
    or not anyone hunts or hides: an agent parked on the place collects it every sub-step,
    and for predators a capture, which ends the episode, ends the pay. A farmable term by
    design, for either role (``applies_to: prey`` pays the prey for standing there).
    """
    p = ctx.params
    place = jnp.stack([p["x"], p["y"]]).astype(ctx.state.positions.dtype)
    dist = jnp.abs(ctx.state.positions - place[None, :]).sum(-1)
    there = (dist <= p["radius"]) & ~(ctx.is_prey & ctx.state.captured)
    return (there & ctx.free_prey.any()).astype(jnp.float32)


@register_reward("survival", applies_to="prey", bounds=(0.0, 1.0))
def survival(ctx: RewardContext) -> jax.Array:
    """+1 to each prey that is still uncaptured after the sub-step."""
    return ctx.free_prey.astype(jnp.float32)


@register_reward("prey_distance", applies_to="prey", bounds=lambda p, size: (0.0, _span(p, size)))
def prey_distance(ctx: RewardContext) -> jax.Array:
    """Uncaptured prey: +(Manhattan distance to the nearest predator), so farther is better.

    Sign convention: a reward, not a cost (PPAGE's ``PreyDistanceReward``: ``+w * distance``).
    Captured prey and predators get 0; with no predator on the grid every agent gets 0.
    """
    nearest, _ = nearest_distance(ctx.state.positions, ctx.is_predator)
    return jnp.where(ctx.free_prey, nearest, 0).astype(jnp.float32)


@register_reward("capture_proximity", params={"radius": 1.0}, applies_to="all", bounds=(-1.0, 1.0))
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
