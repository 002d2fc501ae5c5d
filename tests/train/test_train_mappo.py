"""MAPPO: learns the tiny task, its critic reads the global state, vmaps over seeds exactly."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from train_testing import (
    ACTOR_CRITIC_LOSSES,
    assert_learned,
    assert_matches_separate_run,
    assert_seeds_kept_apart,
    loss_names,
    tiny_config,
    train_seeds,
)

from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import mappo
from ppage_jax.train.kit import networks

PARAMS = {"num_steps": 16, "learning_rate": 3e-3}


@pytest.fixture(scope="module")
def tc():
    return make_train_config(tiny_config("mappo", PARAMS, total_timesteps=12_000))


@pytest.fixture(scope="module")
def trained(tc):
    return train_seeds(tc)


@pytest.mark.slow  # a learning run
def test_mappo_learns_the_tiny_task_with_finite_losses(tc, trained):
    runner, metrics = trained
    assert_learned(tc, mappo.policy_state(runner), metrics, loss_names(ACTOR_CRITIC_LOSSES))


@pytest.mark.slow  # a learning run
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


@pytest.mark.slow  # a learning run
def test_vmap_keeps_the_seeds_apart(tc, trained):
    assert_seeds_kept_apart(tc, trained[1])


@pytest.mark.slow
def test_vmap_over_seeds_equals_separate_runs(tc, trained):
    assert_matches_separate_run(tc, trained[1], first=12)
