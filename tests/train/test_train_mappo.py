"""MAPPO: learns the tiny task, its critic reads the global state, vmaps over seeds exactly."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from train_testing import (
    MAX_STEPS,
    OPTIMAL_STEPS,
    greedy_lengths,
    tiny_config,
    train_seeds,
    untrained_policies,
)

from ppage_jax.train import make_train_config, mappo, networks

PARAMS = {"num_steps": 16, "learning_rate": 3e-3}


@pytest.fixture(scope="module")
def tc():
    return make_train_config(tiny_config("mappo", PARAMS, total_timesteps=12_000))


@pytest.fixture(scope="module")
def trained(tc):
    return train_seeds(tc)


def test_mappo_learns_the_tiny_task_with_finite_losses(tc, trained):
    runner, metrics = trained
    assert set(metrics["losses"]) == {
        f"{loss}/{role}"
        for loss in ("actor_loss", "value_loss", "entropy")
        for role in ("predator", "prey")
    }
    for name, values in metrics["losses"].items():
        assert np.isfinite(np.asarray(values)).all(), name
    before_len, before_cap = greedy_lengths(tc, untrained_policies(tc))
    after_len, after_cap = greedy_lengths(tc, mappo.policy_state(runner))
    np.testing.assert_array_equal(before_cap, [0.0, 0.0])  # untrained: never within 20
    np.testing.assert_array_equal(before_len, [MAX_STEPS, MAX_STEPS])
    np.testing.assert_array_equal(after_cap, [1.0, 1.0])  # trained: shortest path
    np.testing.assert_array_equal(after_len, [OPTIMAL_STEPS, OPTIMAL_STEPS])


def test_the_critic_reads_the_global_state_and_the_actor_its_observation(tc, trained):
    runner, _ = trained
    params = mappo.policy_state(runner)["predator"]["params"]
    # actor: local_only (3 features) + 2 agent ids; critic: 4 per agent + 5x5 cells + 2 ids
    assert params["actor_0"]["kernel"].shape == (2, 3 + 2, 64)
    assert params["critic_0"]["kernel"].shape == (2, 4 * 3 + 25 + 2, 64)

    @jax.jit
    def critic_inputs(keys):
        _, state = jax.vmap(tc.env.reset, in_axes=(0, None))(keys, tc.env.default_params)
        return [networks.critic_input(tc, role, state) for role in ("predator", "prey")]

    predator, prey = critic_inputs(jax.random.split(jax.random.PRNGKey(5), 3))
    first = np.asarray(predator)[0]  # grid 0: [2, 39]
    # [x, y, is_predator, captured] per agent, coordinates / size, from the fixed start
    np.testing.assert_allclose(
        first[:, :12], np.tile([0, 0, 1, 0, 0.2, 0, 1, 0, 0.6, 0.8, 0, 0], (2, 1)), atol=1e-7
    )
    np.testing.assert_array_equal(first[:, 12:37], 0.0)  # no obstacles
    np.testing.assert_array_equal(first[:, 37:], np.eye(2))  # agent ids
    assert prey.shape == (3, 1, 4 * 3 + 25 + 1)


def test_vmap_over_seeds_equals_separate_runs(tc, trained):
    """As for IPPO: the first updates agree to float tolerance (batched matrix products round
    differently, and once a sampled action flips the runs part)."""
    _, metrics = trained
    _, single = jax.jit(mappo.train)(jax.random.PRNGKey(1), tc, tc.env.default_params)
    first = slice(0, 12)
    for key in ("capture_rate", "episode_length", "episodes", "returns"):
        np.testing.assert_allclose(single[key][first], metrics[key][1, first], rtol=1e-5)
    for name, values in single["losses"].items():
        np.testing.assert_allclose(
            values[first], metrics["losses"][name][1, first], rtol=1e-3, atol=1e-6
        )
    assert not np.allclose(
        metrics["episode_length"][0, first], metrics["episode_length"][1, first], equal_nan=True
    )
