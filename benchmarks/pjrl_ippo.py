"""A minimal PureJaxRL-structured IPPO (and MAPPO) for ppage_jax's environment: the reference
loop ``benchmarks/train_throughput.py`` times ppage_jax's trainer against.

The structure is PureJaxRL's ``ppo.py`` (``make_train(config) -> train(rng)``): the whole run
is one function to ``jit``; each update is one step of a ``lax.scan`` that collects
``num_steps`` turns with a ``lax.scan`` (policy forward, sample, env step with auto-reset,
store the transition), bootstraps once from the value of the last observation, computes GAE
with a reverse ``lax.scan`` and runs ``update_epochs`` x ``num_minibatches`` clipped-PPO
minibatch steps with Adam (after global-norm clipping).

What is taken from ppage_jax, so that both loops do the same work on the same batch:

- the environment and its batched auto-reset (:class:`ppage_jax.wrappers.BatchedAutoResetEnv`,
  the wrapper ppage_jax's rollout steps), the roles that do not learn
  (:func:`ppage_jax.train.kit.roles.fixed_role_actions`);
- the network: ``ppage_jax.train.algorithms.ippo.network(tc)`` (the encoder chosen by
  ``hp.network``), one per learning role shared by the role's agents, each agent's input its
  scaled observation with its one-hot id in the role (``networks.role_input``); with the
  same key the initial parameters equal ppage_jax's (same key splits as ``ippo.init``);
- MAPPO: the critic reads ``networks.critic_input`` (the scaled global state and the agent's
  one-hot id), as ppage_jax's ``mappo`` does;
- the hyperparameters of ``tc.hp`` (num_steps, update_epochs, num_minibatches,
  learning_rate and anneal_lr, clip_eps, ent_coef, vf_coef, gamma, gae_lambda,
  max_grad_norm, reward_scale) and ``tc.num_envs``.

What differs from ppage_jax's ``ippo`` (the PureJaxRL way):

- bootstrap: ``V`` of the next observation the policy acts on, computed in the next step's
  forward pass (and once on the last observation), with ``done`` = the grid's episode ended
  or the agent was captured, so truncation cuts the return as in PureJaxRL; ppage_jax cuts
  only termination and bootstraps a truncated agent from its observation *before* the
  reset, which takes a value pass of its own on the steps where a grid was truncated;
- no episode statistics, no per-update metrics beyond the mean losses, reward and episodes.

Captured prey are masked out of the loss as in ppage_jax (``valid``), which costs nothing
measurable and keeps the losses comparable. Residual priors and teachers are not supported.

    import jax, ppage_jax as pj
    from ppage_jax.train import make_train_config
    from pjrl_ippo import make_train
    tc = make_train_config(pj.load_config("configs/default"))
    out = jax.jit(make_train(tc))(jax.random.PRNGKey(0))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState

from ppage_jax.train.algorithms import ippo
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import networks, roles
from ppage_jax.wrappers import BatchedAutoResetEnv

CriticInput = Callable[[TrainConfig, str, Any], jax.Array]


class Transition(NamedTuple):
    """One role's step, [E, n_role, ...] (stacked to [T, E, n_role, ...] by the scan)."""

    done: jax.Array  # the grid's episode ended, or this agent was captured
    valid: jax.Array  # not a prey captured before the step
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    x: jax.Array
    critic_x: jax.Array | None


class RunnerState(NamedTuple):
    train_states: dict  # role -> TrainState
    env_state: Any
    last_obs: jax.Array
    rng: jax.Array


class Parts(NamedTuple):
    """The reference's pieces: ``init(rng) -> RunnerState``; ``rollout(runner) -> (runner,
    {role: Transition [T, ...]}, {role: last value})``; ``learn(runner, traj, last_values)
    -> (runner, metrics)``; ``update_step(runner, _) -> (runner, metrics)`` (the body of
    ``train``'s scan)."""

    init: Callable
    rollout: Callable
    learn: Callable
    update_step: Callable
    network: Any
    env: BatchedAutoResetEnv


def critic_fn(algorithm: str) -> CriticInput | None:
    """The critic's input of ``algorithm``: None (the actor's input, ``ippo``) or the global
    state (``mappo``)."""
    if algorithm == "ippo":
        return None
    if algorithm == "mappo":
        return networks.critic_input
    raise ValueError(f"the reference loop runs ippo or mappo, not {algorithm!r}")


def _masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    mask = mask.astype(x.dtype)
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def make_parts(tc: TrainConfig, params=None) -> Parts:
    """The reference's pieces for ``tc`` (``params``: the EnvParams, default the env's)."""
    hp = tc.hp
    if hp.teacher is not None or hp.prior is not None:
        raise ValueError("the reference loop has no teacher or residual prior; set them to null")
    critic_input = critic_fn(tc.algorithm)
    params = tc.env.default_params if params is None else params
    env = BatchedAutoResetEnv(tc.env, tc.num_envs)
    net = ippo.network(tc)
    learning = tc.learning_roles
    is_prey = ~np.asarray(tc.env.is_predator, bool)
    batch_size = tc.num_envs * hp.num_steps
    if batch_size % hp.num_minibatches:
        raise ValueError(f"num_minibatches must divide num_envs * num_steps = {batch_size}")
    total_steps = tc.num_updates * hp.update_epochs * hp.num_minibatches

    def critic_x(role, state):
        return None if critic_input is None else critic_input(tc, role, state)

    def make_tx():
        lr = hp.learning_rate
        if hp.anneal_lr:  # linearly to 0 over the run's optimiser steps, as ppage_jax anneals
            lr = optax.linear_schedule(hp.learning_rate, 0.0, total_steps)
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), optax.adam(lr, eps=1e-5))

    def init(rng):
        # the key splits of ippo.init, so one key gives both loops the same start
        k_env, k_net, rng = jax.random.split(rng, 3)
        obsv, env_state = env.reset(k_env, params)
        first = jax.tree.map(lambda a: a[:1], env_state)
        train_states = {}
        for i, role in enumerate(learning):
            x = networks.role_input(tc, role, obsv[0])
            c = critic_x(role, first)
            net_params = net.init(jax.random.fold_in(k_net, i), x, None if c is None else c[0])
            train_states[role] = TrainState.create(
                apply_fn=net.apply, params=net_params, tx=make_tx()
            )
        return RunnerState(train_states, env_state, obsv, rng)

    def rollout(runner):
        def _env_step(runner, unused):
            train_states, env_state, last_obs, rng = runner
            # SELECT ACTION (the rollout's key splits are ippo.rollout's)
            rng, k_act, k_fixed, k_env = jax.random.split(rng, 4)
            actions = jnp.zeros(last_obs.shape[:2], jnp.int32)
            outs = {}
            for i, role in enumerate(learning):
                x = networks.role_input(tc, role, last_obs)
                c = critic_x(role, env_state)
                logits, value = train_states[role].apply_fn(train_states[role].params, x, c)
                action = jax.random.categorical(jax.random.fold_in(k_act, i), logits)
                log_probs = jax.nn.log_softmax(logits)
                log_prob = jnp.take_along_axis(log_probs, action[..., None], -1)[..., 0]
                actions = actions.at[:, tc.agents_of(role)].set(action.astype(jnp.int32))
                outs[role] = (x, c, action, log_prob, value)
            actions = roles.fixed_role_actions(tc, k_fixed, last_obs, env_state, params, actions)

            # STEP ENV
            valid = ~env_state.captured
            obsv, env_state, reward, terminated, truncated, info = env.step(
                k_env, env_state, actions, params
            )
            done = (terminated | truncated)[:, None] | (info["captured"] & is_prey)
            transitions = {}
            for role, (x, c, action, log_prob, value) in outs.items():
                rows = tc.agents_of(role)
                transitions[role] = Transition(
                    done[:, rows],
                    valid[:, rows],
                    action,
                    value,
                    reward[:, rows] * hp.reward_scale,
                    log_prob,
                    x,
                    c,
                )
            return RunnerState(train_states, env_state, obsv, rng), (transitions, done)

        runner, (traj_batch, _) = jax.lax.scan(_env_step, runner, None, hp.num_steps)
        # CALCULATE ADVANTAGE: one value pass on the last observation
        last_val = {}
        for role in learning:
            x = networks.role_input(tc, role, runner.last_obs)
            c = critic_x(role, runner.env_state)
            ts = runner.train_states[role]
            last_val[role] = ts.apply_fn(ts.params, x, c)[1]
        return runner, traj_batch, last_val

    def _calculate_gae(traj_batch, last_val):
        def _get_advantages(gae_and_next_value, transition):
            gae, next_value = gae_and_next_value
            done = transition.done.astype(jnp.float32)
            delta = transition.reward + hp.gamma * next_value * (1 - done) - transition.value
            gae = delta + hp.gamma * hp.gae_lambda * (1 - done) * gae
            return (gae, transition.value), gae

        _, advantages = jax.lax.scan(
            _get_advantages,
            (jnp.zeros_like(last_val), last_val),
            traj_batch,
            reverse=True,
            unroll=16,
        )
        return advantages, advantages + traj_batch.value

    def _loss_fn(net_params, apply_fn, traj_batch, gae, targets):
        # RERUN NETWORK
        logits, value = apply_fn(net_params, traj_batch.x, traj_batch.critic_x)
        log_probs = jax.nn.log_softmax(logits)
        log_prob = jnp.take_along_axis(log_probs, traj_batch.action[..., None], -1)[..., 0]
        mask = traj_batch.valid

        # CALCULATE VALUE LOSS
        value_pred_clipped = traj_batch.value + (value - traj_batch.value).clip(
            -hp.clip_eps, hp.clip_eps
        )
        value_losses = jnp.square(value - targets)
        value_losses_clipped = jnp.square(value_pred_clipped - targets)
        value_loss = 0.5 * _masked_mean(jnp.maximum(value_losses, value_losses_clipped), mask)

        # CALCULATE ACTOR LOSS
        ratio = jnp.exp(log_prob - traj_batch.log_prob)
        gae_mean = _masked_mean(gae, mask)
        gae = (gae - gae_mean) / (jnp.sqrt(_masked_mean((gae - gae_mean) ** 2, mask)) + 1e-8)
        loss_actor1 = ratio * gae
        loss_actor2 = jnp.clip(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps) * gae
        loss_actor = -_masked_mean(jnp.minimum(loss_actor1, loss_actor2), mask)
        entropy = _masked_mean(-(jnp.exp(log_probs) * log_probs).sum(-1), mask)

        total_loss = loss_actor + hp.vf_coef * value_loss - hp.ent_coef * entropy
        return total_loss, (value_loss, loss_actor, entropy)

    def _learn_role(train_state, traj_batch, last_val, rng):
        advantages, targets = _calculate_gae(traj_batch, last_val)

        def _update_epoch(update_state, unused):
            def _update_minbatch(train_state, batch_info):
                traj, adv, tgt = batch_info
                grad_fn = jax.value_and_grad(_loss_fn, has_aux=True)
                total_loss, grads = grad_fn(
                    train_state.params, train_state.apply_fn, traj, adv, tgt
                )
                train_state = train_state.apply_gradients(grads=grads)
                return train_state, total_loss

            train_state, traj_batch, advantages, targets, rng = update_state
            rng, _rng = jax.random.split(rng)
            permutation = jax.random.permutation(_rng, batch_size)
            batch = (traj_batch, advantages, targets)
            batch = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]), batch)
            shuffled_batch = jax.tree.map(lambda x: jnp.take(x, permutation, axis=0), batch)
            minibatches = jax.tree.map(
                lambda x: jnp.reshape(x, [hp.num_minibatches, -1] + list(x.shape[1:])),
                shuffled_batch,
            )
            train_state, total_loss = jax.lax.scan(_update_minbatch, train_state, minibatches)
            return (train_state, traj_batch, advantages, targets, rng), total_loss

        update_state = (train_state, traj_batch, advantages, targets, rng)
        update_state, loss_info = jax.lax.scan(_update_epoch, update_state, None, hp.update_epochs)
        return update_state[0], loss_info

    def learn(runner, traj_batch, last_val):
        rng, k_learn = jax.random.split(runner.rng)
        train_states = dict(runner.train_states)
        metrics = {}
        for i, role in enumerate(learning):
            train_states[role], (total, (value_loss, actor_loss, entropy)) = _learn_role(
                train_states[role], traj_batch[role], last_val[role], jax.random.fold_in(k_learn, i)
            )
            metrics[f"loss/{role}"] = total.mean()
            metrics[f"value_loss/{role}"] = value_loss.mean()
            metrics[f"actor_loss/{role}"] = actor_loss.mean()
            metrics[f"entropy/{role}"] = entropy.mean()
            metrics[f"reward/{role}"] = traj_batch[role].reward.mean()
        return runner._replace(train_states=train_states, rng=rng), metrics

    def update_step(runner, unused):
        runner, traj_batch, last_val = rollout(runner)
        return learn(runner, traj_batch, last_val)

    return Parts(init, rollout, learn, update_step, net, env)


def make_train(tc: TrainConfig, params=None) -> Callable[[jax.Array], dict]:
    """PureJaxRL's ``make_train``: ``train(rng) -> {"runner_state", "metrics"}``, ``init``
    then ``tc.num_updates`` update steps in a ``lax.scan`` (jit it whole)."""
    parts = make_parts(tc, params)

    def train(rng):
        runner_state = parts.init(rng)
        runner_state, metric = jax.lax.scan(parts.update_step, runner_state, None, tc.num_updates)
        return {"runner_state": runner_state, "metrics": metric}

    return train
