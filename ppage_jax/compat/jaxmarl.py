"""The dict-keyed JAX API of JaxMARL's ``MultiAgentEnv``, so JaxMARL baselines run as is.

::

    from ppage_jax.compat.jaxmarl import JaxMARLEnv
    env = JaxMARLEnv("1v1", overrides={"env.size": 8})  # or JaxMARLEnv("1v1", env={"size": 8})
    obs, state = env.reset(key)                     # obs: {agent: float32[obs_size]}
    actions = {a: env.action_space(a).sample(k) for a, k in zip(env.agents, keys)}
    obs, state, rewards, dones, infos = env.step(key, state, actions)
    dones["__all__"]                                # the episode ended (and auto-reset)

As in JaxMARL, ``step`` auto-resets: when ``dones["__all__"]`` is True the returned obs and
state are those of a fresh episode. ``dones[agent]`` is True for the whole episode's end and
for a prey from the step it is captured. An agent missing from the action dict takes the
no-op; actions are checked as ``GridWorld.step`` checks them (one integer scalar per agent:
a float, NaN or another shape raises TypeError / ValueError naming the agent, also under
``jit``; an unknown agent name raises ``ValueError``); an action index outside the table raises
``ValueError`` when concrete and is a no-op inside jitted code. ``step`` and ``reset`` are
pure: ``jit`` and ``vmap`` them.

Every info leaf has shape [A] (``captured``, ``terminated``, ``truncated``,
``reward_terms/<term>``), so the baselines' ``info.reshape(NUM_ACTORS)`` works. Options:

- ``final_obs=True``: ``infos["final_obs"]`` holds the finished episode's last observation as
  a tuple of ``obs_size`` columns float32[A] (a form that reshape accepts);
  :meth:`JaxMARLEnv.stack_final_obs` turns it back into float32[..., obs_size].
- ``world_state=True``: ``obs["world_state"]`` float32[A, state_size], the global state
  repeated per agent as JaxMARL's MAPPO world-state wrappers build it; ``state_size`` and
  ``get_state(state)`` give it without the option.
- ``action_masks=True``: ``get_avail_actions`` returns the moves that change the agent's cell
  (:meth:`GridWorld.action_mask`); off (as PPAGE), every action is available.

Spaces are JaxMARL's classes when ``jaxmarl`` is installed (else gymnax's, else look-alikes),
so its ``LogWrapper`` and ``CTRolloutManager`` accept them; observation bounds are the real
ones of the builder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from ppage_jax.compat.bounds import observation_bounds
from ppage_jax.compat.jax_spaces import Box, Discrete, space_classes
from ppage_jax.compat.spec import ConfigLike, grid_world, resolve
from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams, State
from ppage_jax.wrappers import AutoResetEnv

__all__ = ["Box", "Discrete", "JaxMARLEnv"]


class JaxMARLEnv:
    """JaxMARL ``MultiAgentEnv`` API over a :class:`GridWorld` with fixed :class:`EnvParams`.

    ``config`` may be a GridWorld, an EnvSpec, a Config, a config path or shipped name, or
    None (the defaults). Config overrides (for a config, not a GridWorld or EnvSpec) come as
    ``overrides={"env.size": 8}`` and/or as keyword arguments (``env={"size": 8}``,
    ``**{"env.size": 8}``), as a hydra ``ENV_KWARGS`` passes them. ``params`` defaults to
    ``env.default_params`` (for sweeps over params use the native, stacked API). ``spaces``
    picks the space classes (see ``space_classes``).
    """

    def __init__(
        self,
        config: ConfigLike = None,
        /,
        params: EnvParams | None = None,
        *,
        final_obs: bool = False,
        world_state: bool = False,
        action_masks: bool = False,
        spaces: str = "auto",
        overrides: Mapping[str, Any] | None = None,
        **config_overrides: Any,
    ):
        overrides = {**(overrides or {}), **config_overrides}
        if isinstance(config, GridWorld) and not overrides:
            self.env = config
        else:
            resolved, spec = resolve(config, overrides)
            self.env = grid_world(spec, resolved)
        self.final_obs, self.world_state, self.action_masks = final_obs, world_state, action_masks
        self.params = self.env.default_params if params is None else params
        self._auto = AutoResetEnv(self.env)
        self.agents = list(self.env.agent_names)
        self.num_agents = len(self.agents)
        predator = dict(zip(self.agents, self.env.is_predator.tolist(), strict=True))
        self.agent_classes = {
            "predators": [a for a in self.agents if predator[a]],
            "prey": [a for a in self.agents if not predator[a]],
        }
        discrete, box = space_classes(spaces)
        low, high = observation_bounds(self.env)
        obs_space = box(low, high, (self.env.observation_size,))
        self.observation_spaces = {a: obs_space for a in self.agents}
        self.action_spaces = {a: discrete(self.env.num_actions) for a in self.agents}

    @property
    def name(self) -> str:
        return "ppage_jax"

    @property
    def state_size(self) -> int:
        """Length of :meth:`get_state` (the global state for centralised critics)."""
        return self.env.global_state_size

    def world_state_size(self) -> int:
        """Length of ``obs["world_state"]`` rows (as JaxMARL's MAPPO wrappers name it)."""
        return self.state_size

    def observation_space(self, agent: str):
        return self.observation_spaces[self._check_name(agent)]

    def action_space(self, agent: str):
        return self.action_spaces[self._check_name(agent)]

    def _check_name(self, agent: str) -> str:
        if agent not in self.action_spaces:
            raise ValueError(f"unknown agent {agent!r}; agents: {self.agents}")
        return agent

    # ------------------------------------------------------------------ conversions
    def actions_to_array(self, actions: Mapping[str, jax.Array]) -> jax.Array:
        """int32[A] in agent row order, checked as ``GridWorld.step`` checks actions
        (``GridWorld.actions_from_dict``, ``GridWorld.action_rows``): a missing agent gets the
        no-op; a value that is not an integer scalar raises TypeError / ValueError naming the
        agent, also under ``jit``; a concrete value outside the table raises ValueError, a
        traced one is the no-op."""
        return self.env.action_rows(self.env.actions_from_dict(actions))

    def to_dict(self, array: jax.Array) -> dict[str, jax.Array]:
        """Split an array with a leading agent axis into {agent: row}."""
        return {a: array[i] for i, a in enumerate(self.agents)}

    @staticmethod
    def stack_final_obs(columns: tuple[jax.Array, ...]) -> jax.Array:
        """``infos["final_obs"]`` (columns [...]) as one array float32[..., obs_size]."""
        return jnp.stack(columns, axis=-1)

    def _obs_dict(self, obs: jax.Array, state: State) -> dict[str, jax.Array]:
        out = self.to_dict(obs)
        if self.world_state:
            out["world_state"] = jnp.broadcast_to(
                self.get_state(state), (self.num_agents, self.state_size)
            )
        return out

    # ------------------------------------------------------------------ API
    def reset(self, key: jax.Array) -> tuple[dict[str, jax.Array], State]:
        """(obs {agent: float32[obs_size]}, state)."""
        obs, state = self.env.reset(key, self.params)
        return self._obs_dict(obs, state), state

    def step(
        self,
        key: jax.Array,
        state: State,
        actions: Mapping[str, jax.Array],
        reset_state: State | None = None,
    ):
        """One turn with auto-reset: (obs, state, rewards, dones, infos), dicts by agent.

        ``reset_state`` (as in JaxMARL) replaces the freshly drawn start state when the
        episode ends.
        """
        obs, state, reward, terminated, truncated, info = self._auto.step(
            key, state, self.actions_to_array(actions), self.params
        )
        done = terminated | truncated
        if reset_state is not None:
            state = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, state)
            obs = jnp.where(done, self.env.observe(reset_state, self.params), obs)
        agent_done = done | info["captured"]
        dones = dict(self.to_dict(agent_done), __all__=done)
        infos = {
            "captured": info["captured"],
            "terminated": jnp.broadcast_to(terminated, (self.num_agents,)),
            "truncated": jnp.broadcast_to(truncated, (self.num_agents,)),
        }
        for t, term in enumerate(self.env.reward_terms):
            infos[f"reward_terms/{term}"] = info["reward_terms"][:, t]
        if self.final_obs:
            final = info["final_obs"]
            infos["final_obs"] = tuple(final[:, f] for f in range(final.shape[1]))
        return self._obs_dict(obs, state), state, self.to_dict(reward), dones, infos

    def get_state(self, state: State) -> jax.Array:
        """float32[state_size]: the global state (``GridWorld.global_state``)."""
        return self.env.global_state(state)

    def get_avail_actions(self, state: State) -> dict[str, jax.Array]:
        """{agent: uint8[num_actions]}, 1 = available: the moves that change the agent's cell
        with ``action_masks=True`` (the no-op always), every action otherwise."""
        if self.action_masks:
            mask = self.env.action_mask(state, self.params).astype(jnp.uint8)
        else:
            mask = jnp.ones((self.num_agents, self.env.num_actions), jnp.uint8)
        return self.to_dict(mask)

    def get_obs(self, state: State) -> dict[str, jax.Array]:
        return self._obs_dict(self.env.observe(state, self.params), state)
