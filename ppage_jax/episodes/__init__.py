"""Episodes: playing a policy, per-term episode statistics, their host-side summary and the
metric table (each task metric's label and better direction)."""

from ppage_jax.episodes.metrics import METRICS, Metric
from ppage_jax.episodes.play import (
    EPISODE_FIELDS,
    Turn,
    episode_keys,
    episode_starts,
    play_episodes,
    play_turn,
    record_one,
    rollout_episodes,
    with_step_limit,
)
from ppage_jax.episodes.stats import (
    RETURN_FIELDS,
    EpisodeStats,
    episode_stats_init,
    episode_stats_update,
    rescore,
)
from ppage_jax.episodes.summary import rollout_summary, summarize_episodes

__all__ = [
    "EPISODE_FIELDS",
    "METRICS",
    "RETURN_FIELDS",
    "EpisodeStats",
    "Metric",
    "Turn",
    "episode_keys",
    "episode_starts",
    "episode_stats_init",
    "episode_stats_update",
    "play_episodes",
    "play_turn",
    "record_one",
    "rescore",
    "rollout_episodes",
    "rollout_summary",
    "summarize_episodes",
    "with_step_limit",
]
