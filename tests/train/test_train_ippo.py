"""IPPO: learns the tiny task, vmaps over seeds exactly, masks captured prey, checkpoints."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import (
    ACTOR_CRITIC_LOSSES,
    assert_learned,
    assert_matches_separate_run,
    loss_names,
    tiny_config,
    train_seeds,
)

from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import ippo
from ppage_jax.train.run.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

PARAMS = {"num_steps": 16, "learning_rate": 3e-3}


@pytest.fixture(scope="module")
def tc():
    return make_train_config(tiny_config("ippo", PARAMS))


@pytest.fixture(scope="module")
def trained(tc):
    return train_seeds(tc)


@pytest.mark.slow  # a learning run
def test_ippo_learns_the_tiny_task_with_finite_losses(tc, trained):
    runner, metrics = trained
    assert metrics["capture_rate"].shape == (2, tc.num_updates)
    assert metrics["returns"].shape == (2, tc.num_updates, 2, len(tc.env.reward_terms))
    assert_learned(tc, ippo.policy_state(runner), metrics, loss_names(ACTOR_CRITIC_LOSSES))
    assert int(runner.progress.env_steps[0]) == tc.num_updates * tc.env_steps_per_update


@pytest.mark.slow  # trains each seed again separately
def test_vmap_over_seeds_equals_separate_runs(tc, trained):
    """Seed 1 of the vmapped run equals a separate run of seed 1. The two programs batch
    their matrix products differently, so float rounding differs in the last bits, and once a
    sampled action flips the runs part; the first updates must agree to float tolerance."""
    _, metrics = trained
    assert_matches_separate_run(tc, metrics, first=12)
    first = slice(0, 12)
    assert not np.allclose(
        metrics["episode_length"][0, first], metrics["episode_length"][1, first], equal_nan=True
    )


@pytest.fixture(scope="module")
def masked_rollout(tc, trained):
    """A rollout of the trained seed-0 policy with capture_threshold 2 (> 1 prey, a traced
    param): the prey is caught on turn 6 and the episode goes on until turn 20."""
    runner = jax.tree.map(lambda a: a[0], trained[0])
    params = tc.env.default_params.replace(capture_threshold=jnp.int32(2))
    runner, trajectories, _ = jax.jit(ippo.rollout)(runner, tc, params)
    return tc, runner, trajectories


@pytest.mark.slow  # two updates on masked rollouts
def test_captured_prey_transitions_do_not_change_the_update(masked_rollout):
    tc, runner, trajectories = masked_rollout
    prey = trajectories["prey"]
    invalid = ~prey.valid
    assert 0 < int(invalid.sum()) < invalid.size  # some prey were caught mid-rollout
    garbage = jax.tree.map(
        lambda a: jnp.where(
            invalid.reshape(invalid.shape + (1,) * (a.ndim - invalid.ndim)),
            (a * 7 + 1e3).astype(a.dtype) if a.dtype != bool else ~a,
            a,
        ),
        prey,
    )
    garbage = garbage.replace(valid=prey.valid)
    learn = jax.jit(ippo.learn, static_argnums=2)
    key = jax.random.PRNGKey(0)
    clean, _ = learn(runner.learners["prey"], prey, tc.hp, key)
    dirty, _ = learn(runner.learners["prey"], garbage, tc.hp, key)
    jax.tree.map(np.testing.assert_array_equal, clean.params, dirty.params)


@pytest.mark.slow  # two updates on masked rollouts
def test_a_fully_masked_role_gets_a_zero_gradient(masked_rollout):
    """With every prey transition masked (all caught), the PPO gradient is exactly zero."""
    tc, runner, trajectories = masked_rollout
    prey = trajectories["prey"]
    nothing_valid = prey.replace(valid=jnp.zeros_like(prey.valid))
    learner = runner.learners["prey"]
    advantages, targets = ippo.gae(nothing_valid, tc.hp.gamma, tc.hp.gae_lambda)
    grads = jax.jit(
        jax.grad(
            lambda p: ippo.ppo_loss(p, learner.apply_fn, tc.hp, nothing_valid, advantages, targets)[
                0
            ]
        )
    )(learner.params)
    for leaf in jax.tree.leaves(grads):
        np.testing.assert_array_equal(leaf, np.zeros_like(leaf))


def test_checkpoint_round_trip_gives_identical_greedy_actions(tc, trained, tmp_path):
    runner, _ = trained
    policies = ippo.policy_state(runner)
    path = tmp_path / "checkpoint.msgpack"
    save_checkpoint(path, tc, policies)
    loaded = load_checkpoint(path, tc)
    obs = jnp.asarray(np.random.RandomState(0).randint(0, 5, (64, 3, 3)), jnp.float32)
    act = jax.vmap(lambda p: ippo.greedy_actions(tc, p, jax.random.PRNGKey(0), obs))
    np.testing.assert_array_equal(act(policies), act(loaded))
    jax.tree.map(np.testing.assert_array_equal, policies, loaded)


def test_loading_into_another_shape_fails_clearly(tc, trained, tmp_path):
    runner, _ = trained
    path = tmp_path / "checkpoint.msgpack"
    save_checkpoint(path, tc, ippo.policy_state(runner))
    other = make_train_config(
        tiny_config(
            "ippo",
            PARAMS,
            **{
                "agents.predators": {"count": 3, "speed": 1, "stamina": None},
                "env.starts": [[0, 0], [1, 0], [2, 0], [3, 4]],
            },
        )
    )
    with pytest.raises(CheckpointError, match=r"shape \(2, 5, 64\).*needs \(2, 6, 64\)"):
        load_checkpoint(path, other)
    wrong_algorithm = make_train_config(tiny_config("dqn"))
    with pytest.raises(CheckpointError, match="holds algorithm 'ippo'.*asks for 'dqn'"):
        load_checkpoint(path, wrong_algorithm)
