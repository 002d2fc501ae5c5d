"""A PettingZoo ``ParallelEnv`` over one grid: NumPy in and out, dicts keyed by agent name.

Needs the ``compat`` extra (``pip install "ppage_jax[compat]"``)::

    from ppage_jax.compat.pettingzoo import PettingZooEnv
    env = PettingZooEnv("configs/default", render_mode="rgb_array")
    obs, infos = env.reset(seed=0)
    while env.agents:
        actions = {a: env.action_space(a).sample() for a in env.agents}
        obs, rewards, terminations, truncations, infos = env.step(actions)
    frame = env.render()            # uint8[H, W, 3]

Agents leave ``env.agents`` when they are done: a prey on the step it is captured (it stays on
the grid, frozen, as in PPAGE), everybody when the episode terminates (captures reached the
threshold) or is truncated (``max_steps``). An agent missing from the action dict takes the
no-op, as in PPAGE; an unknown agent name, an agent that is already done, or an action outside
the agent's space raises ``ValueError``. Each agent's info holds ``reward_terms`` (its weighted
contribution per reward term), ``captured``, ``captures`` (this turn) and ``captures_total``.
"""
from __future__ import annotations

import weakref
from typing import Any, Mapping

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from pettingzoo import ParallelEnv

from ppage_jax.config import Config
from ppage_jax.env import GridWorld, make
from ppage_jax.viz.frames import DEFAULT_CELL_PX, render
from ppage_jax.state import EnvParams

RENDER_MODES = ("rgb_array",)


class PettingZooEnv(ParallelEnv):
    """PettingZoo Parallel API over a :class:`GridWorld` (a config path, Config or GridWorld)."""

    metadata = {"name": "ppage_jax_v0", "render_modes": list(RENDER_MODES), "render_fps": 4,
                "is_parallelizable": True}

    def __init__(self, env: GridWorld | Config | str | None = None,
                 params: EnvParams | None = None, render_mode: str | None = None,
                 seed: int | None = None, cell_px: int = DEFAULT_CELL_PX):
        self.env = env if isinstance(env, GridWorld) else make(env)
        if render_mode is None:
            render_mode = self.env.config["env"]["render_mode"]
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode = {render_mode!r}: must be one of "
                             f"{list(RENDER_MODES)} or None")
        self.render_mode = render_mode
        self.params = self.env.default_params if params is None else params
        self.cell_px = cell_px
        if seed is None:
            seed = self.env.config["env"]["seed"]
        self._key = jax.random.PRNGKey(0 if seed is None else seed)
        self.possible_agents = list(self.env.agent_names)
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        obs_space = gymnasium.spaces.Box(-np.inf, np.inf, (self.env.observation_size,),
                                         np.float32)
        self.observation_spaces = {a: obs_space for a in self.possible_agents}
        self.action_spaces = {a: gymnasium.spaces.Discrete(self.env.num_actions)
                              for a in self.possible_agents}
        self._reset, self._step, self._render, self._observe = _compiled(self.env, cell_px)
        self._state = None

    @property
    def grid_state(self):
        """The current :class:`State` pytree (None before the first reset)."""
        return self._state

    # --------------------------------------------------------------------- spaces
    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        return self.observation_spaces[self._check_name(agent)]

    def action_space(self, agent: str) -> gymnasium.spaces.Discrete:
        return self.action_spaces[self._check_name(agent)]

    def _check_name(self, agent: Any) -> str:
        if agent not in self._index:
            raise ValueError(f"unknown agent {agent!r}; agents: {self.possible_agents}")
        return agent

    # --------------------------------------------------------------------- API
    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """Start an episode; ``seed`` re-seeds the adapter's key (options are ignored)."""
        if seed is not None:
            self._key = jax.random.PRNGKey(seed)
        self._key, key = jax.random.split(self._key)
        obs, self._state = self._reset(key, self.params)
        self.agents = list(self.possible_agents)
        obs = np.asarray(obs)
        infos = {a: {} for a in self.agents}
        return {a: obs[i] for a, i in self._index.items()}, infos

    def step(self, actions: Mapping[str, Any]):
        """Step every live agent; returns (obs, rewards, terminations, truncations, infos)."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if not self.agents:
            raise RuntimeError("the episode is over (no agents left); call reset()")
        action_array = self._action_array(actions)
        self._key, key = jax.random.split(self._key)
        obs, self._state, reward, terminated, truncated, info = self._step(
            key, self._state, jnp.asarray(action_array), self.params)
        obs, reward = np.asarray(obs), np.asarray(reward)
        terminated, truncated = bool(terminated), bool(truncated)
        captured = np.asarray(info["captured"])
        terms = np.asarray(info["reward_terms"])
        captures, total = int(info["captures"]), int(info["captures_total"])
        live = self.agents
        observations = {a: obs[self._index[a]] for a in live}
        rewards = {a: float(reward[self._index[a]]) for a in live}
        terminations = {a: terminated or bool(captured[self._index[a]]) for a in live}
        truncations = {a: truncated for a in live}
        infos = {a: {"reward_terms": dict(zip(self.env.reward_terms,
                                              terms[self._index[a]].tolist())),
                     "captured": bool(captured[self._index[a]]),
                     "captures": captures, "captures_total": total} for a in live}
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def _action_array(self, actions: Mapping[str, Any]) -> np.ndarray:
        if not isinstance(actions, Mapping):
            raise ValueError(f"actions must be a dict keyed by agent name, got "
                             f"{type(actions).__name__}")
        array = np.full(self.env.num_agents, self.env.noop_action, np.int32)
        for agent, action in actions.items():
            self._check_name(agent)
            if agent not in self.agents:
                raise ValueError(f"agent {agent!r} is done (captured or episode over) and "
                                 f"takes no action; live agents: {self.agents}")
            value = np.asarray(action)
            if value.shape != () or not np.issubdtype(value.dtype, np.integer) or \
                    not self.action_spaces[agent].contains(np.int64(value)):
                raise ValueError(f"action {action!r} for {agent!r} is outside its space: "
                                 f"an integer in [0, {self.env.num_actions - 1}]")
            array[self._index[agent]] = int(value)
        return array

    def render(self) -> np.ndarray | None:
        """The current grid as uint8[H, W, 3] (render_mode 'rgb_array'); None without a mode."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode; pass "
                                  "render_mode='rgb_array' to get frames")
            return None
        if self._state is None:
            raise RuntimeError("call reset() before render()")
        return np.asarray(self._render(self._state))

    def state(self) -> np.ndarray:
        """Global state for centralised critics: every agent's observation, concatenated."""
        if self._state is None:
            raise RuntimeError("call reset() before state()")
        return np.asarray(self._observe(self._state)).reshape(-1)

    def close(self) -> None:
        self._state = None


_COMPILED: "weakref.WeakKeyDictionary[GridWorld, dict]" = weakref.WeakKeyDictionary()


def _compiled(env: GridWorld, cell_px: int):
    """Jitted reset, step, render and observe of ``env``, shared by every adapter over it."""
    per_env = _COMPILED.setdefault(env, {})
    if cell_px not in per_env:
        per_env[cell_px] = (jax.jit(env.reset), jax.jit(env.step),
                            jax.jit(lambda state: render(env, state, cell_px)),
                            jax.jit(env.observe))
    return per_env[cell_px]


def parallel_env(config: GridWorld | Config | str | None = None, **kwargs) -> PettingZooEnv:
    """PettingZoo-style constructor: ``parallel_env("configs/default", render_mode=...)``."""
    return PettingZooEnv(config, **kwargs)
