"""Observations: the builder registry, the shipped builders and the global state.

Each shipped builder lives in its own module with everything it declares (its build, value
bounds and encoder slots); importing the package registers them.
"""

from ppage_jax.observations import (  # noqa: F401  (register the shipped builders)
    default,
    entity,
    local_only,
    local_radius,
)
from ppage_jax.observations.global_state import global_state, global_state_size
from ppage_jax.observations.grid import GRID_CHANNELS
from ppage_jax.observations.registry import (
    Bounds,
    ObservationBuilder,
    SlotGroup,
    Slots,
    builder_params,
    make_observation,
    observation_builders,
    register_observation,
    validate_observations,
)
from ppage_jax.observations.tables import slot_order

__all__ = [
    "GRID_CHANNELS",
    "Bounds",
    "ObservationBuilder",
    "SlotGroup",
    "Slots",
    "builder_params",
    "global_state",
    "global_state_size",
    "make_observation",
    "observation_builders",
    "register_observation",
    "slot_order",
    "validate_observations",
]
