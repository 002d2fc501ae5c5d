"""A reward term that comes out NaN or infinite is refused by the eager step, in one line
naming the term, the agent, the value and the turn; jitted steps are not checked."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.rewards.registry import register_potential, register_reward, unregister_reward

# 5x5, no obstacles, predator_1 at [0, 0], predator_2 at [4, 4], prey_1 at [2, 2].
SMALL = {
    "env.size": 5,
    "env.obstacle_percentage": 0.0,
    "agents.predators.count": 2,
    "agents.preys.count": 1,
    "agents.preys.speed": 1,
    "env.starts": [[0, 0], [4, 4], [2, 2]],
}
NOOP = np.full(3, 4, np.int32)


def env_with(name: str, fn, *, potential: bool = False, weight: float = 1.0) -> pj.GridWorld:
    (register_potential if potential else register_reward)(name)(fn)
    try:
        return pj.make(None, {**SMALL, "rewards.shaping": [{"name": name, "weight": weight}]})
    finally:
        unregister_reward(name)  # the built env keeps its composer's functions


def prey_only(value: float):
    """A term paying ``value`` to the prey row (2) and 0 to the predators."""
    return lambda ctx: jnp.where(ctx.is_predator, 0.0, value).astype(jnp.float32)


def test_a_nan_term_is_named_by_the_eager_step_and_passes_under_jit():
    env = env_with("nan_term", prey_only(float("nan")))
    _, state = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError) as info:
        env.step(None, state, NOOP)
    assert str(info.value) == (
        "step: reward term 'nan_term' is not finite for prey_1 on the step from turn 0: nan "
        "(weight 1.0 x nan per unit weight); a term must return finite float32 values (check "
        "it with ppage_jax.testing.check_reward_term)"
    )
    reward = jax.jit(env.step)(None, state, NOOP)[2]  # no host sync inside jit
    assert np.isnan(np.asarray(reward)).tolist() == [False, False, True]


def test_a_finite_term_whose_weight_overflows_float32_is_named():
    env = env_with("big_term", prey_only(1e30), weight=1e30)
    _, state = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError) as info:
        env.step(None, state, NOOP)
    assert str(info.value).startswith(
        "step: reward term 'big_term' is not finite for prey_1 on the step from turn 0: inf "
        "(weight 1.0000000150474662e+30 x 1.0000000150474662e+30 per unit weight)"
    )


def test_an_infinite_potential_is_named_and_finite_terms_pass():
    env = env_with(
        "inf_potential",
        lambda state: jnp.where(state.positions[:, 0] == 4, jnp.inf, 0.0),
        potential=True,
    )
    _, state = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError) as info:
        env.step(None, state, NOOP)  # predator_2 at x = 4: gamma * inf - inf is nan
    assert str(info.value).startswith(
        "step: potential 'inf_potential' is not finite for predator_2 on the step from turn 0: "
        "nan (weight 1.0 x nan per unit weight)"
    )
    finite = pj.make(None, SMALL)
    _, state = finite.reset(jax.random.PRNGKey(0))
    assert int(finite.step(None, state, NOOP)[1].turn) == 1
