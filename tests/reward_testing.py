"""Shared fixtures of the reward tests: two static shapes, each compiled once per session.

``SHAPE_A``: 5x5, 3 predators + 2 prey, speed 1, 2 obstacles that do not block (so the
obstacle penalty is reachable); hand-built layouts go through ``reset_to``.
``SHAPE_B``: 6x6, 2 predators (speed 1) + 2 prey (speed 2, so two sub-steps per turn),
3 blocking obstacles, no cell sharing; random rollouts.
Both configure every shipped term, weight 1, default roles.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import ppage_jax as pj

SHAPING = (
    "predator_distance",
    "predator_closeness",
    "survival",
    "prey_distance",
    "capture_proximity",
    "prey_in_range",
    "predator_cohesion",
    "place_bonus",
    "potential_distance",
    "potential_prey_distance",
)
TERMS = ("base",) + SHAPING
RIGHT, YPLUS, LEFT, YMINUS, NOOP = range(5)  # discrete_5; y grows downward

COMMON = {
    "observations.type": "local_only",
    "rewards.shaping": [{"name": name, "weight": 1.0} for name in SHAPING],
    "env.termination.max_steps": 100,
}
SHAPE_A = dict(
    COMMON,
    **{
        "env.size": 5,
        "env.obstacle_percentage": 8.0,  # floor(0.08 * 25) = 2 obstacles
        "env.dynamics.block_agents_by_obstacles": False,
        "agents.predators.count": 3,
        "agents.preys.count": 2,
        "agents.preys.speed": 1,
        "env.termination.capture_threshold": 2,  # both prey (the most a threshold may be)
    },
)
SHAPE_B = dict(
    COMMON,
    **{
        "env.size": 6,
        "env.obstacle_percentage": 10.0,  # 3 obstacles
        "env.dynamics.allow_cell_sharing": False,
        "agents.predators.count": 2,
        "agents.preys.count": 2,
        "agents.preys.speed": 2,
        "env.termination.capture_threshold": 2,
        "env.termination.max_steps": 8,
    },
)


@functools.cache
def env_a() -> pj.GridWorld:
    return pj.make(pj.load_config(None, SHAPE_A))


@functools.cache
def env_b() -> pj.GridWorld:
    return pj.make(pj.load_config(None, SHAPE_B))


@functools.cache
def jit_step(env: pj.GridWorld):
    return jax.jit(env.step)


@functools.cache
def jit_reset_to(env: pj.GridWorld):
    return jax.jit(env.reset_to)


def run_turn(env: pj.GridWorld, positions, actions, obstacles, params=None, captured=None):
    """One jitted turn from a hand-built layout: (state_after, terminated, truncated,
    {term: float32[A] weighted contribution})."""
    params = env.default_params if params is None else params
    # A mid-episode state (``captured``) may hold a captured prey under a predator, which the
    # eager reset_to refuses as the start of an episode; traced, reset_to builds it as given.
    reset_to = env.reset_to if captured is None else jit_reset_to(env)
    _, state = reset_to(jnp.asarray(positions), jnp.asarray(obstacles), params)
    if captured is not None:
        state = state.replace(captured=jnp.asarray(captured, bool))
    _, after, reward, terminated, truncated, info = jit_step(env)(
        jax.random.PRNGKey(0), state, jnp.asarray(actions, jnp.int32), params
    )
    terms = np.asarray(info["reward_terms"])
    np.testing.assert_allclose(np.asarray(reward), terms.sum(axis=1), rtol=1e-6, atol=1e-5)
    return (
        after,
        bool(terminated),
        bool(truncated),
        dict(zip(env.reward_terms, terms.T, strict=True)),
    )


def with_terms(
    env: pj.GridWorld,
    params,
    weights: Mapping[str, float] | None = None,
    term_params: Mapping[str, Mapping[str, Any]] | None = None,
    gamma=None,
    capture_threshold=None,
    max_steps=None,
):
    """New traced params (never a new compile) with some values replaced."""
    if weights:
        params = env.with_weights(params, **weights)
    for term, values in (term_params or {}).items():
        params = env.with_term_params(params, term, **values)
    if gamma is not None:
        params = params.replace(reward=params.reward.replace(gamma=jnp.float32(gamma)))
    if capture_threshold is not None:
        params = params.replace(capture_threshold=jnp.int32(capture_threshold))
    if max_steps is not None:
        params = params.replace(max_steps=jnp.int32(max_steps))
    return params


def random_params(env: pj.GridWorld, rng: np.random.Generator):
    """Random traced weights, base params, credit mode, radius and gamma."""
    weights = {
        name: float(rng.choice([0.0, 1.0, rng.uniform(-2.0, 2.0)])) for name in env.reward_terms
    }
    term_params = {
        "base": {
            "credit": str(rng.choice(["full", "split", "team"])),
            "capture_reward": float(rng.uniform(1, 200)),
            "step_cost": float(rng.uniform(0, 10)),
            "captured_penalty": float(rng.uniform(0, 200)),
            "obstacle_penalty": float(rng.uniform(0, 300)),
        },
        "capture_proximity": {"radius": float(rng.choice([0.0, 1.0, 2.5]))},
    }
    return with_terms(
        env, env.default_params, weights, term_params, gamma=float(rng.choice([1.0, 0.9, 0.99]))
    )
