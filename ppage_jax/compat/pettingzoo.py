"""PettingZoo views of one grid: a ``ParallelEnv`` (:class:`PettingZooEnv`) and module-level
``parallel_env()``, ``env()`` and ``raw_env()`` as PettingZoo's own environments have.

Needs the ``compat`` extra (``pip install "ppage_jax[compat]"``)::

    from ppage_jax.compat import pettingzoo as ppage
    env = ppage.parallel_env("default", max_cycles=100, render_mode="rgb_array")
    obs, infos = env.reset(seed=0)
    while env.agents:
        actions = {a: env.action_space(a).sample() for a in env.agents}
        obs, rewards, terminations, truncations, infos = env.step(actions)
    frame = env.render()            # uint8[H, W, 3]
    aec = ppage.env("default")      # the AEC API (PettingZoo's parallel_to_aec)

Agents leave ``env.agents`` when they are done: a prey on the step it is captured (it stays on
the grid, frozen, as in PPAGE), everybody when the episode terminates (captures reached the
threshold) or is truncated (``max_steps``, which ``max_cycles`` sets). An agent missing from
the action dict takes the no-op, as in PPAGE; an unknown agent name, an agent that is already
done, or an action outside the agent's space raises ``ValueError``, an action that is not an
integer scalar (a float, NaN, an array) ``TypeError`` or ``ValueError``: the checks of
``GridWorld.step`` (``GridWorld.actions_from_dict``, ``GridWorld.action_rows``). Each agent's
info holds ``reward_terms`` (its weighted contribution per reward term), ``captured``,
``captures`` (this turn) and ``captures_total``, and with ``action_masks=True`` an
``action_mask`` int8[n_actions] (1 = the move changes the agent's cell; the no-op is always 1),
the key AgileRL reads (Tianshou reads masks from a dict observation: see
``benchmarks/tianshou_dqn.py``).
Observations are writable float32 NumPy arrays inside their ``Box``, whose bounds are the real
ones of the builder; ``state()`` is the global state, inside ``state_space``.

Construction creates no JAX array (the grid is built on the first ``reset``), so a process
may build adapters and then fork vector-env workers (SuperSuit's ``concat_vec_envs_v1``,
AgileRL's async vector envs) under the default ``fork`` start method. Passing a built
``GridWorld`` instead of a config gives up that guarantee (building it starts JAX); an
``EnvSpec`` keeps it.
"""

from __future__ import annotations

import importlib.util
import weakref
from collections.abc import Mapping
from typing import Any, cast

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils import wrappers
from pettingzoo.utils.conversions import parallel_to_aec_wrapper

from ppage_jax.compat.bounds import global_state_bounds, observation_bounds
from ppage_jax.compat.spec import ConfigLike, facts_of, grid_facts, grid_world, resolve
from ppage_jax.compat.window import Window
from ppage_jax.defaults import DEFAULT_CELL_PX, defaults
from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams, State
from ppage_jax.viz.frames import render

RENDER_MODES = ("human", "rgb_array")


class PettingZooEnv(ParallelEnv):
    """PettingZoo Parallel API over a grid.

    ``config`` is a config path or shipped name, a Config, None (the defaults), an EnvSpec or
    a built GridWorld (``config`` is then None and ``seed``, ``render_mode`` and the window
    size default to the package defaults). Config overrides come as
    ``overrides={"env.size": 8}`` and/or keyword arguments (``env={"size": 8}``), for a
    config only; ``max_cycles`` sets ``env.termination.max_steps`` (the spec's
    ``max_steps``). ``spec`` is the grid's EnvSpec. ``render_mode`` is ``"rgb_array"``
    (``render()`` returns frames), ``"human"`` (a pygame window, drawn on every reset and
    step) or None (the config's ``env.render_mode``).
    ``action_masks=True`` adds ``info["action_mask"]`` (PPAGE itself does not mask).
    """

    metadata = {
        "name": "ppage_jax_v0",
        "render_modes": list(RENDER_MODES),
        "render_fps": 4,
        "is_parallelizable": True,
    }

    def __init__(
        self,
        config: ConfigLike = None,
        /,
        params: EnvParams | None = None,
        *,
        render_mode: str | None = None,
        seed: int | None = None,
        cell_px: int = DEFAULT_CELL_PX,
        max_cycles: int | None = None,
        action_masks: bool = False,
        overrides: Mapping[str, Any] | None = None,
        **config_overrides: Any,
    ):
        overrides = {**(overrides or {}), **config_overrides}
        self.config, self.spec = resolve(config, overrides, max_steps=max_cycles)
        self._grid: GridWorld | None = None
        if isinstance(config, GridWorld) and max_cycles is None:
            self._grid = config
        spec = facts_of(self._grid) if self._grid else grid_facts(self.spec, self.config)
        if render_mode is None:
            render_mode = self._setting("render_mode")
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode = {render_mode!r}: must be one of {list(RENDER_MODES)} or None"
            )
        if render_mode == "human" and importlib.util.find_spec("pygame") is None:
            raise ImportError('render_mode="human" needs pygame: pip install "ppage_jax[compat]"')
        self.render_mode = render_mode
        self.cell_px = cell_px
        self.action_masks = action_masks
        self.layout = spec.layout
        self.reward_terms = spec.reward_terms
        self.noop_action, self.num_actions = spec.noop_action, spec.num_actions
        if seed is None:
            seed = self._setting("seed")
        self._seed = 0 if seed is None else int(seed)
        self._params = params
        self._key: jax.Array | None = None
        self._state: State | None = None
        self._window: Window | None = None
        self.possible_agents = list(spec.agent_names)
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        low, high = observation_bounds(spec)
        obs_space = gymnasium.spaces.Box(low, high, (spec.observation_size,), np.float32)
        self.observation_spaces = {a: obs_space for a in self.possible_agents}
        self.action_spaces = {
            a: gymnasium.spaces.Discrete(spec.num_actions) for a in self.possible_agents
        }
        low, high = global_state_bounds(spec.layout)
        self.state_space = gymnasium.spaces.Box(low, high, low.shape, np.float32)

    # --------------------------------------------------------------------- lazy grid
    @property
    def env(self) -> GridWorld:
        """The GridWorld (built on first use, in the process that uses it)."""
        if self._grid is None:
            self._grid = grid_world(self.spec, self.config)
        return self._grid

    def _setting(self, key: str) -> Any:
        """A PPAGE key of the env section outside the spec (``render_mode``, ``seed``,
        ``window_size``): the config's, else (built from a GridWorld or EnvSpec) the package
        default."""
        env = defaults()["env"] if self.config is None else self.config["env"]
        return env[key]

    @property
    def params(self) -> EnvParams:
        """The EnvParams stepped with (the GridWorld's defaults unless given)."""
        if self._params is None:
            self._params = self.env.default_params
        return self._params

    @property
    def grid_state(self) -> State | None:
        """The current :class:`State` pytree (None before the first reset)."""
        return self._state

    def __getstate__(self) -> dict:
        """Pickle (vector-env workers) without the grid, jitted functions or window; arrays
        travel as NumPy and the grid is rebuilt from the config where it is used."""
        state = dict(self.__dict__)
        state.update(
            _grid=None,
            _window=None,
            _key=_host(state["_key"]),
            _state=_host(state["_state"]),
            _params=_host(state["_params"]),
        )
        return state

    # --------------------------------------------------------------------- spaces
    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        return cast(gymnasium.spaces.Box, self.observation_spaces[self._check_name(agent)])

    def action_space(self, agent: str) -> gymnasium.spaces.Discrete:
        return cast(gymnasium.spaces.Discrete, self.action_spaces[self._check_name(agent)])

    def _check_name(self, agent: Any) -> str:
        if agent not in self._index:
            raise ValueError(f"unknown agent {agent!r}; agents: {self.possible_agents}")
        return agent

    # --------------------------------------------------------------------- API
    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """Start an episode; ``seed`` re-seeds the adapter's key (options are ignored)."""
        if seed is not None or self._key is None:
            self._key = jax.random.PRNGKey(self._seed if seed is None else seed)
        self._key, key = jax.random.split(self._key)
        fns = _compiled(self.env, self.cell_px)
        obs, self._state, mask = fns.reset(key, self.params)
        obs, mask = np.array(obs), np.asarray(mask)
        self.agents = list(self.possible_agents)
        infos = {a: self._mask_info(mask, a) for a in self.agents}
        if self.render_mode == "human":
            self.render()
        return {a: obs[i] for a, i in self._index.items()}, infos

    def step(self, actions: Mapping[str, Any]):
        """Step every live agent; returns (obs, rewards, terminations, truncations, infos)."""
        if self._state is None or self._key is None:
            raise RuntimeError("call reset() before step()")
        if not self.agents:
            raise RuntimeError("the episode is over (no agents left); call reset()")
        action_array = self._action_array(actions)
        self._key, key = jax.random.split(self._key)
        obs, self._state, *out = _compiled(self.env, self.cell_px).step(
            key, self._state, jnp.asarray(action_array), self.params
        )
        reward, terminated, truncated, info, mask = jax.device_get(out)
        obs, terminated, truncated = np.array(obs), bool(terminated), bool(truncated)
        captured, terms = info["captured"], info["reward_terms"]
        captures, total = int(info["captures"]), int(info["captures_total"])
        live = self.agents
        observations = {a: obs[self._index[a]] for a in live}
        rewards = {a: float(reward[self._index[a]]) for a in live}
        terminations = {a: terminated or bool(captured[self._index[a]]) for a in live}
        truncations = {a: truncated for a in live}
        infos = {
            a: {
                "reward_terms": dict(
                    zip(self.reward_terms, terms[self._index[a]].tolist(), strict=True)
                ),
                "captured": bool(captured[self._index[a]]),
                "captures": captures,
                "captures_total": total,
                **self._mask_info(mask, a),
            }
            for a in live
        }
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def _mask_info(self, mask: np.ndarray, agent: str) -> dict[str, np.ndarray]:
        if not self.action_masks:
            return {}
        return {"action_mask": mask[self._index[agent]].astype(np.int8)}

    def _action_array(self, actions: Mapping[str, Any]) -> np.ndarray:
        """int32[A] rows, checked as ``GridWorld.step`` checks actions (``actions_from_dict``,
        ``action_rows``), and only live agents act."""
        array = self.env.actions_from_dict(actions)
        for agent in actions:
            if agent not in self.agents:
                raise ValueError(
                    f"agent {agent!r} is done (captured or episode over) and "
                    f"takes no action; live agents: {self.agents}"
                )
        return np.asarray(self.env.action_rows(array))

    def render(self) -> np.ndarray | None:
        """The current grid as uint8[H, W, 3] with render_mode 'rgb_array'; with 'human' it
        is drawn in a pygame window (None is returned); None without a render_mode."""
        if self.render_mode is None:
            gymnasium.logger.warn(
                "render() called without a render_mode; pass render_mode='rgb_array' to get frames"
            )
            return None
        if self._state is None:
            raise RuntimeError("call reset() before render()")
        frame = np.array(_compiled(self.env, self.cell_px).render(self._state))
        if self.render_mode == "rgb_array":
            return frame
        if self._window is None:
            self._window = Window(
                self.metadata["name"],
                self._setting("window_size"),
                self.metadata["render_fps"],
            )
        self._window.show(frame)
        return None

    def state(self) -> np.ndarray:
        """The global state float32[state_size] for centralised critics: [x, y, is_predator,
        captured] per agent, then the obstacle map (``GridWorld.global_state``)."""
        if self._state is None:
            raise RuntimeError("call reset() before state()")
        return np.array(_compiled(self.env, self.cell_px).global_state(self._state))

    def close(self) -> None:
        if self._window is not None:
            self._window.close()
            self._window = None
        self._state = None


class _Compiled:
    """Jitted reset, step (both with the action mask), render and global state of a grid."""

    def __init__(self, env: GridWorld, cell_px: int):
        def reset(key, params):
            obs, state = env.reset(key, params)
            return obs, state, env.action_mask(state, params)

        def step(key, state, actions, params):
            obs, state, reward, terminated, truncated, info = env.step(key, state, actions, params)
            return (obs, state, reward, terminated, truncated, info, env.action_mask(state, params))

        self.reset, self.step = jax.jit(reset), jax.jit(step)
        self.render = jax.jit(lambda state: render(env, state, cell_px))
        self.global_state = jax.jit(env.global_state)


_COMPILED: weakref.WeakKeyDictionary[GridWorld, dict[int, _Compiled]] = weakref.WeakKeyDictionary()


def _compiled(env: GridWorld, cell_px: int) -> _Compiled:
    """The jitted functions of ``env``, shared by every adapter over it."""
    per_env = _COMPILED.setdefault(env, {})
    if cell_px not in per_env:
        per_env[cell_px] = _Compiled(env, cell_px)
    return per_env[cell_px]


def _host(tree):
    return None if tree is None else jax.device_get(tree)


# ----------------------------------------------------------------------------- constructors
def parallel_env(config: ConfigLike = None, /, **kwargs: Any) -> PettingZooEnv:
    """PettingZoo-style constructor: ``parallel_env("default", max_cycles=100, ...)``; the
    keyword arguments are :class:`PettingZooEnv`'s (config overrides included)."""
    return PettingZooEnv(config, **kwargs)


def raw_env(config: ConfigLike = None, /, **kwargs: Any) -> AECEnv:
    """The AEC API over :func:`parallel_env` (PettingZoo's ``parallel_to_aec_wrapper``)."""
    return parallel_to_aec_wrapper(PettingZooEnv(config, **kwargs))


def env(config: ConfigLike = None, /, **kwargs: Any) -> AECEnv:
    """:func:`raw_env` with PettingZoo's usual wrappers (out-of-bounds actions assert, call
    order enforced), as ``pettingzoo.<family>.<env>.env()`` builds it."""
    return wrappers.OrderEnforcingWrapper(
        wrappers.AssertOutOfBoundsWrapper(raw_env(config, **kwargs))
    )
