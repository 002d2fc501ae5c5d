"""Where an episode starts: the layout generator of ``GridWorld.reset``, kept apart from the
dynamics (as Jumanji keeps a ``Generator`` apart from its env). It draws the agents' cells and
the obstacles at random, or reads them from the spec's text map and fixed starts."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.sampling import distinct_sample
from ppage_jax.state import Layout


def parse_map(rows: Sequence[str] | None) -> np.ndarray | None:
    """bool[H, W] ([y, x]) of a text map's rows, True on each ``'#'`` (an obstacle); None
    for no map."""
    if rows is None:
        return None
    return np.array([[c == "#" for c in row] for row in rows], dtype=bool)


class LayoutGenerator:
    """The start layout of an episode, ``generator(key) -> (positions int32[A, 2],
    obstacles int32[K, 2])`` as [x, y], for a :class:`~ppage_jax.state.Layout` and the
    spec's optional ``fixed_map`` (rows of ``'#'`` / ``'.'``: the obstacles) and
    ``fixed_starts`` (one ``(x, y)`` per agent, predators first):

    - neither: the agents on distinct uniform cells, then the obstacles uniformly on the
      remaining cells;
    - a map: its obstacles, the agents on distinct uniform free cells (or at the fixed
      starts);
    - fixed starts only: the agents there, the obstacles uniformly on the other cells.

    Pure, under ``jax.jit`` and ``jax.vmap`` (the key is ignored when nothing is drawn).
    """

    def __init__(
        self,
        layout: Layout,
        fixed_map: Sequence[str] | None = None,
        fixed_starts: Sequence[Sequence[int]] | None = None,
    ):
        self.layout = layout
        self.fixed_map = parse_map(fixed_map)
        self.fixed_starts = None if fixed_starts is None else np.asarray(fixed_starts, np.int32)

    def __call__(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        size, n_agents, n_obs = self.layout.size, self.layout.num_agents, self.layout.num_obstacles
        if self.fixed_map is not None:
            ys, xs = np.nonzero(self.fixed_map)
            obstacles = jnp.asarray(np.stack([xs, ys], axis=1).reshape(-1, 2), jnp.int32)
            if self.fixed_starts is not None:
                return jnp.asarray(self.fixed_starts), obstacles
            free = np.flatnonzero(~self.fixed_map.reshape(-1))
            cells = distinct_sample(key, jnp.asarray(free, jnp.int32), n_agents)
        elif self.fixed_starts is not None:
            taken = np.zeros(size * size, bool)
            taken[self.fixed_starts[:, 1] * size + self.fixed_starts[:, 0]] = True
            free = jnp.asarray(np.flatnonzero(~taken), jnp.int32)
            cells = distinct_sample(key, free, n_obs)
            obstacles = jnp.stack([cells % size, cells // size], axis=1)
            return jnp.asarray(self.fixed_starts), obstacles.astype(jnp.int32)
        else:
            cells = distinct_sample(key, size * size, n_agents + n_obs)
        xy = jnp.stack([cells % size, cells // size], axis=1).astype(jnp.int32)
        if self.fixed_map is not None:
            return xy, obstacles
        return xy[:n_agents], xy[n_agents:]
