"""``local_radius``: PPAGE's local view with fixed slots, one per agent and per obstacle,
filled for what lies within the observer's view radius."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.observations.registry import (
    FLAG,
    RADIUS,
    Bounds,
    ObservationBuilder,
    SlotGroup,
    Slots,
    register_observation,
)
from ppage_jax.observations.tables import (
    BoundsColumns,
    agent_radii,
    as_f32,
    is_prey,
    slot_order,
    team_features,
)
from ppage_jax.state import EnvParams, Layout, State


@register_observation(
    "local_radius",
    checks={"radius": RADIUS, "include_agents": FLAG, "include_obstacles": FLAG},
    per_role=("radius",),
    reads_as="slots",
)
def local_radius(
    layout: Layout,
    radius: int | Sequence[int] = 3,
    include_agents: bool = True,
    include_obstacles: bool = True,
) -> ObservationBuilder:
    """PPAGE's local_radius with fixed slots (issue #34): [x, y, radius, captured], then one
    6-slot [present, dx, dy, manhattan, type_id, captured] per agent in slot order (own slot
    zero), then one 4-slot [present, dx, dy, manhattan] per obstacle index: 4 + 6N + 4O.
    Visible means Manhattan distance <= the observer's radius; absent slots are zeros."""
    n, n_obs = layout.num_agents, layout.num_obstacles
    radii, order = agent_radii(layout, radius), slot_order(layout)
    slot_type = team_features(layout)[order, 0]
    not_self = order[None, :] != np.arange(n)[:, None]  # [A, A]

    def build(state: State, params: EnvParams) -> jax.Array:
        pos, r = state.positions, jnp.asarray(radii)
        delta = pos[order][None, :, :] - pos[:, None, :]  # [A, A, 2]
        dist = jnp.abs(delta).sum(-1)
        seen = (dist <= r[:, None]) & not_self & include_agents
        agents = jnp.stack(
            [
                jnp.ones_like(dist),
                delta[..., 0],
                delta[..., 1],
                dist,
                jnp.broadcast_to(slot_type, (n, n)),
                jnp.broadcast_to(state.captured[order], (n, n)),
            ],
            axis=-1,
        )
        agents = (as_f32(agents) * seen[..., None]).reshape(n, 6 * n)
        obstacles = (
            _local_obstacles(state.obstacles, pos, r)
            if include_obstacles
            else jnp.zeros((n, 4 * n_obs), jnp.float32)
        )
        header = jnp.concatenate(
            [as_f32(pos), as_f32(r)[:, None], as_f32(state.captured)[:, None]], axis=1
        )
        return jnp.concatenate([header, agents, obstacles], axis=1)

    # per agent [present, dx, dy, manhattan, type_id, captured]; per obstacle [present, dx,
    # dy, manhattan]: present, then the offset, then what the slot adds at its cell
    slots = Slots(
        (
            SlotGroup("agents", 4, 6, n, 0, 1, 2, (0, 4, 5)),
            SlotGroup("obstacles", 4 + 6 * n, 4, n_obs, 0, 1, 2, (0,)),
        ),
        radius=min(layout.size - 1, int(radii.max(initial=0))),
        own=(0, 1),
    )
    bounds = functools.partial(_bounds, layout, radii, include_agents, include_obstacles)
    size = 4 + 6 * n + 4 * n_obs
    return ObservationBuilder("local_radius", size, build, bounds=bounds, slots=slots)


def _local_obstacles(obstacles: jax.Array, pos: jax.Array, r: jax.Array) -> jax.Array:
    """float32[A, 4K]: [present, dx, dy, manhattan] per obstacle within each radius."""
    delta = obstacles[None, :, :] - pos[:, None, :]  # [A, K, 2]
    dist = jnp.abs(delta).sum(-1)
    seen = dist <= r[:, None]
    slots = jnp.stack([jnp.ones_like(dist), delta[..., 0], delta[..., 1], dist], axis=-1)
    return (as_f32(slots) * seen[..., None]).reshape(pos.shape[0], -1)


def _bounds(
    layout: Layout, radii: np.ndarray, include_agents: bool, include_obstacles: bool
) -> Bounds:
    """Offsets within the observer's radius (and the grid), Manhattan distances up to both;
    the header's radius is the observer's own; absent slots (the own one) stay 0."""
    n, s1 = layout.num_agents, layout.size - 1
    reach, dist = np.minimum(radii, s1), np.minimum(radii, 2 * s1)  # per observer
    order = slot_order(layout)
    prey = is_prey(layout)
    cols = BoundsColumns(n)
    cols.add(
        np.stack([np.zeros(n), np.zeros(n), radii, np.zeros(n)], 1),
        np.stack([np.full(n, s1), np.full(n, s1), radii, prey], 1),
    )
    # agent slot j (slot order): [present, dx, dy, manhattan, type_id, captured]; own slot 0
    seen = (order[None, :] != np.arange(n)[:, None]) & include_agents  # [A, A]
    low = np.stack(
        [
            np.zeros((n, n)),
            -reach[:, None] * np.ones(n),
            -reach[:, None] * np.ones(n),
            np.zeros((n, n)),
            np.zeros((n, n)),
            np.zeros((n, n)),
        ],
        -1,
    )
    high = np.stack(
        [
            np.ones((n, n)),
            reach[:, None] * np.ones(n),
            reach[:, None] * np.ones(n),
            dist[:, None] * np.ones(n),
            np.broadcast_to(prey[order], (n, n)),
            np.broadcast_to(prey[order], (n, n)),
        ],
        -1,
    )
    cols.add((low * seen[..., None]).reshape(n, -1), (high * seen[..., None]).reshape(n, -1))
    # obstacle slot: [present, dx, dy, manhattan]
    k = layout.num_obstacles
    low_o = np.stack([np.zeros(n), -reach, -reach, np.zeros(n)], 1) * include_obstacles
    high_o = np.stack([np.ones(n), reach, reach, dist], 1) * include_obstacles
    cols.add(np.tile(low_o, (1, k)), np.tile(high_o, (1, k)))
    return cols.result()
