"""The dict-keyed JAX API of JaxMARL's ``MultiAgentEnv``, so JaxMARL-style baselines run as is.

::

    from ppage_jax.compat.jaxmarl import JaxMARLEnv
    env = JaxMARLEnv("configs/1v1")
    obs, state = env.reset(key)                     # obs: {agent: float32[obs_size]}
    actions = {a: env.action_space(a).sample(k) for a, k in zip(env.agents, keys)}
    obs, state, rewards, dones, infos = env.step(key, state, actions)
    dones["__all__"]                                # the episode ended (and auto-reset)

As in JaxMARL, ``step`` auto-resets: when ``dones["__all__"]`` is True the returned obs and
state are those of a fresh episode. ``dones[agent]`` is True for the whole episode's end and
for a prey from the step it is captured. An agent missing from the action dict takes the
no-op; an unknown agent name raises ``ValueError`` (names are static); an action index outside
the table is a no-op inside jitted code. Every info value is an array of shape [A] (``captured``,
``terminated``, ``truncated``, ``reward_terms/<term>``), so baselines can reshape infos to
``NUM_ACTORS``; with ``final_obs=True`` infos also hold ``final_obs`` float32[A, obs_size],
the finished episode's last observation (to bootstrap on truncation). ``step`` and ``reset``
are pure: ``jit`` and ``vmap`` them.
"""
from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

from ppage_jax.config import Config
from ppage_jax.env import GridWorld, make
from ppage_jax.state import EnvParams, State
from ppage_jax.wrappers import AutoResetEnv


class Discrete:
    """Integers in [0, n) (JaxMARL/gymnax ``Discrete``)."""

    def __init__(self, num_categories: int, dtype=jnp.int32):
        self.n = num_categories
        self.shape = ()
        self.dtype = dtype

    def sample(self, rng: jax.Array) -> jax.Array:
        return jax.random.randint(rng, self.shape, 0, self.n).astype(self.dtype)

    def contains(self, x: jax.Array) -> jax.Array:
        return jnp.logical_and(x >= 0, x < self.n)


class Box:
    """Arrays of a fixed shape within [low, high] (JaxMARL/gymnax ``Box``)."""

    def __init__(self, low, high, shape: tuple[int, ...], dtype=jnp.float32):
        self.low, self.high, self.shape, self.dtype = low, high, tuple(shape), dtype

    def sample(self, rng: jax.Array) -> jax.Array:
        low = jnp.maximum(jnp.asarray(self.low, jnp.float32), -1e6)
        high = jnp.minimum(jnp.asarray(self.high, jnp.float32), 1e6)
        return jax.random.uniform(rng, self.shape, minval=low, maxval=high).astype(self.dtype)

    def contains(self, x: jax.Array) -> jax.Array:
        return jnp.logical_and(jnp.all(x >= self.low), jnp.all(x <= self.high))


class JaxMARLEnv:
    """JaxMARL ``MultiAgentEnv`` API over a :class:`GridWorld` with fixed :class:`EnvParams`.

    ``env`` may be a GridWorld, a Config or a config path; ``params`` defaults to
    ``env.default_params`` (for sweeps over params use the native, stacked API).
    ``final_obs=True`` adds the finished episode's last observation to the infos.
    """

    def __init__(self, env: GridWorld | Config | str | None = None,
                 params: EnvParams | None = None, final_obs: bool = False):
        self.env = env if isinstance(env, GridWorld) else make(env)
        self.final_obs = final_obs
        self.params = self.env.default_params if params is None else params
        self._auto = AutoResetEnv(self.env)
        self.agents = list(self.env.agent_names)
        self.num_agents = len(self.agents)
        self.agent_classes = {
            "predators": [a for a, p in zip(self.agents, self.env.is_predator) if p],
            "prey": [a for a, p in zip(self.agents, self.env.is_predator) if not p]}
        obs_space = Box(-jnp.inf, jnp.inf, (self.env.observation_size,))
        self.observation_spaces = {a: obs_space for a in self.agents}
        self.action_spaces = {a: Discrete(self.env.num_actions) for a in self.agents}

    @property
    def name(self) -> str:
        return "ppage_jax"

    def observation_space(self, agent: str) -> Box:
        return self.observation_spaces[self._check_name(agent)]

    def action_space(self, agent: str) -> Discrete:
        return self.action_spaces[self._check_name(agent)]

    def _check_name(self, agent: str) -> str:
        if agent not in self.action_spaces:
            raise ValueError(f"unknown agent {agent!r}; agents: {self.agents}")
        return agent

    # ------------------------------------------------------------------ conversions
    def actions_to_array(self, actions: Mapping[str, jax.Array]) -> jax.Array:
        """int32[A] in agent row order; a missing agent gets the no-op."""
        for agent in actions:
            self._check_name(agent)
        noop = jnp.asarray(self.env.noop_action, jnp.int32)
        return jnp.stack([jnp.asarray(actions.get(a, noop), jnp.int32).reshape(())
                          for a in self.agents])

    def to_dict(self, array: jax.Array) -> dict[str, jax.Array]:
        """Split an array with a leading agent axis into {agent: row}."""
        return {a: array[i] for i, a in enumerate(self.agents)}

    # ------------------------------------------------------------------ API
    def reset(self, key: jax.Array) -> tuple[dict[str, jax.Array], State]:
        """(obs {agent: float32[obs_size]}, state)."""
        obs, state = self.env.reset(key, self.params)
        return self.to_dict(obs), state

    def step(self, key: jax.Array, state: State, actions: Mapping[str, jax.Array],
             reset_state: State | None = None):
        """One turn with auto-reset: (obs, state, rewards, dones, infos), dicts by agent.

        ``reset_state`` (as in JaxMARL) replaces the freshly drawn start state when the
        episode ends.
        """
        obs, state, reward, terminated, truncated, info = self._auto.step(
            key, state, self.actions_to_array(actions), self.params)
        done = terminated | truncated
        if reset_state is not None:
            state = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, state)
            obs = jnp.where(done, self.env.observe(reset_state), obs)
        agent_done = done | info["captured"]
        dones = dict(self.to_dict(agent_done), __all__=done)
        infos = {"captured": info["captured"],
                 "terminated": jnp.broadcast_to(terminated, (self.num_agents,)),
                 "truncated": jnp.broadcast_to(truncated, (self.num_agents,))}
        for t, term in enumerate(self.env.reward_terms):
            infos[f"reward_terms/{term}"] = info["reward_terms"][:, t]
        if self.final_obs:
            infos["final_obs"] = info["final_obs"]
        return self.to_dict(obs), state, self.to_dict(reward), dones, infos

    def get_avail_actions(self, state: State) -> dict[str, jax.Array]:
        """Every action is always available: {agent: ones float32[num_actions]}."""
        del state
        ones = jnp.ones(self.env.num_actions, jnp.float32)
        return {a: ones for a in self.agents}

    def get_obs(self, state: State) -> dict[str, jax.Array]:
        return self.to_dict(self.env.observe(state))
