"""IPPO: independent PPO per role, parameters shared within a role (PureJaxRL style).

Each learning role has one actor-critic network (separate actor and critic MLPs) shared by all
its agents; the agent's one-hot id within the role is appended to its observation. Every
update collects ``num_steps`` turns from ``num_envs`` grids, computes GAE per agent, and runs
``update_epochs`` epochs of ``num_minibatches`` clipped-PPO minibatch steps per role.

- Bootstrap: ``V(final_obs)`` after every step, cut only by termination (the episode's, or
  the prey's own capture); truncation bootstraps.
- Masking: transitions of a prey that was already captured before the step have weight 0 in
  every loss term and in the advantage normalisation.

``train(key, config, params) -> (runner_state, metrics)``: see ``ppage_jax/train/__init__.py``.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from flax.training.train_state import TrainState

from ppage_jax.config import UNIT_INTERVAL, Field, positive
from ppage_jax.state import EnvParams
from ppage_jax.train import common
from ppage_jax.train.common import EnvCarry, Progress, TrainConfig


# --------------------------------------------------------------------------- hyperparameters
@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """``experiment.algorithm.params`` of ``ippo`` (defaults below)."""

    learning_rate: float = 1e-3
    anneal_lr: bool = True
    num_steps: int = 32               # turns per grid per update (rollout length)
    update_epochs: int = 2
    num_minibatches: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden_layers: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    obs_scale: float | None = None    # observations are multiplied by this; null: auto
    reward_scale: float = 0.01        # rewards are multiplied by this before learning


CHECKS = {
    "learning_rate": positive(),
    "anneal_lr": Field(bool),
    "num_steps": positive(int),
    "update_epochs": positive(int),
    "num_minibatches": positive(int),
    "gamma": UNIT_INTERVAL,
    "gae_lambda": UNIT_INTERVAL,
    "clip_eps": positive(),
    "ent_coef": Field(float, False, lambda v: v >= 0, ">= 0"),
    "vf_coef": Field(float, False, lambda v: v >= 0, ">= 0"),
    "max_grad_norm": positive(),
    "hidden_layers": Field(list, False, lambda v: len(v) > 0 and all(
        isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in v),
        "of positive integers, at least one"),
    "activation": Field(str, False, lambda v: v in ("tanh", "relu"), "one of ['tanh', 'relu']"),
    "obs_scale": Field(float, True, lambda v: v > 0,
                       "> 0; null means 1 / env.size, or 1 for the spatial grid observation"),
    "reward_scale": positive(),
}


def check(hp: Hyperparams, data: dict, fail) -> None:
    """Cross-key rules over the merged config ``data`` (``fail`` raises a ConfigError)."""
    num_envs = data["experiment"]["num_envs"]
    batch = num_envs * hp.num_steps
    if batch % hp.num_minibatches:
        fail("experiment.algorithm.params.num_minibatches", hp.num_minibatches,
             f"must divide num_envs * num_steps = {batch}")


# --------------------------------------------------------------------------- network
class ActorCritic(nn.Module):
    """Separate actor and critic MLPs: x float[..., F] -> (logits [..., nA], value [...])."""

    num_actions: int
    hidden_layers: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        act = nn.tanh if self.activation == "tanh" else nn.relu
        # Scaled (truncated normal) init with PureJaxRL's gains: sqrt(2) hidden, 0.01 policy
        # head, 1 value head. Orthogonal init would need a batched QR under vmap, a LAPACK
        # kernel that re-enters XLA's CPU thread pool and can wedge it (seen at exit).
        def gain(g):
            return nn.initializers.variance_scaling(g * g, "fan_in", "truncated_normal")

        def trunk(h, name):
            for i, width in enumerate(self.hidden_layers):
                h = act(nn.Dense(width, kernel_init=gain(np.sqrt(2)), name=f"{name}_{i}")(h))
            return h

        logits = nn.Dense(self.num_actions, kernel_init=gain(0.01), name="actor_out")(
            trunk(x, "actor"))
        value = nn.Dense(1, kernel_init=gain(1.0), name="critic_out")(trunk(x, "critic"))
        return logits, value[..., 0]


def network(tc: TrainConfig) -> ActorCritic:
    return ActorCritic(tc.env.num_actions, tc.hp.hidden_layers, tc.hp.activation)


# --------------------------------------------------------------------------- state
@struct.dataclass
class RunnerState:
    learners: dict          # role -> flax TrainState (learning roles only)
    env: EnvCarry
    key: jax.Array
    progress: Progress


def _optimizer(tc: TrainConfig) -> optax.GradientTransformation:
    hp = tc.hp
    steps_per_update = hp.update_epochs * hp.num_minibatches
    if hp.anneal_lr:
        lr = optax.linear_schedule(hp.learning_rate, 0.0, tc.num_updates * steps_per_update)
    else:
        lr = hp.learning_rate
    return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm),
                       optax.adam(lr, eps=1e-5))


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    """Networks, optimisers and the first observations."""
    k_env, k_net, key = jax.random.split(key, 3)
    env = common.env_reset(tc, k_env, params)
    net = network(tc)
    learners = {}
    for i, role in enumerate(tc.learning_roles):
        x = common.role_input(tc, role, env.obs[0])
        learners[role] = TrainState.create(
            apply_fn=net.apply, params=net.init(jax.random.fold_in(k_net, i), x),
            tx=_optimizer(tc))
    return RunnerState(learners, env, key, common.progress_init())


# --------------------------------------------------------------------------- rollout
@struct.dataclass
class Trajectory:
    """One role's rollout, time-major: [T, E, n_role, ...]."""

    x: jax.Array             # network input
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    next_value: jax.Array    # V(final_obs): bootstrap value after the step
    reward: jax.Array
    agent_terminal: jax.Array
    episode_end: jax.Array   # [T, E, n_role] (broadcast from the grid's flag)
    valid: jax.Array


def policy_actions(tc: TrainConfig, learners: dict, key: jax.Array, obs: jax.Array,
                   greedy: bool = False) -> tuple[jax.Array, dict]:
    """Actions int32[E, A] for the learning roles (0 elsewhere) and, per role, the
    (input, action, log_prob, value) used by the rollout."""
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    parts = {}
    for i, role in enumerate(tc.learning_roles):
        x = common.role_input(tc, role, obs)
        logits, value = learners[role].apply_fn(learners[role].params, x)
        if greedy:
            action = jnp.argmax(logits, axis=-1)
        else:
            action = jax.random.categorical(jax.random.fold_in(key, i), logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[..., None], -1)[..., 0]
        actions = actions.at[:, tc.agents_of(role)].set(action.astype(jnp.int32))
        parts[role] = (x, action, log_prob, value)
    return actions, parts


def rollout(runner: RunnerState, tc: TrainConfig, params: EnvParams
            ) -> tuple[RunnerState, dict, dict]:
    """``num_steps`` turns of every grid: new runner, per-role Trajectory, stacked finished."""
    def one_step(carry, _):
        env, key = carry
        key, k_act, k_fixed, k_env = jax.random.split(key, 4)
        actions, parts = policy_actions(tc, runner.learners, k_act, env.obs)
        actions = common.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, actions)
        env, step = common.env_step(tc, k_env, env, actions, params, tc.hp.gamma)
        out = {}
        for role, (x, action, log_prob, value) in parts.items():
            rows = tc.agents_of(role)
            learner = runner.learners[role]
            _, next_value = learner.apply_fn(learner.params,
                                             common.role_input(tc, role, step.final_obs))
            out[role] = Trajectory(
                x=x, action=action, log_prob=log_prob, value=value, next_value=next_value,
                reward=step.reward[:, rows] * tc.hp.reward_scale, agent_terminal=step.agent_terminal[:, rows],
                episode_end=jnp.broadcast_to(step.episode_end[:, None], (tc.num_envs, len(rows))),
                valid=step.valid[:, rows])
        return (env, key), (out, step.finished)

    (env, key), (trajectories, finished) = jax.lax.scan(
        one_step, (runner.env, runner.key), None, length=tc.hp.num_steps)
    return runner.replace(env=env, key=key), trajectories, finished


def gae(traj: Trajectory, gamma: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimates and value targets, [T, E, n].

    delta_t = r_t + gamma * V(final_obs_t) * (1 - agent_terminal_t) - V(s_t); the recursion
    is cut at the end of the grid's episode and at the agent's own termination.
    """
    not_terminal = 1.0 - traj.agent_terminal.astype(jnp.float32)
    delta = traj.reward + gamma * traj.next_value * not_terminal - traj.value
    carry_on = not_terminal * (1.0 - traj.episode_end.astype(jnp.float32))

    def back(next_adv, inputs):
        d, c = inputs
        adv = d + gamma * lam * c * next_adv
        return adv, adv

    _, advantages = jax.lax.scan(back, jnp.zeros_like(delta[0]), (delta, carry_on),
                                 reverse=True)
    return advantages, advantages + traj.value


# --------------------------------------------------------------------------- learning
def ppo_loss(net_params, apply_fn, hp: Hyperparams, batch: Trajectory, advantages: jax.Array,
             targets: jax.Array) -> tuple[jax.Array, dict]:
    """Clipped PPO loss over the valid entries of a minibatch [B, n]."""
    logits, value = apply_fn(net_params, batch.x)
    log_probs = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_probs, batch.action[..., None], -1)[..., 0]
    mask = batch.valid
    adv_mean = common.masked_mean(advantages, mask)
    adv_std = jnp.sqrt(common.masked_mean((advantages - adv_mean) ** 2, mask))
    adv = (advantages - adv_mean) / (adv_std + 1e-8)
    ratio = jnp.exp(log_prob - batch.log_prob)
    surrogate = jnp.minimum(ratio * adv,
                            jnp.clip(ratio, 1 - hp.clip_eps, 1 + hp.clip_eps) * adv)
    actor_loss = -common.masked_mean(surrogate, mask)
    value_clipped = batch.value + jnp.clip(value - batch.value, -hp.clip_eps, hp.clip_eps)
    value_loss = 0.5 * common.masked_mean(
        jnp.maximum((value - targets) ** 2, (value_clipped - targets) ** 2), mask)
    entropy = common.masked_mean(-(jnp.exp(log_probs) * log_probs).sum(-1), mask)
    total = actor_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    return total, {"actor_loss": actor_loss, "value_loss": value_loss, "entropy": entropy}


def learn(learner: TrainState, traj: Trajectory, hp: Hyperparams, key: jax.Array
          ) -> tuple[TrainState, dict]:
    """``update_epochs`` x ``num_minibatches`` PPO steps on one role's trajectory."""
    advantages, targets = gae(traj, hp.gamma, hp.gae_lambda)
    batch_size = traj.reward.shape[0] * traj.reward.shape[1]
    flat = jax.tree.map(lambda a: a.reshape((batch_size,) + a.shape[2:]),
                        (traj, advantages, targets))
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

    def epoch(learner, k):
        order = jax.random.permutation(k, batch_size)
        shuffled = jax.tree.map(lambda a: a[order].reshape(
            (hp.num_minibatches, -1) + a.shape[1:]), flat)

        def minibatch(learner, mb):
            batch, adv, tgt = mb
            (_, aux), grads = grad_fn(learner.params, learner.apply_fn, hp, batch, adv, tgt)
            return learner.apply_gradients(grads=grads), aux

        return jax.lax.scan(minibatch, learner, shuffled)

    learner, aux = jax.lax.scan(epoch, learner, jax.random.split(key, hp.update_epochs))
    return learner, jax.tree.map(jnp.mean, aux)


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """One rollout and one PPO update of every learning role; returns a metrics row."""
    runner, trajectories, finished = rollout(runner, tc, params)
    key, k_learn = jax.random.split(runner.key)
    learners, losses = {}, {}
    for i, role in enumerate(tc.learning_roles):
        learners[role], aux = learn(runner.learners[role], trajectories[role], tc.hp,
                                    jax.random.fold_in(k_learn, i))
        for name, value in aux.items():
            losses[f"{name}/{role}"] = value
    row = common.episode_metrics(tc, finished)
    row["losses"] = losses
    runner = runner.replace(learners=learners, key=key,
                            progress=common.advance(runner.progress, tc, row))
    return runner, row


def train(key: jax.Array, config: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """Train IPPO: pure, jittable, vmappable over ``key`` and ``params``."""
    return common.train_loop(init, update, key, config, params)


# --------------------------------------------------------------------------- policy
def policy_state(runner: RunnerState) -> dict:
    """What the greedy policy needs (and what checkpoints hold): role -> network params."""
    return {role: learner.params for role, learner in runner.learners.items()}


def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Argmax actions int32[E, A] for the learning roles (0 for the others)."""
    net = network(tc)
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    for role in tc.learning_roles:
        logits, _ = net.apply(policy[role], common.role_input(tc, role, obs))
        actions = actions.at[:, tc.agents_of(role)].set(jnp.argmax(logits, -1).astype(jnp.int32))
    return actions


def sample_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Actions int32[E, A] sampled from the learned policy (0 for the other roles)."""
    net = network(tc)
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    for i, role in enumerate(tc.learning_roles):
        logits, _ = net.apply(policy[role], common.role_input(tc, role, obs))
        action = jax.random.categorical(jax.random.fold_in(key, i), logits)
        actions = actions.at[:, tc.agents_of(role)].set(action.astype(jnp.int32))
    return actions
