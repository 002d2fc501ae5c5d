"""The global state for centralised critics: the same vector for every agent."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.state import Layout, State


def global_state_size(layout: Layout) -> int:
    """Length of :func:`global_state`: 4 per agent plus one per grid cell."""
    return 4 * layout.num_agents + layout.size * layout.size


def global_state(layout: Layout, state: State) -> jax.Array:
    """float32[4A + H*W], the same for every agent (for centralised critics).

    Per agent in row order (predators first): [x, y, is_predator, captured]; then the
    obstacle map row-major (index y * size + x).
    """
    agents = jnp.concatenate(
        [
            _as_f32(state.positions),
            _as_f32(jnp.asarray(layout.is_predator))[:, None],
            _as_f32(state.captured)[:, None],
        ],
        axis=1,
    )
    return jnp.concatenate([agents.reshape(-1), _as_f32(state.obstacle_map).reshape(-1)])


def _as_f32(x) -> jax.Array:
    return jnp.asarray(x, jnp.float32)
