"""What the adapters need to know before the first step: the config they were given (with
keyword overrides) and its :class:`EnvSpec`, and the :class:`GridFacts` of that spec, read
without initialising a JAX backend.

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
from ppage_jax.config.env_spec import EnvSpec, env_spec
from ppage_jax.env import GridWorld, make
from ppage_jax.observations import ObservationBuilder
from ppage_jax.state import Layout

# What an adapter is built from: a built grid or a spec (used as they are), or a Config, a
# config path or shipped name, or None (the package defaults).
ConfigLike = GridWorld | EnvSpec | Config | str | None

_GRIDS: dict[EnvSpec, GridWorld] = {}
_MAX_CACHED_GRIDS = 16


@dataclasses.dataclass(frozen=True)
class GridFacts:
    """Static facts of the GridWorld of a spec: names, roles, sizes, the observation builder
    (for its bounds; built abstractly, never called) and no array on a device."""

    spec: EnvSpec
    layout: Layout
    observation: ObservationBuilder
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


def resolve(
    config: ConfigLike, overrides: Mapping[str, Any] | None = None, max_steps: int | None = None
) -> tuple[Config | None, EnvSpec]:
    """``(config, spec)``: the validated Config an adapter is built from (None for a GridWorld
    or an EnvSpec, which carry none) and the EnvSpec of its grid.

    ``overrides`` maps dotted keys (``"env.size"``) or section names (``"env": {...}``) to
    values, as ``load_config`` takes them; they apply to a config only (a GridWorld or
    EnvSpec is changed through its fields: ``GridWorld(env.spec, size=8)``). ``max_steps``
    sets ``env.termination.max_steps`` (the spec's ``max_steps``).
    """
    edits: dict[str, Any] = plain(dict(overrides or {}))
    if isinstance(config, GridWorld | EnvSpec):
        if edits:
            raise ValueError(
                f"config overrides {sorted(edits)} need a config (a name, path or "
                f"Config); a {type(config).__name__} is changed through its spec fields, "
                "e.g. GridWorld(env.spec, size=8)"
            )
        spec = config.spec if isinstance(config, GridWorld) else config
        return None, spec if max_steps is None else spec.replace(max_steps=max_steps)
    if max_steps is not None:
        edits["env.termination.max_steps"] = max_steps
    if isinstance(config, Config):
        config = config.with_overrides(edits) if edits else config
    else:
        config = load_config(config, edits)
    return config, env_spec(config)


def _build(spec: EnvSpec, config: Config | None) -> GridWorld:
    """The GridWorld of ``spec`` (through ``make`` when its config is known, so that a value
    the env refuses names the config key)."""
    return make(config) if config is not None else GridWorld(spec)


def grid_facts(spec: EnvSpec, config: Config | None = None) -> GridFacts:
    """The static facts of the GridWorld of ``spec`` (built abstractly: no device array is
    created, so no JAX backend starts). ``config``: the Config ``spec`` was translated from,
    if any."""
    built: list[GridWorld] = []
    jax.eval_shape(lambda: built.append(_build(spec, config)) or ())
    return facts_of(built[0])


def facts_of(env: GridWorld) -> GridFacts:
    """The static facts of a built GridWorld."""
    return GridFacts(
        spec=env.spec,
        layout=env.layout,
        observation=env.observation,
        num_actions=env.num_actions,
        noop_action=env.noop_action,
        observation_size=env.observation_size,
        observation_shape=env.observation_shape,
        global_state_size=env.global_state_size,
        reward_terms=env.reward_terms,
    )


def grid_world(spec: EnvSpec, config: Config | None = None) -> GridWorld:
    """The GridWorld of a spec, shared by every adapter over an equal spec (so jitted
    functions compile once per spec, not once per adapter)."""
    if spec not in _GRIDS:
        if len(_GRIDS) >= _MAX_CACHED_GRIDS:
            _GRIDS.pop(next(iter(_GRIDS)))
        _GRIDS[spec] = _build(spec, config)
    return _GRIDS[spec]
