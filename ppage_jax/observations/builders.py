"""The shipped observation builders: PPAGE's layouts plus the egocentric ``grid`` view.

PPAGE's builders are reproduced with their layouts (see ``docs/observations.md``) plus one
deliberate change: every block that describes an agent ends with a ``captured`` flag (1.0 for
a caught prey), and so does the observer's own block. Other agents appear in PPAGE's slot
order: agent names sorted as strings (``predator_10`` < ``predator_2`` < ``prey_1``).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.observations.registry import (
    DISTANCE,
    FLAG,
    RADIUS,
    ObservationBuilder,
    register_observation,
)
from ppage_jax.state import EnvParams, Layout, State

GRID_CHANNELS = ("outside", "obstacle", "predators", "free_prey", "captured_prey")
# The grid builder counts agents through a count map when cells <= this x agent pairs, else
# pair by pair (measured on CPU: equal cost at about 2.4 cells per pair).
MAP_CELLS_PER_PAIR = 2


# ----------------------------------------------------------------------------- static helpers
def slot_order(layout: Layout) -> np.ndarray:
    """Agent rows in PPAGE's slot order: names sorted as strings (predator_10 < predator_2)."""
    names = layout.agent_names
    return np.array(sorted(range(len(names)), key=names.__getitem__), dtype=np.int32)


def _others(layout: Layout) -> np.ndarray:
    """int[A, A-1]: for each observer, the other agents' rows in slot order."""
    n, order = layout.num_agents, slot_order(layout)
    table = np.broadcast_to(order, (n, n))
    return table[table != np.arange(n)[:, None]].reshape(n, n - 1)


def _team_features(layout: Layout) -> np.ndarray:
    """float32[A, 3]: PPAGE's (type_id, team_base, team_idx); team = name = role_k -> (type, k)."""
    type_id = (~layout.is_predator).astype(np.float32)
    index = np.concatenate(
        [np.arange(1, layout.n_predators + 1), np.arange(1, layout.n_prey + 1)]
    ).astype(np.float32)
    return np.stack([type_id, type_id, index], axis=1)


def _agent_radii(layout: Layout, radius: int | Sequence[int]) -> np.ndarray:
    """int32[A]: one radius per agent (an int, or one per agent from per_agent)."""
    radii = np.broadcast_to(np.asarray(radius, np.int32), (layout.num_agents,))
    if (radii < 0).any():
        raise ValueError(f"radius must be >= 0, got {radius!r}")
    return radii.copy()


def _grid_view(radii: np.ndarray) -> np.ndarray:
    """bool[A, w, w]: the cells of the largest window (w = 2 max(R) + 1) within each agent's
    own radius (Chebyshev)."""
    big = int(radii.max())
    ring = np.maximum(*np.abs(np.mgrid[-big : big + 1, -big : big + 1]))  # [w, w]
    return ring[None] <= radii[:, None, None]


def _floor_sqrt(d2: jax.Array) -> jax.Array:
    """Exact int(sqrt(d2)) for non-negative int32 d2 (PPAGE's ``int(np.linalg.norm)``)."""
    s = jnp.floor(jnp.sqrt(d2.astype(jnp.float32))).astype(jnp.int32)
    s = s - (s * s > d2)
    return s + ((s + 1) * (s + 1) <= d2)


def _distance(delta: jax.Array, distance_type: str) -> jax.Array:
    """float32[...] Euclidean or Manhattan length of int offsets [..., 2]."""
    if distance_type == "manhattan":
        return jnp.abs(delta).sum(-1).astype(jnp.float32)
    return jnp.sqrt((delta * delta).sum(-1).astype(jnp.float32))


def _f32(x) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


# ----------------------------------------------------------------------------- builders
@register_observation("local_only")
def local_only(layout: Layout) -> ObservationBuilder:
    """Own [x, y] and a captured flag: 3 features."""

    def build(state: State, params: EnvParams) -> jax.Array:
        return jnp.concatenate([_f32(state.positions), _f32(state.captured)[:, None]], axis=1)

    return ObservationBuilder("local_only", 3, build)


@register_observation("default")
def default(layout: Layout) -> ObservationBuilder:
    """PPAGE's default: [x, y, captured], then [int(euclid), captured] per other agent
    (slot order), then int(euclid) per obstacle: 3 + 2(N-1) + O features."""
    n, n_obs = layout.num_agents, layout.num_obstacles
    others = _others(layout)

    def build(state: State, params: EnvParams) -> jax.Array:
        pos = state.positions
        delta = pos[others] - pos[:, None, :]  # [A, A-1, 2]
        agents = jnp.stack(
            [_f32(_floor_sqrt((delta * delta).sum(-1))), _f32(state.captured)[others]], axis=-1
        ).reshape(n, 2 * (n - 1))
        delta_o = state.obstacles[None, :, :] - pos[:, None, :]  # [A, O, 2]
        obstacles = _f32(_floor_sqrt((delta_o * delta_o).sum(-1))).reshape(n, n_obs)
        return jnp.concatenate(
            [_f32(pos), _f32(state.captured)[:, None], agents, obstacles], axis=1
        )

    return ObservationBuilder("default", 3 + 2 * (n - 1) + n_obs, build)


@register_observation(
    "local_radius",
    checks={"radius": RADIUS, "include_agents": FLAG, "include_obstacles": FLAG},
    per_role=("radius",),
)
def local_radius(
    layout: Layout, radius: int = 3, include_agents: bool = True, include_obstacles: bool = True
) -> ObservationBuilder:
    """PPAGE's local_radius with fixed slots (issue #34): [x, y, radius, captured], then one
    6-slot [present, dx, dy, manhattan, type_id, captured] per agent in slot order (own slot
    zero), then one 4-slot [present, dx, dy, manhattan] per obstacle index: 4 + 6N + 4O.
    Visible means Manhattan distance <= the observer's radius; absent slots are zeros."""
    n, n_obs = layout.num_agents, layout.num_obstacles
    radii, order = _agent_radii(layout, radius), slot_order(layout)
    slot_type = _team_features(layout)[order, 0]
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
        agents = (_f32(agents) * seen[..., None]).reshape(n, 6 * n)
        obstacles = (
            _local_obstacles(state.obstacles, pos, r)
            if include_obstacles
            else jnp.zeros((n, 4 * n_obs), jnp.float32)
        )
        header = jnp.concatenate(
            [_f32(pos), _f32(r)[:, None], _f32(state.captured)[:, None]], axis=1
        )
        return jnp.concatenate([header, agents, obstacles], axis=1)

    return ObservationBuilder("local_radius", 4 + 6 * n + 4 * n_obs, build)


def _local_obstacles(obstacles: jax.Array, pos: jax.Array, r: jax.Array) -> jax.Array:
    """float32[A, 4K]: [present, dx, dy, manhattan] per obstacle within each radius."""
    delta = obstacles[None, :, :] - pos[:, None, :]  # [A, K, 2]
    dist = jnp.abs(delta).sum(-1)
    seen = dist <= r[:, None]
    slots = jnp.stack([jnp.ones_like(dist), delta[..., 0], delta[..., 1], dist], axis=-1)
    return (_f32(slots) * seen[..., None]).reshape(pos.shape[0], -1)


def _entity_builder(
    name: str,
    layout: Layout,
    *,
    relative: bool,
    include_agents: bool,
    include_obstacles: bool,
    include_walls: bool,
    distance_type: str,
) -> ObservationBuilder:
    """absolute / relative: own block, one block per other agent, per obstacle (+ walls).

    Own: [x, y, type_id, team_base, team_idx, speed, captured] (x, y = 0, 0 when relative).
    Other agent (slot order): [x, y, dist, type_id, team_base, team_idx, captured].
    Obstacle: [x, y, dist]. Relative coordinates are (other - self). Walls (relative):
    [x, size-1-x, y, size-1-y] (left, right, up, down), zeros when off.
    """
    n, n_obs, size = layout.num_agents, layout.num_obstacles, layout.size
    others, team = _others(layout), _team_features(layout)

    def build(state: State, params: EnvParams) -> jax.Array:
        pos = state.positions
        own = jnp.zeros_like(pos) if relative else pos
        own_block = jnp.concatenate(
            [_f32(own), _f32(team), _f32(params.speeds)[:, None], _f32(state.captured)[:, None]],
            axis=1,
        )
        delta = pos[others] - pos[:, None, :]  # [A, A-1, 2]
        where = delta if relative else pos[others]
        agents = jnp.concatenate(
            [
                _f32(where),
                _distance(delta, distance_type)[..., None],
                _f32(team)[others],
                _f32(state.captured)[others][..., None],
            ],
            axis=-1,
        )
        agents = (agents * include_agents).reshape(n, 7 * (n - 1))
        if include_obstacles:
            delta_o = state.obstacles[None, :, :] - pos[:, None, :]  # [A, O, 2]
            where_o = delta_o if relative else jnp.broadcast_to(state.obstacles, delta_o.shape)
            obstacles = jnp.concatenate(
                [_f32(where_o), _distance(delta_o, distance_type)[..., None]], axis=-1
            ).reshape(n, 3 * n_obs)
        else:  # the slots stay (PPAGE's layout) but nothing is computed for them
            obstacles = jnp.zeros((n, 3 * n_obs), jnp.float32)
        blocks = [own_block, agents, obstacles]
        if relative:
            walls = jnp.stack(
                [pos[:, 0], size - 1 - pos[:, 0], pos[:, 1], size - 1 - pos[:, 1]], axis=1
            )
            blocks.append(_f32(walls) * include_walls)
        return jnp.concatenate(blocks, axis=1)

    return ObservationBuilder(name, 7 * n + 3 * n_obs + (4 if relative else 0), build)


@register_observation(
    "absolute",
    checks={"include_agents": FLAG, "include_obstacles": FLAG, "distance_type": DISTANCE},
)
def absolute(
    layout: Layout,
    include_agents: bool = True,
    include_obstacles: bool = True,
    distance_type: str = "euclidean",
) -> ObservationBuilder:
    """PPAGE's absolute (world coordinates, Euclidean by default): 7N + 3O features."""
    return _entity_builder(
        "absolute",
        layout,
        relative=False,
        include_agents=include_agents,
        include_obstacles=include_obstacles,
        include_walls=False,
        distance_type=distance_type,
    )


@register_observation(
    "relative",
    checks={
        "include_agents": FLAG,
        "include_obstacles": FLAG,
        "include_walls": FLAG,
        "distance_type": DISTANCE,
    },
)
def relative(
    layout: Layout,
    include_agents: bool = True,
    include_obstacles: bool = True,
    include_walls: bool = False,
    distance_type: str = "manhattan",
) -> ObservationBuilder:
    """PPAGE's relative (offsets other - self, Manhattan by default, 4 wall distances at the
    end, zeros unless include_walls): 7N + 3O + 4 features."""
    return _entity_builder(
        "relative",
        layout,
        relative=True,
        include_agents=include_agents,
        include_obstacles=include_obstacles,
        include_walls=include_walls,
        distance_type=distance_type,
    )


@register_observation("grid", checks={"radius": RADIUS}, per_role=("radius",))
def grid(layout: Layout, radius: int = 3) -> ObservationBuilder:
    """Egocentric (2R+1) x (2R+1) window with channels GRID_CHANNELS, flattened.

    Cell [u, v, c] is grid cell (x + v - R, y + u - R) (rows grow downward like y).
    Channels: outside the grid (1), obstacle (1), number of predators, number of uncaptured
    prey, number of captured prey (the observer counts itself). With per-role radii R is the
    largest; cells beyond an agent's own radius (Chebyshev) are zero in every channel.
    ``shape`` is (2R+1, 2R+1, 5).

    Each agent gathers its window's cells from the obstacle map, so the cost does not grow
    with the grid: O(A (2R+1)^2) plus the agent counts, placed pair by pair (O(A^2)), or,
    on crowded grids where that costs more, through a per-step count map (O(cells)).
    """
    n, size = layout.num_agents, layout.size
    radii = _agent_radii(layout, radius)
    big = int(radii.max())
    width = 2 * big + 1
    is_predator = jnp.asarray(layout.is_predator)
    du, dv = np.mgrid[-big : big + 1, -big : big + 1]  # [w, w] offsets
    in_view = _grid_view(radii).astype(np.float32)
    by_map = size * size <= MAP_CELLS_PER_PAIR * n * n

    def build(state: State, params: EnvParams) -> jax.Array:
        pos = state.positions
        cx, cy = pos[:, 0, None, None] + dv, pos[:, 1, None, None] + du  # [A, w, w]
        inside = (cx >= 0) & (cx < size) & (cy >= 0) & (cy < size)
        cells = (jnp.clip(cy, 0, size - 1), jnp.clip(cx, 0, size - 1))
        kinds = _f32(
            jnp.stack(
                [is_predator, ~is_predator & ~state.captured, ~is_predator & state.captured], axis=1
            )
        )  # [A, 3]
        if by_map:
            count_map = jnp.zeros((size, size, 3), jnp.float32).at[pos[:, 1], pos[:, 0]].add(kinds)
            counts = count_map[cells] * inside[..., None]
        else:
            counts = _window_counts(pos, kinds, big)
        window = jnp.concatenate(
            [_f32(~inside)[..., None], _f32(inside & state.obstacle_map[cells])[..., None], counts],
            axis=-1,
        )  # [A, w, w, C]
        if (radii != big).any():
            window = window * jnp.asarray(in_view)[..., None]
        return window.reshape(n, -1)

    shape = (width, width, len(GRID_CHANNELS))
    return ObservationBuilder("grid", int(np.prod(shape)), build, shape)


def _window_counts(pos: jax.Array, kinds: jax.Array, big: int) -> jax.Array:
    """float32[A, w, w, 3]: ``kinds`` summed over the agents in each observer's window.

    Agent j lands in observer i's window cell (dy + R, dx + R) when |dx|, |dy| <= R; the
    others go to one spare cell past the end, dropped."""
    n, width = pos.shape[0], 2 * big + 1
    delta = pos[None, :, :] - pos[:, None, :]  # [A, A, 2]
    near = (jnp.abs(delta) <= big).all(-1)
    cell = jnp.where(near, (delta[..., 1] + big) * width + delta[..., 0] + big, width * width)
    counts = (
        jnp.zeros((n, width * width + 1, 3), jnp.float32)
        .at[np.arange(n)[:, None], cell]
        .add(jnp.broadcast_to(kinds, (n, n, 3)))
    )
    return counts[:, :-1].reshape(n, width, width, 3)
