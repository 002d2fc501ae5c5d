"""``random``: no learning; the learning roles act uniformly at random.

It runs through the same loop, metrics and evaluation as the trained algorithms, so
``ppage-jax run`` with ``algorithm: {name: random}`` gives the random baseline's run directory.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from ppage_jax.config import Field
from ppage_jax.state import EnvParams
from ppage_jax.train import common
from ppage_jax.train.common import EnvCarry, Progress, TrainConfig


@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """``experiment.algorithm.params`` of ``random``."""

    num_steps: int = 32   # turns per grid per metrics row


CHECKS = {"num_steps": Field(int, False, lambda v: v > 0, "> 0")}


def check(hp: Hyperparams, data: dict, fail) -> None:
    """No cross-key rules."""


@struct.dataclass
class RunnerState:
    env: EnvCarry
    key: jax.Array
    progress: Progress


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    k_env, key = jax.random.split(key)
    return RunnerState(common.env_reset(tc, k_env, params), key, common.progress_init())


def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Uniform random actions int32[E, A] (there is nothing greedy to do)."""
    return jax.random.randint(key, obs.shape[:2], 0, tc.env.num_actions, jnp.int32)


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps`` random turns of every grid; a metrics row with no losses."""
    def one_step(carry, _):
        env, key = carry
        key, k_act, k_fixed, k_env = jax.random.split(key, 4)
        actions = greedy_actions(tc, {}, k_act, env.obs)
        actions = common.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, actions)
        env, step = common.env_step(tc, k_env, env, actions, params, params.reward.gamma)
        return (env, key), step.finished

    (env, key), finished = jax.lax.scan(one_step, (runner.env, runner.key), None,
                                        length=tc.hp.num_steps)
    row = dict(common.episode_metrics(tc, finished), losses={})
    return RunnerState(env, key, common.advance(runner.progress, tc, row)), row


def train(key: jax.Array, config: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """Roll out the random policy: pure, jittable, vmappable over ``key`` and ``params``."""
    return common.train_loop(init, update, key, config, params)


def policy_state(runner: RunnerState) -> dict:
    return {}
