"""A2C and A3C: learn the tiny task, vmap over seeds exactly, mask captured prey; n-step
returns; A2C's separate optimisers; A3C's stale copies, and A3C with one worker and
staleness 0 making exactly the updates of the synchronous n-step actor-critic."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.training.train_state import TrainState
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
from ppage_jax.train.algorithms import a2c, a3c
from ppage_jax.train.kit import pg

A2C_PARAMS = {
    "n_steps": 5,
    "num_steps": 20,
    "hidden_layers": [32, 32],
    "actor_learning_rate": 3e-3,
    "critic_learning_rate": 3e-3,
    "reward_scale": 0.01,
}
A3C_PARAMS = {
    "n_steps": 5,
    "num_steps": 20,
    "hidden_layers": [32, 32],
    "learning_rate": 3e-3,
    "entropy_coef": 0.01,
    "normalize_returns": True,
    "actor_weight_decay": 0.001,
    "num_workers": 2,
}  # staleness: num_workers - 1 = 1
# The prey cannot move anyway: A3C learns the predators only (a smaller program to compile).
PREDATORS_ONLY = {"experiment.roles": {"predators": "learn", "preys": "noop"}}


@pytest.fixture(scope="module")
def a2c_run():
    tc = make_train_config(tiny_config("a2c", A2C_PARAMS, total_timesteps=12_000))
    return tc, train_seeds(tc)


@pytest.fixture(scope="module")
def a3c_run():
    tc = make_train_config(tiny_config("a3c", A3C_PARAMS, total_timesteps=12_000, **PREDATORS_ONLY))
    return tc, train_seeds(tc)


LOSSES = loss_names(ACTOR_CRITIC_LOSSES)


@pytest.mark.slow  # a learning run
def test_a2c_learns_the_tiny_task_with_finite_losses(a2c_run):
    tc, (runner, metrics) = a2c_run
    assert_learned(tc, a2c.policy_state(runner), metrics, LOSSES, slack=1)
    assert set(runner.learners["predator"].train.params["params"]) == {
        "actor_0",
        "actor_1",
        "actor_out",
        "critic_0",
        "critic_1",
        "critic_out",
    }


@pytest.mark.slow  # a learning run
def test_a3c_learns_the_tiny_task_with_finite_losses(a3c_run):
    """The sampled policy (as PPAGE acts) captures in most episodes by the end, against a
    first update that ends most episodes at the step limit."""
    tc, (runner, metrics) = a3c_run
    assert set(metrics["losses"]) == loss_names(ACTOR_CRITIC_LOSSES, ["predator"])
    assert set(runner.learners) == {"predator"}
    for name, values in metrics["losses"].items():
        assert np.isfinite(np.asarray(values)).all(), name
    capture = np.asarray(metrics["capture_rate"])
    length = np.asarray(metrics["episode_length"])
    assert (capture[:, 0] <= 0.3).all() and (length[:, 0] >= 17).all()
    assert (np.nanmean(capture[:, -5:], axis=1) >= 0.8).all()
    assert (np.nanmean(length[:, -5:], axis=1) <= 12).all()
    # an update is num_steps / n_steps rounds of num_workers optimiser steps
    steps = runner.learners["predator"].train.step
    np.testing.assert_array_equal(steps, [tc.num_updates * 4 * 2] * 2)


@pytest.mark.slow  # trains several seeds
@pytest.mark.parametrize("name", ["a2c", "a3c"])
def test_vmap_keeps_the_seeds_apart(name, a2c_run, a3c_run):
    tc, (_, metrics) = a2c_run if name == "a2c" else a3c_run
    assert_seeds_kept_apart(tc, metrics)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["a2c", "a3c"])
def test_vmap_over_seeds_equals_separate_runs(name, a2c_run, a3c_run):
    tc, (_, metrics) = a2c_run if name == "a2c" else a3c_run
    assert_matches_separate_run(tc, metrics, first=10)


# --------------------------------------------------------------------------- A3C = A2C
@pytest.mark.slow  # trains both ways
def test_one_worker_without_staleness_is_the_synchronous_update():
    """A3C with one worker and staleness 0 against the synchronous n-step round that a2c
    trains with, on A3C's network, optimiser and normaliser: the same parameters, optimiser
    state, normaliser, grids and metrics after every update."""
    params = dict(A3C_PARAMS, num_workers=1, staleness=0, num_steps=10)
    tc = make_train_config(tiny_config("a3c", params, total_timesteps=1_000, **PREDATORS_ONLY))
    env_params = tc.env.default_params
    runner = a3c.init(jax.random.PRNGKey(3), tc, env_params)
    one_async = jax.jit(lambda r: a3c.update(r, tc, env_params))
    one_sync = jax.jit(lambda r: pg.sync_update(r, tc, env_params, a3c.settings(tc.hp)))
    async_runner, sync_runner, async_rows, sync_rows = runner, runner, [], []
    for _ in range(3):
        async_runner, row = one_async(async_runner)
        async_rows.append(row)
        sync_runner, row = one_sync(sync_runner)
        sync_rows.append(row)
    close = dict(rtol=1e-5, atol=1e-6)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, **close),
        (async_runner.learners, async_runner.env, async_runner.progress),
        (sync_runner.learners, sync_runner.env, sync_runner.progress),
    )
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **close), async_rows, sync_rows)
    moved = jax.tree.map(
        lambda a, b: float(jnp.abs(a - b).max()),
        async_runner.learners["predator"].train.params,
        runner.learners["predator"].train.params,
    )
    assert min(jax.tree.leaves(moved)) > 0  # it did learn something
    assert float(async_runner.learners["predator"].norm.count) == 3 * 10 * 16 * 2


def test_workers_take_gradients_at_parameters_staleness_updates_old():
    def version(u):  # the learner after u updates; its parameters are just u
        return pg.Learner(train=_Params(jnp.float32(u)), norm=pg.normaliser_init())

    for lag in (0, 1, 3):
        history = a3c.History(
            params=jnp.zeros(lag + 1),
            norm=jax.tree.map(
                lambda a, lag=lag: jnp.zeros((lag + 1,) + a.shape), pg.normaliser_init()
            ),
            oldest=jnp.int32(0),
        )
        for u in range(7):  # before update u: the copy is max(u - lag, 0) updates old
            assert float(a3c.stale(history)[0]) == max(u - lag, 0), (lag, u)
            history = a3c.push(history, version(u + 1))


class _Params:
    """Stands for a TrainState in the history test: only ``.params`` is read."""

    def __init__(self, params):
        self.params = params


# --------------------------------------------------------------------------- n-step pieces
def test_nstep_returns_bootstrap_restart_and_cut_where_they_should():
    gamma = 0.5
    traj = pg.Trajectory(
        x=None,
        action=None,
        valid=None,
        reward=jnp.array([[1.0], [2.0], [4.0], [8.0]]),
        next_value=None,
        agent_terminal=jnp.array([[False], [True], [False], [False]]),
        episode_end=jnp.array([[False], [True], [False], [False]]),
    )
    bootstrap = jnp.array([[100.0], [200.0], [300.0], [16.0]])  # V(final_obs) per step
    returns = np.asarray(pg.nstep_returns(traj, bootstrap, gamma))[:, 0]
    # steps 2-3: a new episode, bootstrapped on V after the rollout's last step (16)
    assert returns[3] == 8.0 + 0.5 * 16.0
    assert returns[2] == 4.0 + 0.5 * returns[3]
    # steps 0-1: the episode terminated at step 1 (no bootstrap there)
    assert returns[1] == 2.0
    assert returns[0] == 1.0 + 0.5 * 2.0
    truncated = traj.replace(agent_terminal=jnp.zeros_like(traj.agent_terminal))
    assert float(pg.nstep_returns(truncated, bootstrap, gamma)[1, 0]) == 2.0 + 0.5 * 200.0


@pytest.mark.parametrize("normalize", [False, True])
def test_captured_prey_transitions_change_nothing(normalize):
    settings = pg.NStepSettings(
        n_steps=4,
        gamma=0.9,
        entropy_coef=0.01,
        value_coef=0.5,
        reward_scale=1.0,
        normalize_returns=normalize,
    )
    net = pg.SharedTrunkNetwork(num_actions=3, hidden_layers=(8,))
    rng = np.random.default_rng(0)
    shape = (4, 5, 2)  # [T, E, n]
    valid = np.ones(shape, bool)
    valid[2:, 1, 1] = False  # captured at step 1, grid 1
    terminal = rng.random(shape) < 0.2
    terminal[1, 1, 1] = True  # (the capture is terminal)
    traj = pg.Trajectory(
        x=jnp.asarray(rng.normal(size=shape + (4,)), jnp.float32),
        action=jnp.asarray(rng.integers(0, 3, size=shape), jnp.int32),
        reward=jnp.asarray(rng.normal(size=shape), jnp.float32),
        next_value=jnp.asarray(rng.normal(size=shape), jnp.float32),
        agent_terminal=jnp.asarray(terminal),
        episode_end=jnp.zeros(shape, bool),
        valid=jnp.asarray(valid),
    )
    invalid = ~traj.valid
    garbage = traj.replace(
        x=jnp.where(invalid[..., None], 1e3, traj.x),
        reward=jnp.where(invalid, 1e6, traj.reward),
        next_value=jnp.where(invalid, -1e6, traj.next_value),
    )
    params = net.init(jax.random.PRNGKey(0), traj.x[0])
    learner = pg.Learner(
        TrainState.create(apply_fn=net.apply, params=params, tx=a3c.optimizer(a3c.Hyperparams())),
        pg.normaliser_init(),
    )

    @jax.jit
    def step(traj):
        grads, raw, aux = pg.nstep_gradients(params, net.apply, learner.norm, traj, settings)
        return pg.apply_update(learner, grads, raw, traj.valid, settings), aux

    clean, clean_aux = step(traj)
    dirty, dirty_aux = step(garbage)
    jax.tree.map(np.testing.assert_array_equal, clean, dirty)
    jax.tree.map(np.testing.assert_array_equal, clean_aux, dirty_aux)
    assert float(clean.norm.count) == (valid.sum() if normalize else 0)


def test_a2c_steps_actor_and_critic_with_their_own_rates():
    hp = a2c.Hyperparams(actor_learning_rate=0.1, critic_learning_rate=0.001)
    net = pg.SeparateNetworks(num_actions=5, hidden_layers=(8,))
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))
    tx = a2c.optimizer(hp)
    grads = jax.tree.map(jnp.ones_like, params)
    updates, _ = jax.jit(lambda p: tx.update(grads, tx.init(p), p))(params)  # one program
    for layer, leaves in updates["params"].items():
        step = float(jnp.abs(leaves["kernel"]).max())
        expected = 0.1 if layer.startswith("actor") else 0.001
        assert step == pytest.approx(expected, rel=1e-3), layer
    assert (a2c.Hyperparams().actor_lr, a2c.Hyperparams().critic_lr) == (3e-4, 1e-3)
    both = a2c.Hyperparams(learning_rate=0.02)
    assert (both.actor_lr, both.critic_lr) == (0.02, 0.02)  # PPAGE's fallback
