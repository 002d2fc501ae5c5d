"""The `base` term: PPAGE's capture bonus, capture penalty, step cost and obstacle penalty."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.rewards.registry import Choice, RewardContext, register_reward

CREDIT_MODES = ("full", "split", "team")


@register_reward(
    "base",
    params={
        "capture_reward": 100.0,
        "captured_penalty": 100.0,
        "step_cost": 5.0,
        "obstacle_penalty": 200.0,
        "credit": Choice(CREDIT_MODES, "full"),
    },
    applies_to="all",
)
def base(ctx: RewardContext) -> jax.Array:
    """Per sub-step: predators -step_cost plus the capture bonus by credit mode
    (full: each credited predator; split: shared by the predators on the cell; team: every
    predator, per prey captured); prey -captured_penalty when captured; -obstacle_penalty
    to any agent on an obstacle."""
    p, ev = ctx.params, ctx.events
    bonus = p["capture_reward"]
    per_mode = jnp.stack(
        [
            jnp.where(ev.credited, bonus, 0.0),
            jnp.where(ev.credited, bonus / jnp.maximum(ev.predators_on_cell, 1), 0.0),
            jnp.broadcast_to(bonus * ev.num_captured, ev.credited.shape),
        ]
    )
    capture_bonus = per_mode[p["credit"]]
    reward = jnp.where(ctx.is_predator, capture_bonus - p["step_cost"], 0.0)
    reward = reward - jnp.where(ctx.is_prey & ev.captured_now, p["captured_penalty"], 0.0)
    reward = reward - jnp.where(ctx.on_obstacle, p["obstacle_penalty"], 0.0)
    return reward.astype(jnp.float32)
