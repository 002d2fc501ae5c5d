"""Observations: the builder registry, the shipped builders and the global state."""

from ppage_jax.observations import builders  # noqa: F401  (registers the shipped builders)
from ppage_jax.observations.builders import GRID_CHANNELS, slot_order
from ppage_jax.observations.global_state import global_state, global_state_size
from ppage_jax.observations.registry import (
    ObservationBuilder,
    builder_params,
    make_observation,
    observation_builders,
    register_observation,
    validate_observations,
)

__all__ = [
    "GRID_CHANNELS",
    "ObservationBuilder",
    "builder_params",
    "global_state",
    "global_state_size",
    "make_observation",
    "observation_builders",
    "register_observation",
    "slot_order",
    "validate_observations",
]
