"""Auto-reset: a finished episode restarts inside `step`, keeping its final observation."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams, State


class AutoResetEnv:
    """gymnax-style auto-reset around a GridWorld (one grid; vmap it for a batch).

    When a step ends the episode (terminated or truncated), the returned obs and state are
    those of a fresh episode; the last observation of the finished one is kept in
    ``info["final_obs"]`` and ``terminated``/``truncated`` are reported as they were.
    """

    def __init__(self, env: GridWorld):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, key: jax.Array, params: EnvParams | None = None):
        return self.env.reset(key, params)

    def step(self, key: jax.Array, state: State, actions: jax.Array,
             params: EnvParams | None = None):
        obs, state, reward, terminated, truncated, info = self.env.step(key, state, actions,
                                                                        params)
        reset_obs, reset_state = self.env.reset(key, params)
        done = terminated | truncated
        info = dict(info, final_obs=obs)
        state = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, state)
        obs = jnp.where(done, reset_obs, obs)
        return obs, state, reward, terminated, truncated, info
