"""Shared setup of the training tests: a tiny task every algorithm must learn.

Two speed-1 predators start at (0, 0) and (1, 0) on an empty 5x5 grid; the prey starts at
(3, 4) with stamina 0, so it can never move (while still being a learning agent). The nearest
predator needs 6 turns; an episode is cut at 20. Observations are ``local_only`` (own x, y,
captured flag), enough for a fixed start. Untrained greedy policies wander or stand still
(zero Q-tables pick action 0, "right", forever) and never capture within 20 turns.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

import ppage_jax as pj
from ppage_jax.episodes import episode_keys, play_episodes
from ppage_jax.train import algorithm, make_train_config
from ppage_jax.train.evaluate import matchup_policy

OPTIMAL_STEPS = 6
MAX_STEPS = 20


def tiny_config(algo: str, params: dict | None = None, total_timesteps: int = 20_000, **overrides):
    """The tiny task's Config for ``algo`` with hyperparameters ``params``."""
    base = {
        "env.size": 5,
        "env.obstacle_percentage": 0.0,
        "env.termination.capture_threshold": 1,
        "env.termination.max_steps": MAX_STEPS,
        "env.starts": [[0, 0], [1, 0], [3, 4]],
        "agents.predators": {"count": 2, "speed": 1, "stamina": None},
        "agents.preys": {"count": 1, "speed": 1, "stamina": 0},
        "observations.type": "local_only",
        "observations.params": {},
        "experiment.algorithm": {"name": algo, "params": dict(params or {})},
        "experiment.num_envs": 16,
        "experiment.total_timesteps": total_timesteps,
        "experiment.eval": {"episodes": 4, "seed": 1000, "max_steps": None},
    }
    base.update(overrides)
    return pj.load_config(None, base)


def seeds(n: int = 2) -> jax.Array:
    return jax.vmap(jax.random.PRNGKey)(jnp.arange(n))


def train_seeds(tc, n: int = 2, params=None):
    """``jit(vmap(train))`` over ``n`` seeds: (runner_state, metrics), leading seed axis.
    ``params`` (default: the env's) is traced: new values reuse the compiled program."""
    params = tc.env.default_params if params is None else params
    return vmapped_train(tc.algorithm)(seeds(n), tc, params)


@functools.cache
def vmapped_train(name: str):
    return jax.jit(jax.vmap(algorithm(name).train, in_axes=(0, None, None)))


def greedy_lengths(tc, policies) -> tuple[jax.Array, jax.Array]:
    """Per seed (leading axis of ``policies``): mean episode length and capture rate of the
    greedy policy on 4 evaluation episodes."""
    return _greedy_evaluator(tc)(policies)


@functools.cache
def _greedy_evaluator(tc):
    params = tc.env.default_params
    keys = episode_keys(1000, 4)

    def one(policy):
        greedy = matchup_policy(tc, policy, params, "greedy", "greedy")
        out = play_episodes(tc.env, greedy, keys, params)
        return out["episode_length"].astype(jnp.float32).mean(), out["captured"].astype(
            jnp.float32
        ).mean()

    return jax.jit(jax.vmap(one))


def untrained_policies(tc, n: int = 2):
    module = algorithm(tc.algorithm)
    params = tc.env.default_params
    return jax.jit(jax.vmap(lambda k: module.policy_state(module.init(k, tc, params))))(seeds(n))


__all__ = [
    "MAX_STEPS",
    "OPTIMAL_STEPS",
    "greedy_lengths",
    "make_train_config",
    "seeds",
    "tiny_config",
    "train_seeds",
    "untrained_policies",
]
