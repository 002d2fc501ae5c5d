"""Baseline policies. A policy is ``policy(key, obs float32[A, F], state) -> int32[A]``.

Baselines may read the full state (they are privileged reference behaviours, not learners).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from ppage_jax.env import GridWorld
from ppage_jax.state import State

Policy = Callable[[jax.Array, jax.Array, State], jax.Array]


def noop_policy(env: GridWorld) -> Policy:
    """Every agent takes the table's no-op."""
    def act(key: jax.Array, obs: jax.Array, state: State) -> jax.Array:
        return jnp.full((env.num_agents,), env.noop_action, jnp.int32)
    return act


def random_policy(env: GridWorld) -> Policy:
    """Uniformly random actions over the whole action table."""
    def act(key: jax.Array, obs: jax.Array, state: State) -> jax.Array:
        return jax.random.randint(key, (env.num_agents,), 0, env.num_actions)
    return act
