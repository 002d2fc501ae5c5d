"""Actor-critic: PPAGE's one-step online TD(0) actor-critic, vectorised over grids.

PPAGE's ``ActorCritic`` (Sutton & Barto, algorithm 13.5): after every step, one gradient step
on ``I * -log pi(a|s) * delta + value_coef * Huber(V(s), target) - entropy_coef * H`` with
``target = r + gamma * (1 - terminal) * V(s')``, ``delta = target - V(s)`` held fixed and
``I = gamma ** t`` (t the step within the episode). Here every turn makes that step once per
learning role on the mean over every grid's valid transition (each with its own ``I``; a
captured prey weighs nothing), so an update (one metrics row) is ``num_steps`` gradient
steps.

- Network: PPAGE's shared trunk with a policy head and a value head, one per role shared by
  the role's agents (one-hot agent id appended). Adam with L2 weight decay on the policy head
  only (``actor_weight_decay``) and global gradient-norm clipping (``grad_clip``).
- ``normalize_returns``: PPAGE's PopArt-style normaliser. The bootstrap ``V(s')`` is
  de-normalised with the statistics before the step, the raw targets of the turn are folded
  into the running mean and std (decay ``return_norm_decay``), the value head is rescaled so
  its de-normalised outputs are unchanged, and the critic regresses the re-normalised
  target. One difference: PPAGE zeroes a terminal bootstrap before de-normalising it, which
  bootstraps on the running mean; here a terminal bootstrap is zero in raw units.
- Termination (the episode's or the prey's own capture) cuts the bootstrap; truncation
  bootstraps on ``final_obs``.

``train(key, config, params) -> (runner_state, metrics)``: see ``ppage_jax/train/__init__.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ppage_jax.config.experiment.actor_critic import ActorCriticHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, networks, optim, pg, roles, rollout
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.pg import Learner
from ppage_jax.train.kit.rollout import EnvCarry
from ppage_jax.types import Replaceable

Hyperparams = ActorCriticHyperparams
STOCHASTIC = True  # sample_actions draws from the learned policy


def network(tc: TrainConfig) -> pg.SharedTrunkNetwork:
    return pg.SharedTrunkNetwork(tc.env.num_actions, tc.hp.hidden_layers)


@struct.dataclass
class RunnerState(Replaceable):
    learners: dict  # role -> pg.Learner
    discount: dict  # role -> float32[E, n]: I = gamma ** (steps into the episode)
    env: EnvCarry
    key: jax.Array
    progress: Progress


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    """Networks, optimisers, normalisers, ``I = 1`` and the first observations."""
    hp = tc.hp
    base = pg.init_runner(tc, key, params, network(tc), pg.shared_trunk_optimizer(hp))
    discount = {
        role: jnp.ones((tc.num_envs, len(tc.agents_of(role))), jnp.float32)
        for role in base.learners
    }
    return RunnerState(base.learners, discount, base.env, base.key, base.progress)


# --------------------------------------------------------------------------- learning
@struct.dataclass
class Transition(Replaceable):
    """One turn of one role on every grid: [E, n, ...]."""

    x: jax.Array
    action: jax.Array
    reward: jax.Array  # scaled by reward_scale
    next_x: jax.Array  # input built from final_obs
    terminal: jax.Array  # float: termination or the prey's own capture
    valid: jax.Array  # float: not a captured prey before the step
    discount: jax.Array  # I


def td_loss(
    net_params: dict,
    apply_fn: Callable,
    batch: Transition,
    target: jax.Array,
    hp: ActorCriticHyperparams,
) -> tuple[jax.Array, dict]:
    """PPAGE's actor-critic loss over the valid transitions."""
    logits, value = apply_fn(net_params, batch.x)
    log_prob, entropy = pg.log_prob_entropy(logits, batch.action)
    delta = jax.lax.stop_gradient(target - value)
    mask = batch.valid
    actor = -rollout.masked_mean(batch.discount * delta * log_prob, mask)
    critic = rollout.masked_mean(optax.huber_loss(value, target, delta=1.0), mask)
    entropy = rollout.masked_mean(entropy, mask)
    total = actor + hp.value_coef * critic - hp.entropy_coef * entropy
    return total, {"actor_loss": actor, "value_loss": critic, "entropy": entropy}


def learn(learner: Learner, batch: Transition, hp: ActorCriticHyperparams) -> tuple[Learner, dict]:
    """One TD(0) actor-critic step of a role (normaliser update and PopArt rescale first,
    as PPAGE)."""
    train, norm = learner.train, learner.norm
    _, next_value = train.apply_fn(train.params, batch.next_x)
    if hp.normalize_returns:
        decay = hp.return_norm_decay
        old = pg.norm_stats(norm, decay)
        raw = batch.reward + hp.gamma * (1.0 - batch.terminal) * (next_value * old[1] + old[0])
        norm = pg.norm_observe(norm, raw, batch.valid, decay)
        new = pg.norm_stats(norm, decay)
        train = train.replace(params=pg.rescale_value_head(train.params, old, new))
        target = (raw - new[0]) / new[1]
    else:
        target = batch.reward + hp.gamma * (1.0 - batch.terminal) * next_value
    grads, aux = jax.grad(td_loss, has_aux=True)(train.params, train.apply_fn, batch, target, hp)
    train = optim.refresh(train, pg.optimizer_settings(hp))
    return Learner(train.apply_gradients(grads=grads), norm), aux


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps`` turns, each followed by one actor-critic step per learning role."""
    hp = tc.hp

    def one_step(carry, _):
        learners, discount, env, key = carry
        key, k_act, k_fixed, k_env = jax.random.split(key, 4)
        current = {role: learner.train.params for role, learner in learners.items()}
        apply_fn = network(tc).apply
        outs = pg.policy_outputs(tc, apply_fn, current, env.obs)
        chosen = pg.sample(k_act, {r: o[1] for r, o in outs.items()})
        actions = roles.fixed_role_actions(
            tc, k_fixed, env.obs, env.state, params, pg.role_actions(tc, chosen, env.obs)
        )
        env, step = rollout.env_step(tc, k_env, env, actions, params, hp.gamma)
        new_learners, new_discount, losses = {}, {}, {}
        for role, (x, _, _) in outs.items():
            rows = tc.agents_of(role)
            batch = Transition(
                x=x,
                action=chosen[role],
                reward=step.reward[:, rows] * hp.reward_scale,
                next_x=networks.role_input(tc, role, step.final_obs),
                terminal=step.agent_terminal[:, rows].astype(jnp.float32),
                valid=step.valid[:, rows].astype(jnp.float32),
                discount=discount[role],
            )
            new_learners[role], aux = learn(learners[role], batch, hp)
            new_discount[role] = jnp.where(
                step.episode_end[:, None], 1.0, discount[role] * hp.gamma
            )
            losses.update({f"{name}/{role}": value for name, value in aux.items()})
        return (new_learners, new_discount, env, key), (step.finished, losses)

    (learners, discount, env, key), (finished, losses) = jax.lax.scan(
        one_step,
        (runner.learners, runner.discount, runner.env, runner.key),
        None,
        length=hp.num_steps,
    )
    runner = runner.replace(learners=learners, discount=discount, env=env, key=key)
    return pg.finish_update(runner, tc, finished, losses)


train = loop.trainer(init, update, "the actor-critic")


# --------------------------------------------------------------------------- policy
policy_state, greedy_actions, sample_actions = pg.policy_functions(network)
