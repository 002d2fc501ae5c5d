"""``default``: PPAGE's default observation, whole-number Euclidean distances to every other
agent and obstacle."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.observations.registry import Bounds, ObservationBuilder, register_observation
from ppage_jax.observations.tables import BoundsColumns, as_f32, is_prey, other_agents
from ppage_jax.state import EnvParams, Layout, State


@register_observation("default")
def default(layout: Layout) -> ObservationBuilder:
    """PPAGE's default: [x, y, captured], then [int(euclid), captured] per other agent
    (slot order), then int(euclid) per obstacle: 3 + 2(N-1) + O features."""
    n, n_obs = layout.num_agents, layout.num_obstacles
    others = other_agents(layout)

    def build(state: State, params: EnvParams) -> jax.Array:
        pos = state.positions
        delta = pos[others] - pos[:, None, :]  # [A, A-1, 2]
        agents = jnp.stack(
            [as_f32(_floor_sqrt((delta * delta).sum(-1))), as_f32(state.captured)[others]],
            axis=-1,
        ).reshape(n, 2 * (n - 1))
        delta_o = state.obstacles[None, :, :] - pos[:, None, :]  # [A, O, 2]
        obstacles = as_f32(_floor_sqrt((delta_o * delta_o).sum(-1))).reshape(n, n_obs)
        return jnp.concatenate(
            [as_f32(pos), as_f32(state.captured)[:, None], agents, obstacles], axis=1
        )

    size = 3 + 2 * (n - 1) + n_obs
    return ObservationBuilder("default", size, build, bounds=functools.partial(_bounds, layout))


def _floor_sqrt(d2: jax.Array) -> jax.Array:
    """Exact int(sqrt(d2)) for non-negative int32 d2 (PPAGE's ``int(np.linalg.norm)``)."""
    s = jnp.floor(jnp.sqrt(d2.astype(jnp.float32))).astype(jnp.int32)
    s = s - (s * s > d2)
    return s + ((s + 1) * (s + 1) <= d2)


def _bounds(layout: Layout) -> Bounds:
    """Coordinates in [0, size-1], distances up to int(euclid) of the diagonal, captured
    flags in [0, 1] for prey and 0 for predators."""
    n, s1 = layout.num_agents, layout.size - 1
    far = float(math.isqrt(2 * s1 * s1))  # int(euclid) of the diagonal
    prey = is_prey(layout)
    cols = BoundsColumns(n)
    cols.add(0, np.stack([np.full(n, s1), np.full(n, s1), prey], 1))
    # per other agent (slot order): [int(euclid), captured]
    others = np.stack([np.full((n, n - 1), far), prey[other_agents(layout)]], -1)
    cols.add(0, others.reshape(n, -1))
    cols.add(0, far, width=layout.num_obstacles)
    return cols.result()
