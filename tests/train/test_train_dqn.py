"""DQN: learns the tiny task; double and dueling do what PPAGE's flags do; masking."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import (
    OPTIMAL_STEPS,
    greedy_lengths,
    tiny_config,
    train_seeds,
    untrained_policies,
)

from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import dqn

PARAMS = {
    "epsilon_decay": 0.98,
    "min_replay_size": 64,
    "batch_size": 64,
    "buffer_size": 2000,
    "hidden_layers": [32, 32],
    "double_dqn": True,
    "dueling": True,
}


@pytest.fixture(scope="module")
def tc():
    return make_train_config(tiny_config("dqn", PARAMS))


@pytest.fixture(scope="module")
def trained(tc):
    return train_seeds(tc)


@pytest.mark.slow  # a learning run
def test_d3qn_learns_the_tiny_task_with_finite_losses(tc, trained):
    runner, metrics = trained
    assert set(metrics["losses"]) == {"q_loss/predator", "q_loss/prey"}
    for name, values in metrics["losses"].items():
        assert np.isfinite(np.asarray(values)[:, 5:]).all(), name  # after the warm-up
    epsilon = np.asarray(metrics["extras"]["epsilon"])
    assert epsilon[0, 0] < 1.0 and epsilon[0, -1] == pytest.approx(0.05)  # PPAGE floor
    before_len, _ = greedy_lengths(tc, untrained_policies(tc))
    after_len, after_cap = greedy_lengths(tc, dqn.policy_state(runner))
    # An untrained greedy network may walk the shortest path by luck (seed 0 does: a fixed
    # start, deterministic actions); over the two seeds it is far from it.
    assert float(before_len.mean()) >= OPTIMAL_STEPS + 5
    np.testing.assert_array_equal(after_cap, [1.0, 1.0])
    np.testing.assert_array_equal(after_len, [OPTIMAL_STEPS, OPTIMAL_STEPS])
    replay = runner.learners["predator"].replay
    assert int(replay.size[0]) == PARAMS["buffer_size"]  # the ring filled up


def _linear(params, x):
    return x @ params


BATCH = {
    # one transition, one agent; features pick rows of the 2x2 "network" matrices
    "x": jnp.array([[[1.0, 0.0]]]),
    "action": jnp.array([[0]]),
    "reward": jnp.array([[1.0]]),
    "next_x": jnp.array([[[0.0, 1.0]]]),
    "terminal": jnp.array([[0.0]]),
    "valid": jnp.array([[1.0]]),
}
ONLINE = jnp.array([[2.0, 0.0], [5.0, 3.0]])  # Q(s) = [2, 0]; Q_online(s') = [5, 3]
TARGET = jnp.array([[0.0, 0.0], [1.0, 4.0]])  # Q_target(s') = [1, 4]


@pytest.mark.parametrize(
    "double, target",
    [
        (False, 1.0 + 0.5 * 4.0),  # max Q_target(s')
        (True, 1.0 + 0.5 * 1.0),
    ],
)  # Q_target at argmax
def test_double_dqn_values_the_online_argmax_with_the_target_net(double, target):
    hp = dqn.Hyperparams(gamma=0.5, double_dqn=double)
    loss = dqn.q_loss(ONLINE, TARGET, _linear, hp, BATCH)
    error = abs(target - 2.0)
    expected = 0.5 * error**2 if error <= 1 else error - 0.5  # Huber, delta 1
    assert float(loss) == pytest.approx(expected)
    terminal = dict(BATCH, terminal=jnp.array([[1.0]]))  # termination cuts it
    assert float(dqn.q_loss(ONLINE, TARGET, _linear, hp, terminal)) == pytest.approx(0.5)


def test_dueling_head_is_value_plus_centred_advantage():
    net = dqn.QNetwork(num_actions=5, hidden_layers=(8,), dueling=True)
    x = jnp.ones((3, 4))
    params = net.init(jax.random.PRNGKey(0), x)
    q = net.apply(params, x)
    hidden = jax.nn.relu(
        x @ params["params"]["Dense_0"]["kernel"] + params["params"]["Dense_0"]["bias"]
    )
    v = hidden @ params["params"]["value"]["kernel"] + params["params"]["value"]["bias"]
    np.testing.assert_allclose(q.mean(-1, keepdims=True), v, rtol=1e-5, atol=1e-6)
    assert (
        "value" not in dqn.QNetwork(5, (8,), dueling=False).init(jax.random.PRNGKey(0), x)["params"]
    )


@pytest.mark.slow  # a training run
def test_masked_transitions_never_reach_the_gradient(tc, trained):
    runner = jax.tree.map(lambda a: a[0], trained[0])
    learner = runner.learners["prey"]
    replay = learner.replay
    invalid = (jnp.arange(replay.valid.shape[0]) % 3 == 0)[:, None]  # every third row
    marked = replay.replace(valid=jnp.where(invalid, 0.0, replay.valid))
    garbage = marked.replace(
        reward=jnp.where(invalid, 1e6, replay.reward),
        x=jnp.where(invalid[..., None], 1e3, replay.x),
        terminal=jnp.where(invalid, 1.0 - replay.terminal, replay.terminal),
    )
    step = jax.jit(dqn.sgd_step, static_argnums=1)
    key = jax.random.PRNGKey(5)
    clean, clean_loss = step(learner.replace(replay=marked), tc.hp, key)
    dirty, dirty_loss = step(learner.replace(replay=garbage), tc.hp, key)
    assert float(clean_loss) == float(dirty_loss)
    jax.tree.map(np.testing.assert_array_equal, clean.train.params, dirty.train.params)
    empty = learner.replace(replay=replay.replace(valid=jnp.zeros_like(replay.valid)))
    grads = jax.grad(dqn.q_loss)(
        empty.train.params,
        empty.target,
        empty.train.apply_fn,
        tc.hp,
        {
            k: getattr(empty.replay, k)[:64]
            for k in ("x", "action", "reward", "next_x", "terminal", "valid")
        },
    )
    for leaf in jax.tree.leaves(grads):
        np.testing.assert_array_equal(leaf, np.zeros_like(leaf))
