"""Potential-based shapers: per turn they pay ``gamma * phi(s') * (1 - terminated) - phi(s)``.

A potential is a function of the state alone, so its shaping telescopes over an episode:
the discounted sum is ``-phi(s_0) + gamma**T * phi(s_T) * (1 - terminated)``, and it leaves
the optimal policies unchanged (Ng, Harada & Russell 1999; Devlin & Kudenko 2011 for the
multi-agent case). ``gamma`` is ``rewards.gamma``; it should equal the learner's discount.
phi is zeroed on termination only, never on truncation (a time limit is not an end state).
The composer (rewards/compose.py) applies that formula; a potential here returns phi only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.rewards.registry import PotentialContext, register_potential
from ppage_jax.rewards.shaping import nearest_distance
from ppage_jax.state import State


def _free_prey(state: State, ctx: PotentialContext) -> jax.Array:
    return ctx.is_prey & ~state.captured


@register_potential("potential_distance", applies_to="predator")
def potential_distance(state: State, ctx: PotentialContext) -> jax.Array:
    """Predators: phi = -(Manhattan distance to the nearest uncaptured prey); 0 when none is
    left. Prey: 0. A predator earns ``gamma*phi(s') - phi(s)`` for closing in."""
    nearest, _ = nearest_distance(state.positions, _free_prey(state, ctx))
    return jnp.where(ctx.is_predator, -nearest, 0).astype(jnp.float32)


@register_potential("potential_prey_distance", applies_to="prey")
def potential_prey_distance(state: State, ctx: PotentialContext) -> jax.Array:
    """Uncaptured prey: phi = +(Manhattan distance to the nearest predator); captured prey
    and predators: 0 (also when no predator exists). A prey earns for opening the gap."""
    nearest, _ = nearest_distance(state.positions, ctx.is_predator)
    return jnp.where(_free_prey(state, ctx), nearest, 0).astype(jnp.float32)
