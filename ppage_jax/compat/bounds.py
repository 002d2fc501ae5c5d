"""The real value bounds of each observation builder and of the global state, for the
adapters' ``Box`` spaces, derived from the layout alone (NumPy, no JAX backend).

Coordinates lie in [0, size-1] (offsets in [-(size-1), size-1], or within the view radius),
distances are bounded by the grid's diagonal (Euclidean, or 2(size-1) Manhattan), flags lie
in [0, 1], counts are bounded by the agent counts, and speeds by the largest speed. Features
that are constant for an agent (its own radius, its team index) keep their exact value; the
space shared by all agents is the union of the per-agent bounds. A builder registered by a
user gets unbounded spaces unless bounds are registered for it with
:func:`register_observation_bounds`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ppage_jax.observations import builder_params, slot_order
from ppage_jax.observations.builders import _agent_radii, _grid_view, _others, _team_features
from ppage_jax.state import Layout

# fn(layout, **builder params) -> (low, high), each float32[A, size] (one row per observer)
BoundsFn = Callable[..., tuple[np.ndarray, np.ndarray]]

_BOUNDS: dict[str, BoundsFn] = {}


def register_observation_bounds(name: str):
    """Register ``fn(layout, **params) -> (low, high)`` (float[A, size] per observer, or
    float[size] for all) as the bounds of the observation builder ``name``."""

    def decorator(fn: BoundsFn) -> BoundsFn:
        _BOUNDS[name] = fn
        return fn

    return decorator


def observation_bounds(
    config: Mapping[str, Any], layout: Layout, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) float32[size] of the configured builder, the union over agents."""
    obs = config["observations"]
    name = obs["type"]
    if name not in _BOUNDS:
        return (np.full(size, -np.inf, np.float32), np.full(size, np.inf, np.float32))
    low, high = _BOUNDS[name](layout, **_builder_kwargs(obs, layout))
    low = np.broadcast_to(np.asarray(low, np.float32), (layout.num_agents, size))
    high = np.broadcast_to(np.asarray(high, np.float32), (layout.num_agents, size))
    return _non_degenerate(low.min(axis=0), high.max(axis=0))


def global_state_bounds(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of ``GridWorld.global_state``: [x, y, is_predator, captured] per agent,
    then the obstacle map (flags in [0, 1])."""
    agent = np.array([layout.size - 1, layout.size - 1, 1, 1], np.float32)
    high = np.concatenate(
        [np.tile(agent, layout.num_agents), np.ones(layout.size * layout.size, np.float32)]
    )
    return _non_degenerate(np.zeros_like(high), high)


def _non_degenerate(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Widen each constant feature (low == high: an own radius, a disabled block's zeros) to
    reach 0, and a constant 0 to [0, 1], so that scalers dividing by high - low stay finite."""
    same = low == high
    return (
        np.where(same, np.minimum(low, 0), low).astype(np.float32),
        np.where(same, np.where(high == 0, 1, np.maximum(high, 0)), high).astype(np.float32),
    )


def _builder_kwargs(obs: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """The builder's keyword arguments as ``make_observation`` resolves them (defaults, params,
    then per-role values as one value per agent)."""
    kwargs = {**builder_params(obs["type"]), **obs["params"]}
    per_agent = obs["per_agent"] or {}
    roles = np.where(layout.is_predator, "predator", "prey")
    for key in {k for body in per_agent.values() for k in body}:
        kwargs[key] = tuple(per_agent.get(role, {}).get(key, kwargs[key]) for role in roles)
    return kwargs


# ----------------------------------------------------------------------------- helpers
def _euclid_max(layout: Layout) -> np.float32:
    """The largest float32 Euclidean distance on the grid (one ulp of slack for sqrt)."""
    d = np.sqrt(np.float32(2 * (layout.size - 1) ** 2))
    return np.nextafter(d, np.float32(np.inf))


class _Columns:
    """Per-observer (low, high) blocks, concatenated along the feature axis."""

    def __init__(self, num_agents: int):
        self.n, self.lows, self.highs = num_agents, [], []

    def add(self, low, high, width: int | None = None) -> None:
        """Append a block: float[A, k] per observer, float[k] (or scalars and ``width``) for
        every observer alike."""
        shape = np.broadcast_shapes(
            np.shape(low), np.shape(high), () if width is None else (width,)
        )
        if len(shape) == 1:
            shape = (self.n, shape[0])
        self.lows.append(np.broadcast_to(np.asarray(low, np.float32), shape))
        self.highs.append(np.broadcast_to(np.asarray(high, np.float32), shape))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.lows, axis=1), np.concatenate(self.highs, axis=1)


# ----------------------------------------------------------------------------- builders
@register_observation_bounds("local_only")
def _local_only(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    s1, is_prey = layout.size - 1, (~layout.is_predator).astype(np.float32)
    high = np.stack([np.full(layout.num_agents, s1), np.full(layout.num_agents, s1), is_prey], 1)
    return np.zeros_like(high), high


@register_observation_bounds("default")
def _default(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    n, s1 = layout.num_agents, layout.size - 1
    far = float(math.isqrt(2 * s1 * s1))  # int(euclid) of the diagonal
    is_prey = (~layout.is_predator).astype(np.float32)
    cols = _Columns(n)
    cols.add(0, np.stack([np.full(n, s1), np.full(n, s1), is_prey], 1))
    # per other agent (slot order): [int(euclid), captured]
    others = np.stack([np.full((n, n - 1), far), is_prey[_others(layout)]], -1)
    cols.add(0, others.reshape(n, -1))
    cols.add(0, far, width=layout.num_obstacles)
    return cols.result()


@register_observation_bounds("local_radius")
def _local_radius(
    layout: Layout, radius=3, include_agents=True, include_obstacles=True
) -> tuple[np.ndarray, np.ndarray]:
    n, s1 = layout.num_agents, layout.size - 1
    r = _agent_radii(layout, radius)
    reach, dist = np.minimum(r, s1), np.minimum(r, 2 * s1)  # per observer
    order = slot_order(layout)
    is_prey = (~layout.is_predator).astype(np.float32)
    cols = _Columns(n)
    cols.add(
        np.stack([np.zeros(n), np.zeros(n), r, np.zeros(n)], 1),
        np.stack([np.full(n, s1), np.full(n, s1), r, is_prey], 1),
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
            np.broadcast_to(is_prey[order], (n, n)),
            np.broadcast_to(is_prey[order], (n, n)),
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


def _entity(
    layout: Layout,
    *,
    relative: bool,
    include_agents: bool,
    include_obstacles: bool,
    include_walls: bool,
    distance_type: str,
) -> tuple[np.ndarray, np.ndarray]:
    n, s1 = layout.num_agents, layout.size - 1
    team, others = _team_features(layout), _others(layout)
    is_prey = (~layout.is_predator).astype(np.float32)
    far = _euclid_max(layout) if distance_type == "euclidean" else np.float32(2 * s1)
    lo_xy, hi_xy = (-s1, s1) if relative else (0, s1)
    cols = _Columns(n)
    own_xy = 0 if relative else s1
    cols.add(
        np.concatenate([np.zeros((n, 2)), team, np.zeros((n, 2))], 1),
        np.concatenate(
            [np.full((n, 2), own_xy), team, np.full((n, 1), layout.max_speed), is_prey[:, None]], 1
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
                is_prey[others][..., None],
            ],
            -1,
        )
        * include_agents
    )
    cols.add(low.reshape(n, -1), high.reshape(n, -1))
    k = layout.num_obstacles
    cols.add(
        np.tile(np.array([lo_xy, lo_xy, 0]) * include_obstacles, k),
        np.tile(np.array([hi_xy, hi_xy, far]) * include_obstacles, k),
        width=3 * k,
    )
    if relative:
        cols.add(0, s1 * include_walls, width=4)
    return cols.result()


@register_observation_bounds("absolute")
def _absolute(
    layout: Layout, include_agents=True, include_obstacles=True, distance_type="euclidean"
) -> tuple[np.ndarray, np.ndarray]:
    return _entity(
        layout,
        relative=False,
        include_agents=include_agents,
        include_obstacles=include_obstacles,
        include_walls=False,
        distance_type=distance_type,
    )


@register_observation_bounds("relative")
def _relative(
    layout: Layout,
    include_agents=True,
    include_obstacles=True,
    include_walls=False,
    distance_type="manhattan",
) -> tuple[np.ndarray, np.ndarray]:
    return _entity(
        layout,
        relative=True,
        include_agents=include_agents,
        include_obstacles=include_obstacles,
        include_walls=include_walls,
        distance_type=distance_type,
    )


@register_observation_bounds("grid")
def _grid(layout: Layout, radius=3) -> tuple[np.ndarray, np.ndarray]:
    """Channels [outside, obstacle, predators, free prey, captured prey] per window cell;
    without cell sharing at most one predator and one free prey share a cell."""
    r = _agent_radii(layout, radius)
    big = int(r.max())
    share = layout.allow_cell_sharing
    per_cell = np.array(
        [
            1 if big > 0 else 0,
            1 if layout.num_obstacles else 0,
            layout.n_predators if share else 1,
            layout.n_prey if share else 1,
            layout.n_prey,
        ],
        np.float32,
    )
    high = _grid_view(r)[..., None] * per_cell  # [A, w, w, C]
    high = high.reshape(layout.num_agents, -1)
    return np.zeros_like(high), high
