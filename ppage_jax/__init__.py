"""ppage_jax: a vectorized JAX simulator of the PPAGE predator-prey gridworld.

Every public name resolves on first use (PEP 562): ``import ppage_jax`` itself loads no JAX,
so the command line answers ``--help`` and config errors at once, and ``pj.make``,
``pj.render``, ``pj.train_agents`` or ``pj.run_sweep`` each import what they need when first
used. Using any of the reward or observation names registers the shipped terms and builders.
A subpackage is an attribute too (``pj.train``, ``pj.rewards``), loaded on first use.

Deprecated names, removed in the next release, still work with a DeprecationWarning:
``pj.format_report`` (now ``pj.format_audit_report``) and the call ``pj.train(key, config)``
(now ``pj.train_agents``; ``pj.train`` is the training package).
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import TYPE_CHECKING, Any

from ppage_jax import defaults as _defaults
from ppage_jax.defaults import VERSION as __version__  # noqa: F401  (the release)


def _register_shipped() -> None:
    """The shipped reward terms, potentials and observation builders (imported on the first
    config check: see ``ppage_jax.config.validation.load_registries``)."""
    import ppage_jax.observations  # noqa: F401
    import ppage_jax.rewards  # noqa: F401


_defaults.REGISTRY_LOADERS.append(_register_shipped)

# Public names: name -> module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "Config": "ppage_jax.config",
    "ConfigError": "ppage_jax.config",
    "load_config": "ppage_jax.config",
    "EnvSpec": "ppage_jax.config.env_spec",
    "RewardTerm": "ppage_jax.config.env_spec",
    "GridWorld": "ppage_jax.env",
    "make": "ppage_jax.env",
    "ObservationBuilder": "ppage_jax.observations",
    "make_observation": "ppage_jax.observations",
    "observation_builders": "ppage_jax.observations",
    "register_observation": "ppage_jax.observations",
    "combine_policies": "ppage_jax.policies",
    "greedy_chase": "ppage_jax.policies",
    "greedy_evade": "ppage_jax.policies",
    "Choice": "ppage_jax.rewards",
    "PotentialContext": "ppage_jax.rewards",
    "RewardContext": "ppage_jax.rewards",
    "register_potential": "ppage_jax.rewards",
    "register_reward": "ppage_jax.rewards",
    "reward_terms": "ppage_jax.rewards",
    "make_mesh": "ppage_jax.sharding",
    "replicate": "ppage_jax.sharding",
    "shard_batch": "ppage_jax.sharding",
    "EnvParams": "ppage_jax.state",
    "Layout": "ppage_jax.state",
    "RewardParams": "ppage_jax.state",
    "State": "ppage_jax.state",
    "AutoResetEnv": "ppage_jax.wrappers",
    "BatchedAutoResetEnv": "ppage_jax.wrappers",
    "EpisodeStats": "ppage_jax.episodes",
    "episode_stats_init": "ppage_jax.episodes",
    "episode_stats_update": "ppage_jax.episodes",
    "rescore": "ppage_jax.episodes",
    "play_episodes": "ppage_jax.episodes",
    "rollout_episodes": "ppage_jax.episodes",
    "summarize_episodes": "ppage_jax.episodes",
    "render": "ppage_jax.viz.frames",
    "render_episode": "ppage_jax.viz.frames",
    "write_gif": "ppage_jax.viz.frames",
    "TrainConfig": "ppage_jax.train",
    "make_train_config": "ppage_jax.train",
    "train_agents": "ppage_jax.train.run.experiment",
    "AuditSettings": "ppage_jax.analysis.audit",
    "audit_rewards": "ppage_jax.analysis.audit",
    "format_audit_report": "ppage_jax.analysis.audit",
    "load_sweep": "ppage_jax.analysis.sweep",
    "run_sweep": "ppage_jax.analysis.sweep",
    "load_search": "ppage_jax.analysis.search",
    "search_rewards": "ppage_jax.analysis.search",
    "DetectorSettings": "ppage_jax.analysis.detectors",
    "load_settings": "ppage_jax.analysis.detectors",
    "monitor_curves": "ppage_jax.analysis.detectors",
    "enable_compile_cache": "ppage_jax.compilation.cache",
}

# Deprecated aliases, removed in the next release: old name -> the public name it stands for.
_DEPRECATED: dict[str, str] = {"format_report": "format_audit_report"}

if TYPE_CHECKING:  # the real types, for type checkers and editors
    from ppage_jax.analysis.audit import AuditSettings, audit_rewards, format_audit_report
    from ppage_jax.analysis.detectors import DetectorSettings, load_settings, monitor_curves
    from ppage_jax.analysis.search import load_search, search_rewards
    from ppage_jax.analysis.sweep import load_sweep, run_sweep
    from ppage_jax.compilation.cache import enable_compile_cache
    from ppage_jax.config import Config, ConfigError, load_config
    from ppage_jax.config.env_spec import EnvSpec, RewardTerm
    from ppage_jax.env import GridWorld, make
    from ppage_jax.episodes import (
        EpisodeStats,
        episode_stats_init,
        episode_stats_update,
        play_episodes,
        rescore,
        rollout_episodes,
        summarize_episodes,
    )
    from ppage_jax.observations import (
        ObservationBuilder,
        make_observation,
        observation_builders,
        register_observation,
    )
    from ppage_jax.policies import combine_policies, greedy_chase, greedy_evade
    from ppage_jax.rewards import (
        Choice,
        PotentialContext,
        RewardContext,
        register_potential,
        register_reward,
        reward_terms,
    )
    from ppage_jax.sharding import make_mesh, replicate, shard_batch
    from ppage_jax.state import EnvParams, Layout, RewardParams, State
    from ppage_jax.train import TrainConfig, make_train_config
    from ppage_jax.train.run.experiment import train_agents
    from ppage_jax.viz.frames import render, render_episode, write_gif
    from ppage_jax.wrappers import AutoResetEnv, BatchedAutoResetEnv


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:  # not cached: every use warns
        new = _DEPRECATED[name]
        warnings.warn(
            f"pj.{name} is deprecated and is removed in the next release: use pj.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_LAZY[new]), new)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f"{__name__}.{name}")  # a subpackage: pj.rewards
    else:
        raise AttributeError(f"module 'ppage_jax' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [  # spelled out for type checkers
    "Config",
    "ConfigError",
    "load_config",
    "EnvSpec",
    "RewardTerm",
    "GridWorld",
    "make",
    "ObservationBuilder",
    "make_observation",
    "observation_builders",
    "register_observation",
    "combine_policies",
    "greedy_chase",
    "greedy_evade",
    "Choice",
    "PotentialContext",
    "RewardContext",
    "register_potential",
    "register_reward",
    "reward_terms",
    "make_mesh",
    "replicate",
    "shard_batch",
    "EnvParams",
    "Layout",
    "RewardParams",
    "State",
    "AutoResetEnv",
    "BatchedAutoResetEnv",
    "EpisodeStats",
    "episode_stats_init",
    "episode_stats_update",
    "play_episodes",
    "rescore",
    "rollout_episodes",
    "summarize_episodes",
    "render",
    "render_episode",
    "write_gif",
    "TrainConfig",
    "make_train_config",
    "train_agents",
    "AuditSettings",
    "audit_rewards",
    "format_audit_report",
    "load_sweep",
    "run_sweep",
    "load_search",
    "search_rewards",
    "DetectorSettings",
    "load_settings",
    "monitor_curves",
    "enable_compile_cache",
]
assert set(__all__) == set(_LAZY), "every lazy name is public"
