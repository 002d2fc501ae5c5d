"""Static tables the shipped builders share, read from the layout with NumPy: PPAGE's slot
order, each observer's other agents, team features and view radii, and the assembler of
per-feature bounds."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.observations.registry import Bounds
from ppage_jax.state import Layout


def slot_order(layout: Layout) -> np.ndarray:
    """Agent rows in PPAGE's slot order: names sorted as strings (predator_10 < predator_2)."""
    names = layout.agent_names
    return np.array(sorted(range(len(names)), key=names.__getitem__), dtype=np.int32)


def other_agents(layout: Layout) -> np.ndarray:
    """int[A, A-1]: for each observer, the other agents' rows in slot order."""
    n, order = layout.num_agents, slot_order(layout)
    table = np.broadcast_to(order, (n, n))
    return table[table != np.arange(n)[:, None]].reshape(n, n - 1)


def team_features(layout: Layout) -> np.ndarray:
    """float32[A, 3]: PPAGE's (type_id, team_base, team_idx); team = name = role_k -> (type, k)."""
    type_id = (~layout.is_predator).astype(np.float32)
    index = np.concatenate(
        [np.arange(1, layout.n_predators + 1), np.arange(1, layout.n_prey + 1)]
    ).astype(np.float32)
    return np.stack([type_id, type_id, index], axis=1)


def is_prey(layout: Layout) -> np.ndarray:
    """float32[A]: 1 for a prey (the largest value of its captured flag), 0 for a predator."""
    return (~layout.is_predator).astype(np.float32)


def agent_radii(layout: Layout, radius: int | Sequence[int]) -> np.ndarray:
    """int32[A]: one radius per agent (an int, or one per agent from per_agent)."""
    radii = np.broadcast_to(np.asarray(radius, np.int32), (layout.num_agents,))
    if (radii < 0).any():
        raise ValueError(f"radius must be >= 0, got {radius!r}")
    return radii.copy()


def as_f32(x) -> jax.Array:
    """``x`` as a float32 array."""
    return jnp.asarray(x, jnp.float32)


class BoundsColumns:
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

    def result(self) -> Bounds:
        """(low, high), each float32[A, features]."""
        return np.concatenate(self.lows, axis=1), np.concatenate(self.highs, axis=1)
