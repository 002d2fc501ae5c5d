"""The contract every registered observation builder must meet, checked builder by builder
through the user-facing kit ``ppage_jax.testing.check_observation_builder``: float32
[A, size] for every agent (captured ones included), size == prod(shape) for spatial
builders, finite, deterministic, the same under jit and vmap as eagerly, inputs untouched.
"""

from __future__ import annotations

import numpy as np
import pytest

from ppage_jax.observations import observation_builders
from ppage_jax.testing import OBSERVATION_RULES, check_observation_builder, default_env

# Feature counts on the kit's default env: 4 agents (2 predators, 2 prey), 3 obstacles.
SIZES = {
    "absolute": 37,
    "default": 12,
    "grid": 245,
    "local_only": 3,
    "local_radius": 40,
    "relative": 41,
}
PER_ROLE = [
    ("grid", {"radius": 1}, {"prey": {"radius": 2}}, 5 * 5 * 5),
    ("local_radius", {"radius": 2}, {"predator": {"radius": 4}}, 40),
]


@pytest.mark.parametrize("name", observation_builders())
def test_builder_contract_with_defaults(name):
    if name not in observation_builders():
        pytest.skip(f"{name} was unregistered by another test")
    checked = check_observation_builder(name)
    assert checked.rules == OBSERVATION_RULES
    if name in SIZES:
        assert checked.values.shape == (8, 4, SIZES[name])
        assert checked.values_without_prey.shape == (8, 4, SIZES[name])


@pytest.mark.parametrize("name,params,per_agent,size", PER_ROLE, ids=[c[0] for c in PER_ROLE])
def test_builder_contract_per_role(name, params, per_agent, size):
    checked = check_observation_builder(name, params=params, per_agent=per_agent, samples=4)
    assert checked.values.shape == (4, 4, size)
    prey_rows = ~default_env().is_predator
    assert np.asarray(checked.samples.state.captured)[:, prey_rows].any()  # captured observers
