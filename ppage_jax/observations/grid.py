"""``grid``: the egocentric window of cells around the observer, one channel per kind of
thing in a cell (a spatial observation)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.observations.registry import (
    RADIUS,
    Bounds,
    ObservationBuilder,
    register_observation,
)
from ppage_jax.observations.tables import agent_radii, as_f32
from ppage_jax.state import EnvParams, Layout, State

GRID_CHANNELS = ("outside", "obstacle", "predators", "free_prey", "captured_prey")
# The grid builder counts agents through a count map when cells <= this x agent pairs, else
# pair by pair (measured on CPU: equal cost at about 2.4 cells per pair).
MAP_CELLS_PER_PAIR = 2


@register_observation("grid", checks={"radius": RADIUS}, per_role=("radius",), reads_as="spatial")
def grid(layout: Layout, radius: int | Sequence[int] = 3) -> ObservationBuilder:
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
    radii = agent_radii(layout, radius)
    big = int(radii.max())
    width = 2 * big + 1
    du, dv = np.mgrid[-big : big + 1, -big : big + 1]  # [w, w] offsets
    in_view = _view_mask(radii).astype(np.float32)
    by_map = size * size <= MAP_CELLS_PER_PAIR * n * n

    def build(state: State, params: EnvParams) -> jax.Array:
        pos = state.positions
        cx, cy = pos[:, 0, None, None] + dv, pos[:, 1, None, None] + du  # [A, w, w]
        inside = (cx >= 0) & (cx < size) & (cy >= 0) & (cy < size)
        cells = (jnp.clip(cy, 0, size - 1), jnp.clip(cx, 0, size - 1))
        is_predator = jnp.asarray(layout.is_predator)
        kinds = as_f32(
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
            [
                as_f32(~inside)[..., None],
                as_f32(inside & state.obstacle_map[cells])[..., None],
                counts,
            ],
            axis=-1,
        )  # [A, w, w, C]
        if (radii != big).any():
            window = window * jnp.asarray(in_view)[..., None]
        return window.reshape(n, -1)

    shape = (width, width, len(GRID_CHANNELS))
    bounds = functools.partial(_bounds, layout, radii)
    return ObservationBuilder("grid", int(np.prod(shape)), build, shape, bounds=bounds)


def _view_mask(radii: np.ndarray) -> np.ndarray:
    """bool[A, w, w]: the cells of the largest window (w = 2 max(R) + 1) within each agent's
    own radius (Chebyshev)."""
    big = int(radii.max())
    ring = np.maximum(*np.abs(np.mgrid[-big : big + 1, -big : big + 1]))  # [w, w]
    return ring[None] <= radii[:, None, None]


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


def _bounds(layout: Layout, radii: np.ndarray) -> Bounds:
    """Flags in [0, 1] and counts up to the role's agents per cell within each observer's
    view; without cell sharing at most one predator and one free prey share a cell."""
    big = int(radii.max())
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
    high = _view_mask(radii)[..., None] * per_cell  # [A, w, w, C]
    high = high.reshape(layout.num_agents, -1)
    return np.zeros_like(high), high
