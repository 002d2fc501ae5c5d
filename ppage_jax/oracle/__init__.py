"""The NumPy reference environment and observations, written independently of the JAX code.

The tests compare the JAX simulator against this oracle step by step; it never imports JAX.
"""

from ppage_jax.oracle.env import ReferenceGridWorld, RefState
from ppage_jax.oracle.observations import reference_global_state, reference_observation
from ppage_jax.oracle.translate import oracle_for

__all__ = [
    "RefState",
    "ReferenceGridWorld",
    "oracle_for",
    "reference_global_state",
    "reference_observation",
]
