"""Inputs that could never work are refused in one line: a reward term of the wrong shape
(where the composer calls it, at trace time), a capture threshold above the prey count, and
a budget smaller than one update is announced with the budget it plans."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.config import ConfigNotice
from ppage_jax.rewards.registry import register_potential, register_reward, unregister_reward
from ppage_jax.train import make_train_config

SMALL = {
    "env.size": 5,
    "env.obstacle_percentage": 0.0,
    "agents.predators.count": 2,
    "agents.preys.count": 1,
    "agents.preys.speed": 1,
}


@pytest.mark.parametrize(
    "kind, value, shape",
    [
        ("reward term", lambda ctx: jnp.float32(1.0), "()"),
        ("reward term", lambda ctx: jnp.zeros((3, 1), jnp.float32), "(3, 1)"),
        ("potential", lambda state: jnp.zeros(2, jnp.float32), "(2,)"),
    ],
)
def test_a_term_of_the_wrong_shape_is_named_at_trace_time(kind, value, shape):
    name = "misshapen_term"
    register = register_potential if kind == "potential" else register_reward
    register(name)(value)
    try:
        env = pj.make(None, {**SMALL, "rewards.shaping": [{"name": name, "weight": 1.0}]})
        _, state = env.reset(jax.random.PRNGKey(0))
        with pytest.raises(ValueError) as info:
            jax.jit(env.step)(None, state, jnp.full(3, 4, jnp.int32))
    finally:
        unregister_reward(name)
    assert str(info.value) == (
        f"{kind} {name!r} returned shape {shape}; a term must return float32[3] (one value "
        f"per agent, predators first); check it with ppage_jax.testing.check_reward_term"
    )


@pytest.mark.parametrize("threshold, prey", [(2, 1), (4, 3)])
def test_a_capture_threshold_above_the_prey_count_is_announced(threshold, prey):
    overrides = {
        **SMALL,
        "agents.preys.count": prey,
        "env.termination.capture_threshold": threshold,
    }
    with pytest.warns(ConfigNotice) as record:
        config = pj.load_config(None, overrides)
    assert config["env"]["termination"]["capture_threshold"] == threshold
    assert any(
        str(r.message)
        == f"env.termination.capture_threshold = {threshold} can never be reached: it counts "
        f"captured prey, each prey is captured at most once, and there are {prey} "
        f"(agents.preys.count); episodes end only at the step limit"
        for r in record
    )


def test_a_budget_below_one_update_is_announced_with_what_it_plans():
    with pytest.warns(ConfigNotice) as record:
        tc = make_train_config(pj.load_config("configs/default", {"experiment.num_envs": 10**5}))
    assert tc.num_updates == 1 and tc.env_steps_per_update == 3_200_000
    assert [str(w.message) for w in record] == [
        "experiment.total_timesteps = 3,000,000 is less than one update: the run plans 1 update "
        "of 100000 grids (experiment.num_envs) x 32 turns (num_steps) = 3,200,000 env steps "
        "per seed, 1.07x what was asked"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigNotice)  # a budget of whole updates: no notice
        fits = make_train_config(pj.load_config("configs/default", {"experiment.num_envs": 64}))
    assert np.isclose(fits.num_updates * fits.env_steps_per_update, 3_000_000, rtol=0.01)
