"""A3C: PPAGE's asynchronous advantage actor-critic, reproduced deterministically on device.

What makes A3C itself (Mnih et al. 2016), as opposed to A2C, is that each worker computes its
n-step gradient against its own, stale copy of the shared parameters, and the workers'
updates are applied to the shared network one after another rather than averaged. PPAGE gets
that from Hogwild: ``num_workers`` CPU processes, each syncing a local copy, rolling out
``n_steps`` turns and pushing its gradient into one shared network and ``SharedAdam``.

An accelerator runs one program, not racing processes, so the same structure is made
explicit: the ``num_envs`` grids are split into ``num_workers`` equal groups (the workers).
Every round, a ``lax.scan`` over the workers lets each one roll out ``n_steps`` turns of its
grids with the parameters (and the return normaliser's statistics, PPAGE's per-rollout
snapshot) that were current ``staleness`` updates earlier, take its gradient there, and apply
it to the current shared parameters through the one shared Adam state; then the shared
normaliser folds in the worker's returns and rescales the value head (PopArt). A ring of the
last ``staleness + 1`` parameter versions provides the stale copies. With the default
staleness ``num_workers - 1`` each worker misses exactly the other workers' updates made
while it rolled out, as in a round-robin of equally fast Hogwild workers. Unlike Hogwild, the
staleness is fixed, no update is lost or torn, and runs are reproducible, jittable and
vmappable; one worker with staleness 0 is exactly the synchronous n-step actor-critic
(:func:`ppage_jax.train.kit.pg.sync_update`, which ``a2c`` runs) with the same network.

The network is PPAGE's shared-trunk ActorCriticNetwork (one per role, shared by the role's
agents), trained with PPAGE's A3C loss ``-mean(log pi * A) - entropy_coef * mean(H) +
value_coef * Huber(V, R)``, global gradient clipping and L2 weight decay on the policy head.
An update (one metrics row) is ``num_steps / n_steps`` rounds, ``num_workers`` optimiser
steps each.

``train(key, config, params) -> (runner_state, metrics)``: see ``ppage_jax/train/__init__.py``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ppage_jax.config.experiment.actor_critic import A3CHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, pg
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.pg import Learner, ReturnNormaliser
from ppage_jax.train.kit.rollout import EnvCarry
from ppage_jax.types import Replaceable

Hyperparams = A3CHyperparams
STOCHASTIC = True  # sample_actions draws from the learned policy


def network(tc: TrainConfig) -> pg.SharedTrunkNetwork:
    return pg.SharedTrunkNetwork(tc.env.num_actions, tc.hp.hidden_layers)


def optimizer(hp: A3CHyperparams) -> optax.GradientTransformation:
    return pg.shared_trunk_optimizer(hp)


def settings(hp: A3CHyperparams) -> pg.NStepSettings:
    return pg.nstep_settings(hp, hp.value_coef, pg.optimizer_settings(hp))


# --------------------------------------------------------------------------- state
@struct.dataclass
class History(Replaceable):
    """The last ``staleness + 1`` versions of one role's parameters and normaliser, stacked
    on a leading axis; ``oldest`` is the slot of the oldest (the next to be overwritten)."""

    params: Any
    norm: ReturnNormaliser
    oldest: jax.Array  # int32


@struct.dataclass
class RunnerState(Replaceable):
    learners: dict  # role -> pg.Learner: the shared network, Adam state and normaliser
    history: dict  # role -> History
    env: EnvCarry
    key: jax.Array
    progress: Progress


def _history(learner: Learner, lag: int) -> History:
    def stack(tree):
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (lag + 1,) + a.shape), tree)

    return History(stack(learner.train.params), stack(learner.norm), jnp.zeros((), jnp.int32))


def stale(history: History) -> tuple[Any, ReturnNormaliser]:
    """The oldest stored (params, normaliser): ``staleness`` updates old (or the first)."""
    return jax.tree.map(lambda a: a[history.oldest], (history.params, history.norm))


def push(history: History, learner: Learner) -> History:
    """Store the learner's new version over the oldest one."""
    slots = history.oldest

    def put(stack, value):
        return stack.at[slots].set(value)

    return History(
        jax.tree.map(put, history.params, learner.train.params),
        jax.tree.map(put, history.norm, learner.norm),
        (slots + 1) % jax.tree.leaves(history.norm)[0].shape[0],
    )


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    """The shared networks, optimiser and normalisers, their history and the grids."""
    base = pg.init_runner(tc, key, params, network(tc), optimizer(tc.hp))
    history = {role: _history(learner, tc.hp.lag) for role, learner in base.learners.items()}
    return RunnerState(base.learners, history, base.env, base.key, base.progress)


# --------------------------------------------------------------------------- workers
def _split(tree: Any, groups: int) -> Any:
    return jax.tree.map(lambda a: a.reshape((groups, a.shape[0] // groups) + a.shape[1:]), tree)


def _merge(tree: Any) -> Any:
    return jax.tree.map(lambda a: a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:]), tree)


def worker_round(
    tc: TrainConfig, learners: dict, history: dict, env: EnvCarry, key: jax.Array, params: EnvParams
) -> tuple[dict, dict, EnvCarry, dict, dict]:
    """Every worker in turn: roll out its grids with its stale copy, take the gradient there,
    apply it to the shared learner, record the new version. Returns learners, history, the
    grids, the stacked ``finished`` dicts and the losses ([workers])."""
    k = tc.hp.num_workers
    worker_tc = tc.replace(num_envs=tc.num_envs // k)
    s = settings(tc.hp)
    apply_fn = network(tc).apply
    keys = key[None] if k == 1 else jax.random.split(key, k)

    def one_worker(carry, inputs):
        learners, history = carry
        env, worker_key = inputs
        copies = {role: stale(h) for role, h in history.items()}
        env, trajectories, finished = pg.nstep_rollout(
            worker_tc,
            {role: c[0] for role, c in copies.items()},
            apply_fn,
            env,
            worker_key,
            params,
            s,
        )
        learners, history, losses = dict(learners), dict(history), {}
        for role, traj in trajectories.items():
            net_params, norm = copies[role]
            grads, raw, aux = pg.nstep_gradients(net_params, apply_fn, norm, traj, s)
            learners[role] = pg.apply_update(learners[role], grads, raw, traj.valid, s)
            history[role] = push(history[role], learners[role])
            losses.update({f"{name}/{role}": value for name, value in aux.items()})
        return (learners, history), (env, finished, losses)

    (learners, history), (env, finished, losses) = jax.lax.scan(
        one_worker, (learners, history), (_split(env, k), keys)
    )
    return learners, history, _merge(env), finished, losses


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps / n_steps`` rounds of every worker; a metrics row."""

    def one_round(carry, _):
        learners, history, env, key = carry
        key, k_round = jax.random.split(key)
        learners, history, env, finished, losses = worker_round(
            tc, learners, history, env, k_round, params
        )
        return (learners, history, env, key), (finished, losses)

    (learners, history, env, key), (finished, losses) = jax.lax.scan(
        one_round,
        (runner.learners, runner.history, runner.env, runner.key),
        None,
        length=tc.hp.num_steps // tc.hp.n_steps,
    )
    runner = runner.replace(learners=learners, history=history, env=env, key=key)
    # [rounds, workers, T, E / workers, ...] -> [rounds * T, E, ...] (the grids' order)
    finished = jax.tree.map(
        lambda a: jnp.moveaxis(a, 1, 2).reshape((-1, tc.num_envs) + a.shape[4:]), finished
    )
    return pg.finish_update(runner, tc, finished, losses)


train = loop.trainer(init, update, "A3C")


# --------------------------------------------------------------------------- policy
policy_state, greedy_actions, sample_actions = pg.policy_functions(network)
