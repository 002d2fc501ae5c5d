"""What the adapters need to know before the first step: the config (with keyword overrides),
and an :class:`EnvSpec` of static facts read without initialising a JAX backend.

Building a :class:`~ppage_jax.env.GridWorld` creates device arrays (its default params), which
starts JAX's thread pools; a process that does so and then forks (SuperSuit's or AgileRL's
vector envs under the ``fork`` start method) deadlocks in the children. The adapters therefore
read names, sizes and spaces from a GridWorld built under ``jax.eval_shape`` (abstract arrays,
no device) and build the real one on first use, in whichever process steps it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ppage_jax.config import Config, load_config
from ppage_jax.env import GridWorld
from ppage_jax.state import Layout

ConfigLike = GridWorld | Config | str | None

_GRIDS: dict[str, GridWorld] = {}
_MAX_CACHED_GRIDS = 16


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Static facts of one config: names, roles, sizes (no arrays on a device)."""

    config: Config
    layout: Layout
    num_actions: int
    noop_action: int
    observation_size: int
    observation_shape: tuple[int, ...] | None
    global_state_size: int
    reward_terms: tuple[str, ...]

    @property
    def agent_names(self) -> tuple[str, ...]:
        return self.layout.agent_names

    @property
    def num_agents(self) -> int:
        return self.layout.num_agents

    @property
    def is_predator(self) -> np.ndarray:
        return self.layout.is_predator


def plain(value: Any) -> Any:
    """Nested mappings and sequences as plain dicts and lists (hydra passes OmegaConf ones)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    return value


def resolve_config(
    config: ConfigLike, overrides: Mapping[str, Any] | None = None, max_steps: int | None = None
) -> Config:
    """A validated Config from a GridWorld, Config, config path/name or None (defaults).

    ``overrides`` maps dotted keys (``"env.size"``) or section names (``"env": {...}``) to
    values, as ``load_config`` takes them; ``max_steps`` sets ``env.termination.max_steps``.
    """
    overrides = plain(dict(overrides or {}))
    if max_steps is not None:
        overrides["env.termination.max_steps"] = max_steps
    if isinstance(config, GridWorld):
        config = config.config
    if isinstance(config, Config):
        return config.with_overrides(overrides) if overrides else config
    return load_config(config, overrides)


def env_spec(env: GridWorld | Config) -> EnvSpec:
    """The static facts of a GridWorld, or of the GridWorld a Config builds (built abstractly:
    no device array is created, so no JAX backend starts)."""
    if not isinstance(env, GridWorld):
        built: list[GridWorld] = []
        jax.eval_shape(lambda: built.append(GridWorld(env)) or ())
        env = built[0]
    return EnvSpec(
        config=env.config,
        layout=env.layout,
        num_actions=env.num_actions,
        noop_action=env.noop_action,
        observation_size=env.observation_size,
        observation_shape=env.observation_shape,
        global_state_size=env.global_state_size,
        reward_terms=env.reward_terms,
    )


def grid_world(config: Config) -> GridWorld:
    """The GridWorld of a config, shared by every adapter over an equal config (so jitted
    functions compile once per config, not once per adapter)."""
    key = config.hash()
    if key not in _GRIDS:
        if len(_GRIDS) >= _MAX_CACHED_GRIDS:
            _GRIDS.pop(next(iter(_GRIDS)))
        _GRIDS[key] = GridWorld(config)
    return _GRIDS[key]
