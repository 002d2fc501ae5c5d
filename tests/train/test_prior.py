"""Residual prior (``prior``): the PPO actor's logits add ``prior_logit`` to a baseline's
action, in training and when acting (the policy then reads the state)."""

from __future__ import annotations

import dataclasses
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import tiny_config, traced_train

from ppage_jax import policies
from ppage_jax.config import ConfigError
from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import ippo as ppo
from ppage_jax.train.algorithms import mappo
from ppage_jax.train.kit import pg
from ppage_jax.train.protocol import acting, acting_one
from ppage_jax.train.run.evaluate import evaluate_episodes

PARAMS = {"num_steps": 16, "update_epochs": 1, "num_minibatches": 2, "prior": "greedy"}
CHASE_MOVES = {0, 1}  # from (0, 0) and (1, 0) towards the prey at (3, 4): +x or +y


def test_the_prior_adds_its_logit_on_the_baselines_action():
    hp = make_train_config(tiny_config("mappo", dict(PARAMS, prior_logit=2.5))).hp
    logits = jnp.array([[0.5, 0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    got = ppo.actor_logits(hp, logits, jnp.array([4, 1]))
    np.testing.assert_allclose(got, [[0.5, 0, 0, 0, 1.5], [0, 2.5, 0, 0, 0]])
    assert ppo.actor_logits(hp, logits, None) is logits


def test_an_unknown_prior_is_refused_in_one_line():
    allowed = r"prior = 'oracle': must be a string one of \['greedy', 'intercept'\] \(or null\)"
    with pytest.raises(ConfigError, match=allowed):
        tiny_config("ippo", {"prior": "oracle"})


@pytest.mark.slow  # rollouts of both guides
def test_the_intercept_guide_is_the_intercept_chase_and_greedy_evade():
    """``intercept`` (teacher or prior) gives predators the intercept chase's actions and
    prey greedy evade's, each role from its own key stream (both roles learn here)."""
    tc = make_train_config(
        tiny_config("ippo", {"teacher": "intercept"}, **{"agents.preys.stamina": None})
    )
    env = tc.env
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.PRNGKey(3), 16), env.default_params
    )
    key = jax.random.PRNGKey(9)
    got = ppo.guide_actions(tc, "intercept", key, obs, state, env.default_params)
    for i, (role, policy) in enumerate(
        [("predator", policies.intercept_chase(env)), ("prey", policies.greedy_evade(env))]
    ):
        keys = jax.random.split(jax.random.fold_in(key, i), 16)
        expected = jax.vmap(policy)(keys, obs, state)[:, tc.agents_of(role)]
        np.testing.assert_array_equal(np.asarray(got[role]), np.asarray(expected))
    assert set(np.asarray(got["predator"]).ravel().tolist()) <= {0, 1}  # towards the prey


def with_prior_logit(tc, prior_logit: float):
    """``tc`` acting with another prior_logit (training binds it as a traced value)."""
    return dataclasses.replace(tc, hp=dataclasses.replace(tc.hp, prior_logit=prior_logit))


@pytest.fixture(scope="module")
def residual():
    """MAPPO with the greedy prior on the tiny task, jitted once with its traced
    hyperparameters as an argument: (tc, run(prior_logit) -> (runner, metrics))."""
    tc = make_train_config(tiny_config("mappo", PARAMS, total_timesteps=16 * 16 * 4))
    run = traced_train(tc)
    return tc, lambda prior_logit: run.with_values(prior_logit=prior_logit)


@pytest.fixture(scope="module")
def trained(residual):
    """The runner trained with prior_logit 3 (the default)."""
    _, run = residual
    return run(3.0)[0]


@pytest.mark.slow  # a learning run
def test_a_strong_prior_plays_the_baselines_moves_and_needs_the_state(residual, trained):
    """Acting with prior_logit 30, every sampled predator move is a chase move; with 0, the
    barely trained network alone also picks -x, -y or the no-op."""
    tc, _ = residual
    env = tc.env
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.PRNGKey(3), 64), env.default_params
    )
    policy = mappo.policy_state(trained)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    for prior_logit in (30.0, 0.0):
        acting_tc = with_prior_logit(tc, prior_logit)
        sample = jax.vmap(lambda k, t=acting_tc: mappo.sample_actions(t, policy, k, obs, state))
        moves = set(np.asarray(jax.jit(sample)(keys))[..., :2].ravel().tolist())
        assert moves == CHASE_MOVES if prior_logit else moves == {0, 1, 2, 3, 4}
    with pytest.raises(ValueError, match="prior: greedy reads the state"):
        mappo.greedy_actions(tc, policy, jax.random.PRNGKey(0), obs)


@pytest.mark.slow  # a rollout and an update
def test_the_loss_recomputes_the_rollouts_log_probs_with_the_stored_prior(residual, trained):
    tc, _ = residual
    runner = trained
    _, trajectories, _ = jax.jit(mappo.rollout, static_argnums=1)(runner, tc, tc.env.default_params)
    traj = trajectories["predator"]
    prior = np.asarray(traj.prior_action)
    assert prior.shape == (16, 16, 2)
    start = np.asarray(traj.x)[0, :, :, :2]  # scaled own x, y
    at_start = np.all(start * tc.env.layout.size == [[0, 0], [1, 0]], axis=(1, 2))
    assert at_start.any()
    assert set(np.unique(prior[0][at_start])) <= CHASE_MOVES
    learner = runner.learners["predator"]
    logits, _ = learner.apply_fn(learner.params, traj.x, traj.critic_x, prior=traj.prior_action)
    log_prob, _ = pg.log_prob_entropy(
        ppo.actor_logits(tc.hp, logits, traj.prior_action), traj.action
    )
    np.testing.assert_allclose(log_prob, traj.log_prob, atol=1e-5)
    without, _ = pg.log_prob_entropy(logits, traj.action)
    assert np.abs(np.asarray(without) - np.asarray(traj.log_prob)).max() > 0.5
    # the actor's first layer also reads the prior's action, one-hot (5 actions; the tiny
    # task's observation goes to the MLP as it is)
    assert learner.params["params"]["actor_0"]["kernel"].shape[0] == traj.x.shape[-1] + 5
    unseen, _ = learner.apply_fn(learner.params, traj.x, traj.critic_x)  # zeros for the prior
    assert np.abs(np.asarray(unseen) - np.asarray(logits)).max() > 1e-3


@pytest.mark.slow  # a run and its evaluation
def test_evaluation_gives_the_state_to_a_policy_with_a_prior(residual):
    """evaluate_episodes plays a prior policy (through :func:`acting`); trained and acting
    with prior_logit 30 (a new traced value: no new trace), its predators catch the still
    prey as fast as the chase does."""
    tc, run = residual
    acting_tc = with_prior_logit(tc, 30.0)
    runner, _ = run(30.0)
    policies = jax.tree.map(lambda a: a[None], mappo.policy_state(runner))
    which = {"trained": ("sampled", "trained"), "chase": ("chase", "trained")}
    played = evaluate_episodes(acting_tc, policies, tc.env.default_params, 7, 8, None, which)
    lengths = {name: np.asarray(out["episode_length"]).ravel() for name, out in played.items()}
    np.testing.assert_array_equal(lengths["trained"], lengths["chase"])
    assert (lengths["chase"] == 6).all()  # (1, 0) -> (3, 4): six single-cell moves


def test_acting_passes_the_state_only_to_modules_that_declare_reading_it():
    def greedy(tc, policy, key, obs, state="absent"):
        return state

    reads = types.SimpleNamespace(READS_STATE=True, greedy_actions=greedy)
    plain = types.SimpleNamespace(STOCHASTIC=True, greedy_actions=greedy, sample_actions=greedy)
    assert acting(reads, True)(None, None, None, None, "state") == "state"
    assert acting(plain, False)(None, None, None, None, "state") == "absent"
    # one grid: obs [A, F] and the state gain a grid axis, the actions lose it again
    shifted = types.SimpleNamespace(
        READS_STATE=True, greedy_actions=lambda tc, p, k, obs, state: obs[..., 0] + state[:, None]
    )
    got = acting_one(shifted, True)(None, None, None, jnp.array([[1.7], [2.2]]), jnp.array(3))
    assert got.dtype == jnp.int32 and got.tolist() == [4, 5]
