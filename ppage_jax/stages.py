"""The pure array stages of one sub-step: move, capture; and the episode flags."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ppage_jax.state import CaptureEvents


def move(
    positions: jax.Array,
    moving: jax.Array,
    directions: jax.Array,
    captured: jax.Array,
    obstacle_map: jax.Array,
    is_predator: jax.Array,
    *,
    size: int,
    block_by_obstacles: bool,
    allow_cell_sharing: bool,
) -> jax.Array:
    """Move every agent with ``moving`` one cell along its direction.

    Per-axis clip to the grid (a diagonal into a wall slides along it); a move onto an
    obstacle is refused when blocking is on; captured agents stay. With cell sharing off, a
    move onto a cell held by a non-captured agent of the same role is refused, resolved in
    agent order: each agent sees earlier agents at their new cells and later ones at their old.
    """
    moving = moving & ~captured
    target = jnp.clip(positions + directions, 0, size - 1)
    if block_by_obstacles:
        moving = moving & ~obstacle_map[target[:, 1], target[:, 0]]
    if allow_cell_sharing:
        return jnp.where(moving[:, None], target, positions)

    n_agents = positions.shape[0]
    rows = jnp.arange(n_agents)
    blocker_role = is_predator

    def one_agent(i, current):
        same_cell = (current == target[i]).all(axis=1)
        blocked = (same_cell & ~captured & (blocker_role == blocker_role[i]) & (rows != i)).any()
        new_pos = jnp.where(moving[i] & ~blocked, target[i], current[i])
        return current.at[i].set(new_pos)

    return lax.fori_loop(0, n_agents, one_agent, positions)


def capture(
    positions: jax.Array, captured: jax.Array, is_predator: jax.Array
) -> tuple[jax.Array, CaptureEvents]:
    """Capture every uncaptured prey on a cell that holds a predator; credit those predators.

    Returns the new captured flags and the sub-step's events.
    """
    same_cell = (positions[:, None, :] == positions[None, :, :]).all(-1)  # [A, A]
    free_prey = ~is_predator & ~captured
    captured_now = free_prey & (same_cell & is_predator[:, None]).any(axis=0)
    credited = is_predator & (same_cell & free_prey[None, :]).any(axis=1)
    predators_on_cell = (same_cell & is_predator[None, :]).sum(axis=1).astype(jnp.int32)
    events = CaptureEvents(
        captured_now=captured_now,
        credited=credited,
        predators_on_cell=predators_on_cell,
        num_captured=captured_now.sum().astype(jnp.int32),
    )
    return captured | captured_now, events


def flags(
    captures_total: jax.Array, turn: jax.Array, capture_threshold: jax.Array, max_steps: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(terminated, truncated): cumulative captures reach the threshold; turns reach max_steps."""
    return captures_total >= capture_threshold, turn >= max_steps
