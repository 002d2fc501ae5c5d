"""DQN: independent deep Q-learning per role, with on-device replay and a target network.

Each learning role has one Q-network shared by its agents (agent one-hot id appended to the
observation), its own replay buffer, optimiser and target network. PPAGE's ``dqn`` options:
``double_dqn`` (the online network picks the next action, the target network values it),
``dueling`` (``Q = V + A - mean(A)``), Huber loss, gradient-norm clipping, hard target syncs
every ``target_update_interval`` gradient steps, epsilon decaying per finished episode.
PPAGE's D3QN preset is ``double_dqn: true, dueling: true``.

Vectorised form: every turn, ``num_envs`` grids step with epsilon-greedy actions, each grid's
transition (all agents of the role) is written to the ring buffer, and ``gradient_steps``
minibatches of ``batch_size`` grid-transitions are sampled uniformly (with replacement) once
``min_replay_size`` are stored. Transitions of already-captured prey are stored with weight 0
and never reach the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct
from flax.training.train_state import TrainState

from ppage_jax.config.experiment.dqn import DQNHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import exploration, loop, networks, optim, roles, rollout
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.rollout import EnvCarry
from ppage_jax.types import Replaceable

Hyperparams = DQNHyperparams
STOCHASTIC = False


# --------------------------------------------------------------------------- network
class QNetwork(nn.Module):
    """MLP Q-values, x float[..., F] -> float[..., nA]; dueling heads when asked."""

    num_actions: int
    hidden_layers: Sequence[int]
    dueling: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden_layers:
            x = nn.relu(nn.Dense(width)(x))
        if not self.dueling:
            return nn.Dense(self.num_actions)(x)
        value = nn.Dense(1, name="value")(x)
        advantage = nn.Dense(self.num_actions, name="advantage")(x)
        return value + advantage - advantage.mean(axis=-1, keepdims=True)


def network(tc: TrainConfig) -> QNetwork:
    return QNetwork(tc.env.num_actions, tc.hp.hidden_layers, tc.hp.dueling)


# --------------------------------------------------------------------------- state
@struct.dataclass
class Replay(Replaceable):
    """Ring buffer of grid-transitions of one role: [capacity, n_role, ...]."""

    x: jax.Array
    action: jax.Array
    reward: jax.Array
    next_x: jax.Array  # input built from final_obs (the bootstrap observation)
    terminal: jax.Array  # float: agent_terminal (termination or own capture)
    valid: jax.Array  # float: 1 for a transition that may be learned from
    position: jax.Array  # int32: next row to write
    size: jax.Array  # int32: rows filled


@struct.dataclass
class Learner(Replaceable):
    train: TrainState
    target: Any  # target network params (a flax params tree)
    replay: Replay
    gradient_steps: jax.Array  # int32


@struct.dataclass
class RunnerState(Replaceable):
    learners: dict  # role -> Learner
    env: EnvCarry
    key: jax.Array
    progress: Progress


def optimizer_settings(hp: Hyperparams) -> dict:
    """The injected optimiser settings (:mod:`.optim`): Adam's step size, the clip norm."""
    return {"learning_rate": hp.learning_rate, "max_norm": hp.grad_clip}


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    k_env, k_net, key = jax.random.split(key, 3)
    env = rollout.env_reset(tc, k_env, params)
    net, hp = network(tc), tc.hp
    tx = optim.injected(optim.adam_clipped, **optimizer_settings(hp))
    learners = {}
    for i, role in enumerate(tc.learning_roles):
        x = networks.role_input(tc, role, env.obs[0])
        net_params = net.init(jax.random.fold_in(k_net, i), x)
        n = x.shape[0]
        cap = hp.buffer_size
        replay = Replay(
            x=jnp.zeros((cap,) + x.shape, jnp.float32),
            action=jnp.zeros((cap, n), jnp.int32),
            reward=jnp.zeros((cap, n), jnp.float32),
            next_x=jnp.zeros((cap,) + x.shape, jnp.float32),
            terminal=jnp.zeros((cap, n), jnp.float32),
            valid=jnp.zeros((cap, n), jnp.float32),
            position=jnp.zeros((), jnp.int32),
            size=jnp.zeros((), jnp.int32),
        )
        learners[role] = Learner(
            TrainState.create(apply_fn=net.apply, params=net_params, tx=tx),
            net_params,
            replay,
            jnp.zeros((), jnp.int32),
        )
    return RunnerState(learners, env, key, loop.progress_init())


# --------------------------------------------------------------------------- learning
def add(replay: Replay, x, action, reward, next_x, terminal, valid) -> Replay:
    """Write one turn of every grid (leading axis E) into the ring."""
    cap = replay.x.shape[0]
    rows = (replay.position + jnp.arange(x.shape[0])) % cap
    return replay.replace(
        x=replay.x.at[rows].set(x),
        action=replay.action.at[rows].set(action),
        reward=replay.reward.at[rows].set(reward),
        next_x=replay.next_x.at[rows].set(next_x),
        terminal=replay.terminal.at[rows].set(terminal),
        valid=replay.valid.at[rows].set(valid),
        position=(replay.position + x.shape[0]) % cap,
        size=jnp.minimum(replay.size + x.shape[0], cap),
    )


def q_loss(net_params, target_params, apply_fn, hp: Hyperparams, batch: dict) -> jax.Array:
    """Huber TD loss averaged over the valid agent-transitions of a batch [B, n]."""
    q = apply_fn(net_params, batch["x"])
    q_taken = jnp.take_along_axis(q, batch["action"][..., None], -1)[..., 0]
    q_next_target = apply_fn(target_params, batch["next_x"])
    if hp.double_dqn:
        best = jnp.argmax(apply_fn(net_params, batch["next_x"]), axis=-1)
        next_value = jnp.take_along_axis(q_next_target, best[..., None], -1)[..., 0]
    else:
        next_value = q_next_target.max(axis=-1)
    target = batch["reward"] + hp.gamma * (1.0 - batch["terminal"]) * next_value
    td = optax.huber_loss(q_taken, jax.lax.stop_gradient(target), delta=1.0)
    return rollout.masked_mean(td, batch["valid"])


def sgd_step(learner: Learner, hp: Hyperparams, key: jax.Array) -> tuple[Learner, jax.Array]:
    """One gradient step on a uniform minibatch; then the hard target sync if due."""
    rows = jax.random.randint(key, (hp.batch_size,), 0, jnp.maximum(learner.replay.size, 1))
    r = learner.replay
    batch = {
        "x": r.x[rows],
        "action": r.action[rows],
        "reward": r.reward[rows],
        "next_x": r.next_x[rows],
        "terminal": r.terminal[rows],
        "valid": r.valid[rows],
    }
    loss, grads = jax.value_and_grad(q_loss)(
        learner.train.params, learner.target, learner.train.apply_fn, hp, batch
    )
    train = optim.refresh(learner.train, optimizer_settings(hp)).apply_gradients(grads=grads)
    steps = learner.gradient_steps + 1
    target = jax.tree.map(
        lambda t, o: jnp.where(steps % hp.target_update_interval == 0, o, t),
        learner.target,
        train.params,
    )
    return learner.replace(train=train, target=target, gradient_steps=steps), loss


def learn(learner: Learner, hp: Hyperparams, key: jax.Array) -> tuple[Learner, jax.Array]:
    """``gradient_steps`` SGD steps once the buffer holds ``min_replay_size`` transitions;
    returns the mean loss (NaN while warming up)."""

    def run(learner):
        def one(learner, k):
            return sgd_step(learner, hp, k)

        learner, losses = jax.lax.scan(one, learner, jax.random.split(key, hp.gradient_steps))
        return learner, losses.mean()

    def wait(learner):
        return learner, jnp.float32(jnp.nan)

    return jax.lax.cond(learner.replay.size >= hp.min_replay_size, run, wait, learner)


def q_actions(
    tc: TrainConfig, learners: dict, key: jax.Array, obs: jax.Array, epsilon: jax.Array
) -> tuple[jax.Array, dict]:
    """Epsilon-greedy actions int32[E, A] for the learning roles (0 elsewhere), and inputs."""
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    inputs = {}
    for i, role in enumerate(tc.learning_roles):
        x = networks.role_input(tc, role, obs)
        q = learners[role].train.apply_fn(learners[role].train.params, x)
        action = exploration.epsilon_greedy(jax.random.fold_in(key, i), q, epsilon)
        actions = actions.at[:, tc.agents_of(role)].set(action)
        inputs[role] = (x, action)
    return actions, inputs


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps`` turns, each stored and followed by ``gradient_steps`` SGD steps."""
    hp = tc.hp

    def one_step(carry, _):
        learners, env, key, episodes = carry
        key, k_act, k_fixed, k_env, k_learn = jax.random.split(key, 5)
        epsilon = exploration.ppage_epsilon(hp, episodes)
        actions, inputs = q_actions(tc, learners, k_act, env.obs, epsilon)
        actions = roles.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, actions)
        env, step = rollout.env_step(tc, k_env, env, actions, params, hp.gamma)
        new, losses = {}, {}
        for i, (role, (x, action)) in enumerate(inputs.items()):
            rows = tc.agents_of(role)
            learner = learners[role]
            replay = add(
                learner.replay,
                x,
                action,
                step.reward[:, rows] * hp.reward_scale,
                networks.role_input(tc, role, step.final_obs),
                step.agent_terminal[:, rows].astype(jnp.float32),
                step.valid[:, rows].astype(jnp.float32),
            )
            new[role], losses[f"q_loss/{role}"] = learn(
                learner.replace(replay=replay), hp, jax.random.fold_in(k_learn, i)
            )
        episodes = episodes + step.finished["done"].sum()
        return (new, env, key, episodes), (step.finished, losses, epsilon)

    learners, env, key, new_progress, row = exploration.epsilon_turns(
        tc, runner, runner.learners, one_step, jnp.nanmean
    )
    return RunnerState(learners, env, key, new_progress), row


train = loop.trainer(init, update, "DQN")


# --------------------------------------------------------------------------- policy
def policy_state(runner: RunnerState) -> dict:
    """role -> online Q-network params."""
    return {role: learner.train.params for role, learner in runner.learners.items()}


def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Argmax-Q actions int32[E, A] for the learning roles (0 for the others)."""
    net = network(tc)
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    for role in tc.learning_roles:
        q = cast(jax.Array, net.apply(policy[role], networks.role_input(tc, role, obs)))
        actions = actions.at[:, tc.agents_of(role)].set(jnp.argmax(q, -1).astype(jnp.int32))
    return actions
