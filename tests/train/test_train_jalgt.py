"""JAL-GT: the batched correlated-equilibrium solver on PPAGE's verification games and on
random games, and the learner on the tiny task (one predator against the immobile prey, so
the joint game has 5 x 5 joint actions)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import (
    assert_learned,
    assert_matches_separate_run,
    assert_seeds_kept_apart,
    loss_names,
    tiny_config,
    train_seeds,
)

import ppage_jax as pj
from ppage_jax.config import ConfigError
from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import jalgt

# Joint actions (row-major, agent 0 most significant): 0 = (C, C), 1 = (C, D), 2 = (D, C),
# 3 = (D, D). Prisoner's Dilemma: C cooperate, D defect. Chicken: C chicken, D dare.
PRISONERS_DILEMMA = [[3.0, 0.0, 5.0, 1.0], [3.0, 5.0, 0.0, 1.0]]
CHICKEN = [[6.0, 2.0, 7.0, 0.0], [6.0, 7.0, 2.0, 0.0]]
ONE_PREDATOR = {
    "agents.predators": {"count": 1, "speed": 1, "stamina": None},
    "env.starts": [[0, 0], [3, 4]],
}
OPTIMAL_STEPS_ONE_PREDATOR = 7  # (0, 0) -> (3, 4)
PARAMS = {"epsilon_decay": 0.98, "table_size": 4096}


def deviation_gains(payoffs: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """For every agent i and pair (recommended a', deviation a''): what i gains in
    expectation by playing a'' whenever a' is recommended (a correlated equilibrium has
    every gain <= 0), straight from the definition. payoffs [n, k**n], probs [k**n]."""
    n = payoffs.shape[0]
    k = round(payoffs.shape[1] ** (1 / n))
    q = payoffs.reshape((n,) + (k,) * n)
    p = probs.reshape((k,) * n)
    gains = []
    for i in range(n):
        qi, pi = np.moveaxis(q[i], i, 0), np.moveaxis(p, i, 0)
        for rec in range(k):
            for dev in range(k):
                if dev != rec:
                    gains.append((pi[rec] * (qi[dev] - qi[rec])).sum())
    return np.asarray(gains)


ce = jax.jit(jalgt.correlated_equilibrium)


def test_prisoners_dilemma_puts_all_mass_on_mutual_defection():
    probs = np.asarray(ce(jnp.asarray(PRISONERS_DILEMMA)))
    assert probs.dtype == np.float32 and probs.shape == (4,)
    np.testing.assert_allclose(probs, [0.0, 0.0, 0.0, 1.0], atol=1e-6)


def test_chicken_reaches_the_best_correlated_welfare():
    payoffs = np.asarray(CHICKEN, np.float32)
    probs = np.asarray(ce(jnp.asarray(payoffs)))
    welfare = float(probs @ payoffs.sum(0))
    assert welfare >= 10.0  # PPAGE's check
    assert welfare == pytest.approx(10.5, abs=1e-4)  # the optimum (pure NE give 9)
    np.testing.assert_allclose(probs, [0.5, 0.25, 0.25, 0.0], atol=1e-5)
    assert deviation_gains(payoffs, probs).max() <= 1e-5


def test_random_games_under_vmap_are_correlated_equilibria():
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(48, 2, 25)) * 100.0
    sparse = rng.integers(-3, 4, size=(48, 2, 25)) * (rng.random((48, 2, 25)) < 0.2)
    games = np.concatenate([dense, sparse, np.zeros((1, 2, 25))]).astype(np.float32)
    probs = np.asarray(jax.jit(jax.vmap(jalgt.correlated_equilibrium))(jnp.asarray(games)))
    assert probs.shape == (len(games), 25) and probs.dtype == np.float32
    assert (probs >= 0).all()
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
    for game, p in zip(games, probs, strict=True):
        scale = max(np.abs(game).max(), 1.0)
        assert deviation_gains(game, p).max() <= 1e-5 * scale
        # a pure Nash equilibrium is a correlated equilibrium: the optimum is at least as good
        q = game.reshape(2, 5, 5)
        best = [
            q[0, a, b] + q[1, a, b]
            for a in range(5)
            for b in range(5)
            if q[0, a, b] >= q[0, :, b].max() and q[1, a, b] >= q[1, a, :].max()
        ]
        if best:
            assert p @ game.sum(0) >= max(best) - 1e-4 * scale


def test_one_agent_game_is_its_argmax_and_bad_shapes_fail_clearly():
    np.testing.assert_allclose(
        ce(jnp.asarray([[1.0, 4.0, -2.0, 3.0, 0.0]])), [0, 1, 0, 0, 0], atol=1e-6
    )
    with pytest.raises(ValueError, match="k \\*\\* n_agents"):
        jalgt.correlated_equilibrium(jnp.zeros((2, 24)))


def test_more_than_two_learning_agents_is_a_config_error():
    with pytest.raises(ConfigError, match="at most 2 learning agents"):
        tiny_config("jalgt", PARAMS)  # 2 predators + 1 prey
    config = tiny_config(
        "jal_gt", PARAMS, **{"experiment.roles": {"predators": "learn", "preys": "noop"}}
    )
    assert config["experiment"]["algorithm"]["name"] == "jal_gt"  # the alias; 2 predators


@pytest.fixture(scope="module")
def tc():
    return make_train_config(tiny_config("jalgt", PARAMS, total_timesteps=8_000, **ONE_PREDATOR))


@pytest.fixture(scope="module")
def trained(tc):
    return train_seeds(tc)


@pytest.mark.slow  # a learning run
def test_jalgt_learns_the_tiny_task_with_finite_errors(tc, trained):
    runner, metrics = trained
    assert runner.tables.shape == (2, 2, PARAMS["table_size"], 25)  # [seeds, players, ...]
    # zero tables play (right, right): never a capture before training
    policies = jalgt.policy_state(runner)
    losses = loss_names(["td_error"])
    assert_learned(tc, policies, metrics, losses, optimal=OPTIMAL_STEPS_ONE_PREDATOR)


@pytest.mark.slow  # trains several seeds
def test_vmap_keeps_the_seeds_apart(tc, trained):
    assert_seeds_kept_apart(tc, trained[1])


@pytest.mark.slow
def test_vmap_over_seeds_equals_separate_runs(tc, trained):
    assert_matches_separate_run(tc, trained[1], rtol=1e-6, loss_rtol=1e-5)


def test_captured_prey_transitions_leave_the_tables_unchanged():
    """Player 1's transitions are invalid in two grids (a captured prey): garbage there
    changes nothing, and the valid entries move by alpha * TD error."""
    hp = jalgt.Hyperparams(alpha=0.5, gamma=0.9)
    tables = jnp.asarray(np.random.default_rng(1).normal(size=(2, 8, 4)), jnp.float32)
    keys, joint = jnp.array([0, 3, 3, 5]), jnp.array([1, 2, 2, 0])
    valid = jnp.array([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    batch = dict(
        reward=jnp.full((4, 2), 2.0), terminal=jnp.zeros((4, 2)), next_value=jnp.ones((4, 2))
    )
    clean, td = jalgt.td_update(tables, keys, joint, valid=valid, hp=hp, **batch)
    garbage = {k: jnp.where(valid == 0, 1e6, v) for k, v in batch.items()}
    dirty, _ = jalgt.td_update(tables, keys, joint, valid=valid, hp=hp, **garbage)
    np.testing.assert_array_equal(clean, dirty)
    # grid 0, player 0: Q[0, 0, 1] += 0.5 * (2 + 0.9 * 1 - Q)
    q = float(tables[0, 0, 1])
    assert float(clean[0, 0, 1]) == pytest.approx(q + 0.5 * (2.9 - q), rel=1e-6)
    assert float(td[0, 0]) == pytest.approx(2.9 - q, rel=1e-6)
    # player 1 at key 3, joint 2: only grid 2's (valid) transition counts
    q = float(tables[1, 3, 2])
    assert float(clean[1, 3, 2]) == pytest.approx(q + 0.5 * (2.9 - q), rel=1e-6)
    assert float(clean[1, 5, 0]) == float(tables[1, 5, 0])  # grid 3: masked


def test_loading_the_shipped_1v1_preset_with_jalgt_works():
    config = pj.load_config(
        "configs/1v1", {"experiment.algorithm": {"name": "jalgt", "params": {}}}
    )
    hp = make_train_config(config).hp
    assert (hp.alpha, hp.epsilon, hp.epsilon_decay, hp.min_epsilon) == (0.1, 1.0, 0.995, 0.05)
