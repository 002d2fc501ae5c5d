"""Traced training hyperparameters: new values run in the same compiled program and give
the run a config with those values gives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState
from train_testing import tiny_config, traced_train

from ppage_jax.config.experiment.algorithms import algorithm_params
from ppage_jax.config.experiment.base import check_value, traced_names
from ppage_jax.train import algorithm, make_train_config
from ppage_jax.train.kit import optim
from ppage_jax.train.kit.traced import bind, traced_values

PPO = {"num_steps": 4, "num_minibatches": 2, "update_epochs": 1, "hidden_layers": [16]}
SMALL = {"experiment.num_envs": 4}


def ppo_config(**params):
    return tiny_config("ippo", dict(PPO, **params), total_timesteps=4 * 4 * 3, **SMALL)


@pytest.fixture(scope="module")
def traced_ippo():
    """IPPO's train jitted once with its hyperparameters as an argument."""
    tc = make_train_config(ppo_config())
    return tc, traced_train(tc)


def test_each_algorithm_declares_its_traced_hyperparameters():
    assert traced_names(algorithm_params("ippo")) == (
        "gamma",
        "learning_rate",
        "reward_scale",
        "gae_lambda",
        "clip_eps",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "teacher_coef",
        "teacher_fraction",
        "prior_logit",
    )
    assert traced_names(algorithm_params("dqn")) == (
        "gamma",
        "epsilon",
        "epsilon_decay",
        "min_epsilon",
        "learning_rate",
        "reward_scale",
        "grad_clip",
    )
    assert traced_names(algorithm_params("iql")) == (
        "gamma",
        "epsilon",
        "epsilon_decay",
        "min_epsilon",
        "alpha",
    )
    assert "actor_learning_rate" in traced_names(algorithm_params("a2c"))
    assert "learning_rate" not in traced_names(algorithm_params("a2c"))  # a fallback only
    assert traced_names(algorithm_params("random")) == ()
    # A2C's step sizes resolve their fallback
    values = traced_values(make_train_config(tiny_config("a2c", {"learning_rate": 0.02})).hp)
    assert float(values["actor_learning_rate"]) == pytest.approx(0.02)


@pytest.mark.slow  # trains three times
def test_new_values_reuse_the_program_and_equal_a_run_configured_with_them(traced_ippo):
    tc, run = traced_ippo
    key = jax.random.PRNGKey(0)
    chosen = {"learning_rate": 0.01, "ent_coef": 0.0, "clip_eps": 0.1}
    default_values = traced_values(tc.hp)
    _, default = run(key, default_values)
    # the same names (the pytree structure), new values: no new trace
    _, traced = run(key, dict(default_values, **{k: jnp.float32(v) for k, v in chosen.items()}))
    static_tc = make_train_config(ppo_config(**chosen))
    _, static = jax.jit(algorithm("ippo").train, static_argnums=1)(
        key, static_tc, static_tc.env.default_params
    )
    for name, value in static["losses"].items():
        np.testing.assert_allclose(traced["losses"][name], value, rtol=1e-4, atol=1e-6)
        assert not np.allclose(default["losses"][name][1:], value[1:])  # the values matter
    np.testing.assert_array_equal(traced["episodes"], static["episodes"])


def test_unknown_or_static_names_are_refused_in_one_line(traced_ippo):
    tc, _ = traced_ippo
    with pytest.raises(ValueError) as err:
        bind(tc, {"hidden_layers": jnp.float32(3)})
    assert "['hidden_layers'] are not traced hyperparameters of ippo" in str(err.value)
    assert "'learning_rate'" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"must be scalars .* \{'ent_coef': \(3,\)\}$"):
        bind(tc, {"ent_coef": jnp.zeros(3)})
    assert bind(tc, {"ent_coef": 0}).hp.ent_coef.dtype == jnp.float32
    cls = algorithm_params("ippo")
    assert check_value(cls, "learning_rate", "3e-4", "ippo") == pytest.approx(3e-4)
    with pytest.raises(ValueError, match=r"^must be a number > 0$"):
        check_value(cls, "learning_rate", -1.0, "ippo")
    with pytest.raises(ValueError, match="is not a traced hyperparameter of ippo; traced: "):
        check_value(cls, "num_steps", 8, "ippo")


def test_refresh_sets_the_injected_optimiser_settings():
    params = {"w": jnp.zeros(3)}
    tx = optim.injected(optim.adam_clipped, learning_rate=0.1, max_norm=1.0)
    state = optim.refresh(
        TrainState.create(apply_fn=None, params=params, tx=tx), {"learning_rate": 0.5}
    )
    assert float(state.opt_state.hyperparams["learning_rate"]) == 0.5
    assert float(state.opt_state.hyperparams["max_norm"]) == 1.0
    grads = {"w": jnp.array([3.0, -4.0, 0.0])}
    new = state.apply_gradients(grads=grads)
    # Adam's first step moves every coordinate with a gradient by the step size
    np.testing.assert_allclose(new.params["w"], [-0.5, 0.5, 0.0], atol=1e-5)
    assert isinstance(tx, optax.GradientTransformation)
