"""Batched rollouts of a policy with auto-reset, summarised per finished episode."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.env import GridWorld
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams
from ppage_jax.wrappers import AutoResetEnv



def rollout_summary(env: GridWorld, policy: Policy, key: jax.Array, num_envs: int,
                    num_steps: int, params: EnvParams | None = None) -> dict:
    """Run ``num_envs`` grids for ``num_steps`` turns and summarise the finished episodes.

    Returns totals over finished episodes: ``episodes``, ``terminated``, ``truncated``,
    ``captures``, ``length_sum`` and ``term_returns`` float[A, T] (undiscounted, summed over
    episodes), all as NumPy values.
    """
    params = env.default_params if params is None else params
    auto = AutoResetEnv(env)
    n_agents, n_terms = env.num_agents, len(env.reward_terms)

    def one_step(carry, key):
        obs, state, running, length, totals = carry
        k_act, k_step = jax.random.split(key)
        actions = jax.vmap(policy)(jax.random.split(k_act, num_envs), obs, state)
        obs, state, _, term, trunc, info = jax.vmap(auto.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k_step, num_envs), state, actions, params)
        running = running + info["reward_terms"]
        length = length + 1
        done = term | trunc
        d = done.astype(jnp.float32)
        totals = {
            "episodes": totals["episodes"] + done.sum(),
            "terminated": totals["terminated"] + term.sum(),
            "truncated": totals["truncated"] + (trunc & ~term).sum(),
            "captures": totals["captures"] + jnp.where(done, info["captures_total"], 0).sum(),
            "length_sum": totals["length_sum"] + jnp.where(done, length, 0).sum(),
            "term_returns": totals["term_returns"] + (running * d[:, None, None]).sum(0),
        }
        running = running * (1.0 - d)[:, None, None]
        length = jnp.where(done, 0, length)
        return (obs, state, running, length, totals), None

    @jax.jit
    def run(key):
        k_reset, k_steps = jax.random.split(key)
        obs, state = jax.vmap(auto.reset, in_axes=(0, None))(
            jax.random.split(k_reset, num_envs), params)
        zero = jnp.zeros((), jnp.int32)
        totals = {"episodes": zero, "terminated": zero, "truncated": zero, "captures": zero,
                  "length_sum": zero,
                  "term_returns": jnp.zeros((n_agents, n_terms), jnp.float32)}
        carry = (obs, state, jnp.zeros((num_envs, n_agents, n_terms), jnp.float32),
                 jnp.zeros(num_envs, jnp.int32), totals)
        carry, _ = jax.lax.scan(one_step, carry, jax.random.split(k_steps, num_steps))
        return carry[-1]

    return jax.tree.map(np.asarray, run(key))
