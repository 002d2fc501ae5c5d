"""ppage_jax: a vectorized JAX simulator of the PPAGE predator-prey gridworld.

``import ppage_jax`` loads the simulator core only (state, config, env, rewards,
observations, wrappers, sharding, baseline policies). Everything built on it (episodes,
pictures, training, audits, sweeps, reward search) resolves lazily on first use, so ``pj.render``,
``pj.train`` or ``pj.run_sweep`` work without being imported up front.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ppage_jax import observations, rewards  # noqa: F401  (register the shipped builders/terms)
from ppage_jax.config import Config, ConfigError, load_config
from ppage_jax.config.env_spec import EnvSpec, RewardTerm
from ppage_jax.defaults import VERSION as __version__  # noqa: F401  (the release)
from ppage_jax.env import GridWorld, make
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
from ppage_jax.wrappers import AutoResetEnv, BatchedAutoResetEnv

# Public names outside the core: name -> module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "EpisodeStats": "ppage_jax.episodes",
    "episode_stats_init": "ppage_jax.episodes",
    "episode_stats_update": "ppage_jax.episodes",
    "rescore": "ppage_jax.episodes",
    "rollout_episodes": "ppage_jax.episodes",
    "summarize_episodes": "ppage_jax.episodes",
    "render": "ppage_jax.viz.frames",
    "render_episode": "ppage_jax.viz.frames",
    "write_gif": "ppage_jax.viz.frames",
    "TrainConfig": "ppage_jax.train",
    "make_train_config": "ppage_jax.train",
    "train": "ppage_jax.train",
    "AuditSettings": "ppage_jax.analysis.audit",
    "audit_rewards": "ppage_jax.analysis.audit",
    "format_report": "ppage_jax.analysis.audit",
    "load_sweep": "ppage_jax.analysis.sweep",
    "run_sweep": "ppage_jax.analysis.sweep",
    "load_search": "ppage_jax.analysis.search",
    "search_rewards": "ppage_jax.analysis.search",
    "DetectorSettings": "ppage_jax.analysis.detectors",
    "load_settings": "ppage_jax.analysis.detectors",
    "monitor_curves": "ppage_jax.analysis.detectors",
    "enable_compile_cache": "ppage_jax.compilation.cache",
}

if TYPE_CHECKING:  # the lazy names' real types, for type checkers and editors
    from ppage_jax.analysis.audit import AuditSettings, audit_rewards, format_report
    from ppage_jax.analysis.detectors import DetectorSettings, load_settings, monitor_curves
    from ppage_jax.analysis.search import load_search, search_rewards
    from ppage_jax.analysis.sweep import load_sweep, run_sweep
    from ppage_jax.compilation.cache import enable_compile_cache
    from ppage_jax.episodes import (
        EpisodeStats,
        episode_stats_init,
        episode_stats_update,
        rescore,
        rollout_episodes,
        summarize_episodes,
    )
    from ppage_jax.train import TrainConfig, make_train_config, train
    from ppage_jax.viz.frames import render, render_episode, write_gif


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ppage_jax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AutoResetEnv",
    "BatchedAutoResetEnv",
    "Choice",
    "Config",
    "ConfigError",
    "EnvParams",
    "EnvSpec",
    "GridWorld",
    "Layout",
    "ObservationBuilder",
    "PotentialContext",
    "RewardContext",
    "RewardParams",
    "RewardTerm",
    "State",
    "combine_policies",
    "greedy_chase",
    "greedy_evade",
    "load_config",
    "make",
    "make_mesh",
    "make_observation",
    "observation_builders",
    "register_observation",
    "register_potential",
    "register_reward",
    "replicate",
    "reward_terms",
    "shard_batch",
    # the lazy names (_LAZY), spelled out for type checkers
    "EpisodeStats",
    "episode_stats_init",
    "episode_stats_update",
    "rescore",
    "rollout_episodes",
    "summarize_episodes",
    "render",
    "render_episode",
    "write_gif",
    "TrainConfig",
    "make_train_config",
    "train",
    "AuditSettings",
    "audit_rewards",
    "format_report",
    "load_sweep",
    "run_sweep",
    "load_search",
    "search_rewards",
    "DetectorSettings",
    "load_settings",
    "monitor_curves",
    "enable_compile_cache",
]
assert set(__all__) >= set(_LAZY), "every lazy name is public"
