"""Episodes: per-term episode statistics and batched rollouts summarised per episode."""
from ppage_jax.episodes.stats import (
    FINISHED_KEYS, RETURN_FIELDS, EpisodeStats, episode_stats_init, episode_stats_update,
    rescore, rollout_episodes, summarize_episodes)
from ppage_jax.episodes.summary import rollout_summary

__all__ = [
    "FINISHED_KEYS", "RETURN_FIELDS", "EpisodeStats", "episode_stats_init",
    "episode_stats_update", "rescore", "rollout_episodes", "rollout_summary",
    "summarize_episodes",
]
