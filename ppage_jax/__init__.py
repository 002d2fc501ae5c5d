"""ppage_jax: a vectorized JAX simulator of the PPAGE predator-prey gridworld."""
from ppage_jax import rewards  # noqa: F401  (registers the shipped reward terms)
from ppage_jax.config import Config, ConfigError, load_config
from ppage_jax.env import GridWorld, make
from ppage_jax.episodes import (
    EpisodeStats, episode_stats_init, episode_stats_update, rescore, rollout_episodes,
    summarize_episodes)
from ppage_jax.observations import (
    ObservationBuilder, make_observation, observation_builders, register_observation)
from ppage_jax.rewards import (
    Choice, PotentialContext, RewardContext, register_potential, register_reward, reward_terms)
from ppage_jax.state import EnvParams, Layout, RewardParams, State
from ppage_jax.sharding import make_mesh, replicate, shard_batch
from ppage_jax.wrappers import AutoResetEnv, BatchedAutoResetEnv
from ppage_jax.render import render, render_episode, write_gif
from ppage_jax.train import TrainConfig, make_train_config, train  # registers experiment checks
from ppage_jax.policies import combine_policies, greedy_chase, greedy_evade
from ppage_jax.audit import AuditSettings, audit_rewards, format_report
from ppage_jax.sweep_spec import load_sweep
from ppage_jax.sweep import run_sweep

__version__ = "0.1.0"

__all__ = [
    "Choice", "Config", "ConfigError", "EnvParams", "GridWorld", "Layout",
    "ObservationBuilder", "PotentialContext", "RewardContext", "RewardParams", "State",
    "load_config", "make", "observation_builders", "register_observation",
    "make_observation",
    "register_potential", "register_reward", "reward_terms",
    "EpisodeStats", "episode_stats_init", "episode_stats_update", "rescore",
    "rollout_episodes", "summarize_episodes",
    "render", "render_episode", "write_gif",
    "TrainConfig", "make_train_config", "train",
    "AutoResetEnv", "BatchedAutoResetEnv", "make_mesh", "replicate", "shard_batch",
    "combine_policies", "greedy_chase", "greedy_evade",
    "AuditSettings", "audit_rewards", "format_report", "load_sweep", "run_sweep",
]
