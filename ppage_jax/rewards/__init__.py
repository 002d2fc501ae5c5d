"""Reward terms: registry, the shipped terms, and the composer."""

from ppage_jax.rewards import base, potential, shaping  # noqa: F401  (register the shipped terms)
from ppage_jax.rewards.compose import RewardComposer, TermEntry
from ppage_jax.rewards.registry import (
    CaptureEvents,
    Choice,
    PotentialContext,
    RewardContext,
    get_term,
    register_potential,
    register_reward,
    reward_terms,
    unregister_reward,
)

__all__ = [
    "CaptureEvents",
    "Choice",
    "PotentialContext",
    "RewardComposer",
    "RewardContext",
    "TermEntry",
    "get_term",
    "register_potential",
    "register_reward",
    "reward_terms",
    "unregister_reward",
]
