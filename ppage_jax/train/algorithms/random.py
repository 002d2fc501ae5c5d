"""``random``: no learning; the learning roles act uniformly at random.

It runs through the same loop, metrics and evaluation as the trained algorithms, so
``ppage-jax run`` with ``algorithm: {name: random}`` gives the random baseline's run directory.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from ppage_jax.config.experiment.random import RandomHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, roles, rollout
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.rollout import EnvCarry
from ppage_jax.types import Replaceable

Hyperparams = RandomHyperparams
STOCHASTIC = False


@struct.dataclass
class RunnerState(Replaceable):
    env: EnvCarry
    key: jax.Array
    progress: Progress


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    k_env, key = jax.random.split(key)
    return RunnerState(rollout.env_reset(tc, k_env, params), key, loop.progress_init())


def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Uniform random actions int32[E, A] (there is nothing greedy to do)."""
    return jax.random.randint(key, obs.shape[:2], 0, tc.env.num_actions, jnp.int32)


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps`` random turns of every grid; a metrics row with no losses."""

    def one_step(carry, _):
        env, key = carry
        key, k_act, k_fixed, k_env = jax.random.split(key, 4)
        actions = greedy_actions(tc, {}, k_act, env.obs)
        actions = roles.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, actions)
        env, step = rollout.env_step(tc, k_env, env, actions, params, params.reward.gamma)
        return (env, key), step.finished

    (env, key), finished = jax.lax.scan(
        one_step, (runner.env, runner.key), None, length=tc.hp.num_steps
    )
    row = dict(loop.episode_metrics(tc, finished), losses={})
    return RunnerState(env, key, loop.advance(runner.progress, tc, row)), row


train = loop.trainer(init, update, "the random baseline (no learning)")


def policy_state(runner: RunnerState) -> dict:
    return {}
