"""``local_only``: the observer's own position and captured flag."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.observations.registry import Bounds, ObservationBuilder, register_observation
from ppage_jax.observations.tables import as_f32, is_prey
from ppage_jax.state import EnvParams, Layout, State


@register_observation("local_only")
def local_only(layout: Layout) -> ObservationBuilder:
    """Own [x, y] and a captured flag: 3 features."""

    def build(state: State, params: EnvParams) -> jax.Array:
        return jnp.concatenate([as_f32(state.positions), as_f32(state.captured)[:, None]], axis=1)

    return ObservationBuilder("local_only", 3, build, bounds=functools.partial(_bounds, layout))


def _bounds(layout: Layout) -> Bounds:
    """x, y in [0, size-1]; the captured flag of a prey in [0, 1], of a predator 0."""
    n, s1 = layout.num_agents, layout.size - 1
    high = np.stack([np.full(n, s1), np.full(n, s1), is_prey(layout)], 1)
    return np.zeros_like(high), high
