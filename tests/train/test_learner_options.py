"""The PPO learners' options for the reward study: the running return-scale normaliser, starts
staggered over the step limit, and fine-tuning from another run's trained policy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import MAX_STEPS, tiny_config

import ppage_jax as pj
from ppage_jax.train import algorithm, make_train_config
from ppage_jax.train.kit.return_scale import normalise, return_scale_init
from ppage_jax.train.kit.rollout import env_reset
from ppage_jax.train.run.checkpoint import save_checkpoint


def test_the_normaliser_divides_by_the_running_std_of_the_discounted_return():
    scale = return_scale_init((1, 2))
    ones = jnp.ones((1, 2), bool)
    never = jnp.zeros((1, 2), bool)
    scale, scaled = normalise(scale, jnp.array([[1.0, 0.0]]), ones, never, 0.5)
    # returns [1, 0]: batch mean 0.5, variance 0.25, merged with the prior (count 1e-4, var 1)
    var = (1e-4 + 0.25 * 2 + 0.25 * 1e-4 * 2 / 2.0001) / 2.0001
    assert float(scale.var) == pytest.approx(var, rel=1e-6)
    np.testing.assert_allclose(np.asarray(scaled), [[1 / np.sqrt(var), 0.0]], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(scale.returns), [[1.0, 0.0]])
    # discounting, an ended episode restarting its return, and an invalid entry left out
    ended = jnp.array([[True, False]])
    scale, _ = normalise(scale, jnp.array([[1.0, 3.0]]), jnp.array([[True, False]]), ended, 0.5)
    np.testing.assert_allclose(np.asarray(scale.returns), [[0.0, 3.0]])
    assert float(scale.count) == pytest.approx(3.0001)  # one valid entry more


def test_the_normalised_rewards_do_not_depend_on_the_reward_scale():
    rewards = jax.random.normal(jax.random.PRNGKey(0), (200, 4, 2))
    ones, never = jnp.ones((4, 2), bool), jnp.zeros((4, 2), bool)

    def run(factor):
        scale, out = return_scale_init((4, 2)), []
        for r in rewards:
            scale, scaled = normalise(scale, factor * r, ones, never, 0.99)
            out.append(scaled)
        return np.asarray(out)

    np.testing.assert_allclose(run(100.0)[50:], run(1.0)[50:], rtol=1e-3)


def test_ippo_with_the_normaliser_carries_it_and_learns_the_tiny_task():
    config = tiny_config(
        "ippo",
        {"normalize_rewards": True, "anneal_lr": False, "learning_rate": 2e-3},
        total_timesteps=16_384,
        **{"experiment.roles": {"predators": "learn", "preys": "noop"}},
    )
    tc = make_train_config(config)
    module = algorithm("ippo")
    runner, metrics = jax.jit(lambda k: module.train(k, tc, tc.env.default_params))(
        jax.random.PRNGKey(0)
    )
    assert set(runner.scales) == {"predator"}
    assert runner.scales["predator"].returns.shape == (tc.num_envs, 2)
    assert float(runner.scales["predator"].count) > tc.num_envs * 2 * tc.num_updates
    capture = np.asarray(metrics["capture_rate"])
    assert np.nanmean(capture[-8:]) > np.nanmean(capture[:8]) and np.nanmean(capture[-8:]) > 0.8


def test_staggered_starts_spread_the_first_turn_over_the_step_limit():
    config = tiny_config("ippo", {}, **{"experiment.num_envs": 64})
    plain = make_train_config(config)
    staggered = make_train_config(config.with_overrides({"experiment.stagger_starts": True}))
    params = plain.env.default_params
    key = jax.random.PRNGKey(3)
    assert np.asarray(env_reset(plain, key, params).state.turn).tolist() == [0] * 64
    turns = np.asarray(env_reset(staggered, key, params).state.turn)
    assert turns.min() >= 0 and turns.max() < MAX_STEPS and len(set(turns.tolist())) > 10
    # the same layouts: only the turn counters differ
    np.testing.assert_array_equal(
        np.asarray(env_reset(staggered, key, params).state.positions),
        np.asarray(env_reset(plain, key, params).state.positions),
    )


@pytest.fixture
def trained_run(tmp_path):
    """A run directory holding a config and a checkpoint of IPPO's (initial) policy."""
    config = tiny_config("ippo", {"hidden_layers": [8]})
    tc = make_train_config(config)
    module = algorithm("ippo")
    runner = module.init(jax.random.PRNGKey(9), tc, tc.env.default_params)
    policy = jax.tree.map(lambda a: a[None], module.policy_state(runner))
    save_checkpoint(tmp_path / "checkpoint.msgpack", tc, policy)
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    return tmp_path, module.policy_state(runner)


def test_a_run_starts_from_another_runs_policy(trained_run):
    run_dir, weights = trained_run
    config = tiny_config(
        "ippo",
        {"hidden_layers": [8]},
        **{"experiment.start_from": {"policy": str(run_dir)}, "rewards.shaping": []},
    )
    tc = make_train_config(config)
    assert tc.start.startswith(f"policy {run_dir} (seed 0, checkpoint ")
    runner = algorithm("ippo").init(jax.random.PRNGKey(0), tc, tc.env.default_params)
    for got, want in zip(
        jax.tree.leaves(runner.learners["predator"].params),
        jax.tree.leaves(weights["predator"]),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert int(runner.learners["predator"].step) == 0  # a fresh optimiser


@pytest.mark.parametrize(
    "setting, algo, key, message",
    [
        ({"policy": "nowhere"}, "ippo", "experiment.start_from.policy", "lacks"),
        ({"policy": "RUN"}, "dqn", "experiment.start_from", "supported by ['ippo', 'mappo']"),
        ({"policy": "RUN", "greedy": True}, "ippo", "experiment.start_from.greedy", "unknown"),
        ({"policy": "RUN", "seed": 3}, "ippo", "experiment.start_from.seed", "[0, 1)"),
    ],
)
def test_a_bad_start_is_one_line_naming_the_key(trained_run, setting, algo, key, message):
    run_dir, _ = trained_run
    setting = {k: str(run_dir) if v == "RUN" else v for k, v in setting.items()}
    params = {"hidden_layers": [8]} if algo == "ippo" else {}
    with pytest.raises(pj.ConfigError) as err:
        make_train_config(tiny_config(algo, params, **{"experiment.start_from": setting}))
    assert err.value.key == key and message in str(err.value)
    assert "\n" not in str(err.value)
