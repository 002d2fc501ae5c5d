"""Batched rollouts of a policy with auto-reset, summarised per finished episode."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from ppage_jax.env import GridWorld
from ppage_jax.policies import Policy
from ppage_jax.sharding import batch_sharding, make_mesh, replicated
from ppage_jax.state import EnvParams
from ppage_jax.wrappers import BatchedAutoResetEnv


def rollout_summary(env: GridWorld, policy: Policy, key: jax.Array, num_envs: int,
                    num_steps: int, params: EnvParams | None = None, *,
                    mesh: Mesh | None = None, resets_per_step: int | None = None) -> dict:
    """Run ``num_envs`` grids for ``num_steps`` turns and summarise the finished episodes.

    Returns totals over finished episodes: ``episodes``, ``terminated``, ``truncated``,
    ``captures``, ``length_sum`` and ``term_returns`` float[A, T] (undiscounted, summed over
    episodes), all as NumPy values.

    The grids auto-reset with :class:`BatchedAutoResetEnv` (``resets_per_step`` fresh
    layouts per step) and are split across the devices of ``mesh`` (default: every device,
    see :mod:`ppage_jax.sharding`); ``num_envs`` must be a multiple of the device count.
    """
    params = env.default_params if params is None else params
    mesh = make_mesh() if mesh is None else mesh
    if num_envs % mesh.devices.size:
        raise ValueError(f"num_envs={num_envs} must be a multiple of the {mesh.devices.size} "
                         f"devices of the mesh")
    auto = BatchedAutoResetEnv(env, num_envs, resets_per_step)
    split = lambda tree: jax.lax.with_sharding_constraint(tree, batch_sharding(mesh))
    n_agents, n_terms = env.num_agents, len(env.reward_terms)

    def one_step(params, carry, key):
        obs, state, running, length, totals = carry
        k_act, k_step = jax.random.split(key)
        actions = jax.vmap(policy)(split(jax.random.split(k_act, num_envs)), obs, state)
        obs, state, _, term, trunc, info = auto.step(k_step, state, actions, params)
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
    def run(key, params):
        k_reset, k_steps = jax.random.split(key)
        obs, state = split(auto.reset(k_reset, params))
        zero = jnp.zeros((), jnp.int32)
        totals = {"episodes": zero, "terminated": zero, "truncated": zero, "captures": zero,
                  "length_sum": zero,
                  "term_returns": jnp.zeros((n_agents, n_terms), jnp.float32)}
        carry = (obs, state, split(jnp.zeros((num_envs, n_agents, n_terms), jnp.float32)),
                 split(jnp.zeros(num_envs, jnp.int32)), totals)
        carry, _ = jax.lax.scan(partial(one_step, params), carry,
                                jax.random.split(k_steps, num_steps))
        return carry[-1]

    return jax.tree.map(np.asarray, run(key, jax.device_put(params, replicated(mesh))))
