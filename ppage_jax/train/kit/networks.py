"""Network inputs: a role's scaled observations with a one-hot agent id, and the scaled global
state a centralised critic reads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.state import State
from ppage_jax.train.config import TrainConfig


def obs_scale(tc: TrainConfig) -> float:
    """The factor networks apply to observations: ``hp.obs_scale``, or by default 1 / grid
    size (coordinates and distances) and 1 for the spatial ``grid`` observation (counts)."""
    if tc.hp.obs_scale is not None:
        return tc.hp.obs_scale
    return 1.0 if tc.env.observation_shape is not None else 1.0 / tc.env.layout.size


def agent_one_hot(n: int) -> jax.Array:
    """float32[n, n]: the agent-id feature appended to each agent's observation in its role."""
    return jnp.eye(n, dtype=jnp.float32)


def with_agent_id(obs: jax.Array) -> jax.Array:
    """Append the one-hot agent id (within the role) to float[..., n, F] -> [..., n, F + n]."""
    n = obs.shape[-2]
    ids = jnp.broadcast_to(agent_one_hot(n), obs.shape[:-2] + (n, n))
    return jnp.concatenate([obs, ids], axis=-1)


def role_input(tc: TrainConfig, role: str, obs: jax.Array) -> jax.Array:
    """A role's network input: obs float[..., A, F] -> [..., n_role, F + n_role] (scaled
    observations of the role's agents with a one-hot agent id)."""
    return with_agent_id(obs[..., tc.agents_of(role), :] * obs_scale(tc))


def global_state_scale(tc: TrainConfig) -> np.ndarray:
    """float32[G]: the factor a centralised critic applies to ``env.global_state``: 1 / grid
    size on the agents' coordinates, 1 on the flags and the obstacle map."""
    n, size = tc.env.num_agents, tc.env.layout.size
    per_agent = np.tile(np.array([1.0 / size, 1.0 / size, 1.0, 1.0], np.float32), n)
    return np.concatenate([per_agent, np.ones(tc.env.global_state_size - 4 * n, np.float32)])


def critic_input(tc: TrainConfig, role: str, state: State) -> jax.Array:
    """A role's centralised-critic input from a batch of states: float[E, n_role, G + n_role]
    (the scaled ``env.global_state`` of each grid, the same for the role's agents, with each
    agent's one-hot id within the role)."""
    world = jax.vmap(tc.env.global_state)(state) * global_state_scale(tc)  # [E, G]
    n = len(tc.agents_of(role))
    return with_agent_id(jnp.broadcast_to(world[:, None, :], (world.shape[0], n, world.shape[1])))
