"""The real value bounds of an environment's observation and of its global state, for the
adapters' ``Box`` spaces (NumPy, no JAX backend).

An observation's bounds are those its builder declares (``ObservationBuilder.bounds``, per
observer); the space shared by all agents is their union, and a builder that declares none
gets an unbounded space. The global state's bounds follow from the layout.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ppage_jax.observations import Bounds, ObservationBuilder
from ppage_jax.state import Layout


class HasObservation(Protocol):
    """What :func:`observation_bounds` reads: a ``GridWorld``, or the adapters' static facts
    of one (its observation builder and layout)."""

    @property
    def observation(self) -> ObservationBuilder: ...

    @property
    def layout(self) -> Layout: ...


def observation_bounds(env: HasObservation) -> Bounds:
    """(low, high) float32[observation size] of ``env.observation``: the union over agents
    of the bounds its builder declares (unbounded when it declares none)."""
    observation, n = env.observation, env.layout.num_agents
    size = observation.size
    if observation.bounds is None:
        return (np.full(size, -np.inf, np.float32), np.full(size, np.inf, np.float32))
    low, high = observation.bounds()
    low = np.broadcast_to(np.asarray(low, np.float32), (n, size))
    high = np.broadcast_to(np.asarray(high, np.float32), (n, size))
    return _non_degenerate(low.min(axis=0), high.max(axis=0))


def global_state_bounds(layout: Layout) -> Bounds:
    """(low, high) of ``GridWorld.global_state``: [x, y, is_predator, captured] per agent,
    then the obstacle map (flags in [0, 1])."""
    agent = np.array([layout.size - 1, layout.size - 1, 1, 1], np.float32)
    high = np.concatenate(
        [np.tile(agent, layout.num_agents), np.ones(layout.size * layout.size, np.float32)]
    )
    return _non_degenerate(np.zeros_like(high), high)


def _non_degenerate(low: np.ndarray, high: np.ndarray) -> Bounds:
    """Widen each constant feature (low == high: an own radius, a disabled block's zeros) to
    reach 0, and a constant 0 to [0, 1], so that scalers dividing by high - low stay finite."""
    same = low == high
    return (
        np.where(same, np.minimum(low, 0), low).astype(np.float32),
        np.where(same, np.where(high == 0, 1, np.maximum(high, 0)), high).astype(np.float32),
    )
