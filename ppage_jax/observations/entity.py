"""``absolute`` and ``relative``: PPAGE's entity observations, one block per other agent and
per obstacle (world coordinates, or offsets from the observer plus the wall distances)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.observations.registry import (
    DISTANCE,
    FLAG,
    Bounds,
    ObservationBuilder,
    SlotGroup,
    Slots,
    register_observation,
)
from ppage_jax.observations.tables import (
    BoundsColumns,
    as_f32,
    is_prey,
    other_agents,
    team_features,
)
from ppage_jax.state import EnvParams, Layout, State


@register_observation(
    "absolute",
    checks={"include_agents": FLAG, "include_obstacles": FLAG, "distance_type": DISTANCE},
    reads_as="slots",
)
def absolute(
    layout: Layout,
    include_agents: bool = True,
    include_obstacles: bool = True,
    distance_type: str = "euclidean",
) -> ObservationBuilder:
    """PPAGE's absolute (world coordinates, Euclidean by default): 7N + 3O features."""
    options = _Options(False, include_agents, include_obstacles, False, distance_type)
    return _entity_builder("absolute", layout, options)


@register_observation(
    "relative",
    checks={
        "include_agents": FLAG,
        "include_obstacles": FLAG,
        "include_walls": FLAG,
        "distance_type": DISTANCE,
    },
    reads_as="slots",
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
    options = _Options(True, include_agents, include_obstacles, include_walls, distance_type)
    return _entity_builder("relative", layout, options)


@dataclasses.dataclass(frozen=True)
class _Options:
    """What an entity observation holds: offsets from the observer (``relative``) or world
    coordinates, which blocks are switched on, and the distance it measures."""

    relative: bool
    include_agents: bool
    include_obstacles: bool
    include_walls: bool
    distance_type: str


def _entity_builder(name: str, layout: Layout, options: _Options) -> ObservationBuilder:
    """absolute / relative: own block, one block per other agent, per obstacle (+ walls).

    Own: [x, y, type_id, team_base, team_idx, speed, captured] (x, y = 0, 0 when relative).
    Other agent (slot order): [x, y, dist, type_id, team_base, team_idx, captured].
    Obstacle: [x, y, dist]. Relative coordinates are (other - self). Walls (relative):
    [x, size-1-x, y, size-1-y] (left, right, up, down), zeros when off.
    """
    n, n_obs, size = layout.num_agents, layout.num_obstacles, layout.size
    others, team = other_agents(layout), team_features(layout)
    relative, distance_type = options.relative, options.distance_type
    include_agents, include_obstacles = options.include_agents, options.include_obstacles

    def build(state: State, params: EnvParams) -> jax.Array:
        pos = state.positions
        own = jnp.zeros_like(pos) if relative else pos
        own_block = jnp.concatenate(
            [
                as_f32(own),
                as_f32(team),
                as_f32(params.speeds)[:, None],
                as_f32(state.captured)[:, None],
            ],
            axis=1,
        )
        delta = pos[others] - pos[:, None, :]  # [A, A-1, 2]
        where = delta if relative else pos[others]
        agents = jnp.concatenate(
            [
                as_f32(where),
                _distance(delta, distance_type)[..., None],
                as_f32(team)[others],
                as_f32(state.captured)[others][..., None],
            ],
            axis=-1,
        )
        agents = (agents * include_agents).reshape(n, 7 * (n - 1))
        if include_obstacles:
            delta_o = state.obstacles[None, :, :] - pos[:, None, :]  # [A, O, 2]
            where_o = delta_o if relative else jnp.broadcast_to(state.obstacles, delta_o.shape)
            obstacles = jnp.concatenate(
                [as_f32(where_o), _distance(delta_o, distance_type)[..., None]], axis=-1
            ).reshape(n, 3 * n_obs)
        else:  # the slots stay (PPAGE's layout) but nothing is computed for them
            obstacles = jnp.zeros((n, 3 * n_obs), jnp.float32)
        blocks = [own_block, agents, obstacles]
        if relative:
            walls = jnp.stack(
                [pos[:, 0], size - 1 - pos[:, 0], pos[:, 1], size - 1 - pos[:, 1]], axis=1
            )
            blocks.append(as_f32(walls) * options.include_walls)
        return jnp.concatenate(blocks, axis=1)

    # per other agent [x, y, dist, type_id, team_base, team_idx, captured], per obstacle
    # [x, y, dist]: present when any feature is set (a switched-off block is zeros); the
    # window spans the grid; relative has no own position
    absolute = not relative
    slots = Slots(
        (
            SlotGroup("agents", 7, 7, n - 1, None, 0, 1, (-1, 3, 6), absolute),
            SlotGroup("obstacles", 7 + 7 * (n - 1), 3, n_obs, None, 0, 1, (-1,), absolute),
        ),
        radius=size - 1,
        own=None if relative else (0, 1),
    )
    bounds = functools.partial(_bounds, layout, options)
    features = 7 * n + 3 * n_obs + (4 if relative else 0)
    return ObservationBuilder(name, features, build, bounds=bounds, slots=slots)


def _distance(delta: jax.Array, distance_type: str) -> jax.Array:
    """float32[...] Euclidean or Manhattan length of int offsets [..., 2]."""
    if distance_type == "manhattan":
        return jnp.abs(delta).sum(-1).astype(jnp.float32)
    return jnp.sqrt((delta * delta).sum(-1).astype(jnp.float32))


def _euclid_max(layout: Layout) -> np.float32:
    """The largest float32 Euclidean distance on the grid (one ulp of slack for sqrt)."""
    d = np.sqrt(np.float32(2 * (layout.size - 1) ** 2))
    return np.nextafter(d, np.float32(np.inf))


def _bounds(layout: Layout, options: _Options) -> Bounds:
    """Coordinates in [0, size-1] (offsets in [-(size-1), size-1]), distances up to the
    diagonal (Euclidean, or 2(size-1) Manhattan), team features exact, speeds up to the
    largest; switched-off blocks stay 0."""
    n, s1 = layout.num_agents, layout.size - 1
    relative, include_agents = options.relative, options.include_agents
    team, others = team_features(layout), other_agents(layout)
    prey = is_prey(layout)
    far = _euclid_max(layout) if options.distance_type == "euclidean" else np.float32(2 * s1)
    lo_xy, hi_xy = (-s1, s1) if relative else (0, s1)
    cols = BoundsColumns(n)
    own_xy = 0 if relative else s1
    cols.add(
        np.concatenate([np.zeros((n, 2)), team, np.zeros((n, 2))], 1),
        np.concatenate(
            [np.full((n, 2), own_xy), team, np.full((n, 1), layout.max_speed), prey[:, None]], 1
        ),
    )
    # other agents: [x, y, dist, type_id, team_base, team_idx, captured] (zeros when off)
    low = (
        np.concatenate(
            [
                np.full((n, n - 1, 2), lo_xy),
                np.zeros((n, n - 1, 1)),
                team[others],
                np.zeros((n, n - 1, 1)),
            ],
            -1,
        )
        * include_agents
    )
    high = (
        np.concatenate(
            [
                np.full((n, n - 1, 2), hi_xy),
                np.full((n, n - 1, 1), far),
                team[others],
                prey[others][..., None],
            ],
            -1,
        )
        * include_agents
    )
    cols.add(low.reshape(n, -1), high.reshape(n, -1))
    k = layout.num_obstacles
    cols.add(
        np.tile(np.array([lo_xy, lo_xy, 0]) * options.include_obstacles, k),
        np.tile(np.array([hi_xy, hi_xy, far]) * options.include_obstacles, k),
        width=3 * k,
    )
    if relative:
        cols.add(0, s1 * options.include_walls, width=4)
    return cols.result()
