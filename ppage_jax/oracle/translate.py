"""The one translation from a JAX ``GridWorld`` (+ ``EnvParams``) to the NumPy oracle.

Every traced number is read back from the params (speeds, stamina, capture threshold,
``max_steps``, weights, role masks, term params, gamma), so the oracle reproduces the exact
program the JAX step runs, including params built by ``with_weights``/``with_term_params``.
Arrays may be JAX or NumPy arrays of one grid (no batch axis); they are read with NumPy.
This module never imports JAX itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ppage_jax.oracle.env import ReferenceGridWorld
from ppage_jax.oracle.reward_terms import APPLIES_TO

if TYPE_CHECKING:
    from ppage_jax.env import GridWorld
    from ppage_jax.state import EnvParams


def applies_to(mask: Any, is_predator: np.ndarray) -> str:
    """The role (``predator``, ``prey`` or ``all``) whose 0/1 mask over the agents is ``mask``.

    With no predators (or no prey) two roles have the same mask; the first match is returned,
    and it pays exactly the same. A mask that is no role raises ``ValueError``.
    """
    mask = np.asarray(mask) > 0.5
    is_predator = np.asarray(is_predator, bool)
    masks = {"all": np.ones_like(is_predator), "predator": is_predator, "prey": ~is_predator}
    for role in APPLIES_TO:
        if np.array_equal(mask, masks[role]):
            return role
    raise ValueError(
        f"role mask {mask.astype(int).tolist()} is not one of the roles "
        f"{list(APPLIES_TO)}; the oracle pays terms by role only"
    )


def oracle_terms(env: GridWorld, params: EnvParams) -> list[dict[str, Any]]:
    """The oracle's ``reward_terms`` list for ``env``'s configured terms under ``params``:
    traced weights, roles read back from the role masks, term params (a Choice by name)."""
    from ppage_jax.rewards.registry import Choice

    reward = params.reward
    weights = np.asarray(reward.weights, np.float64)
    masks = np.asarray(reward.role_masks)
    terms = []
    for t, spec in enumerate(env.composer.specs):
        values = {}
        for key, value in reward.term_params[spec.name].items():
            declared = spec.params[key]
            values[key] = (
                declared.options[int(value)] if isinstance(declared, Choice) else float(value)
            )
        terms.append(
            {
                "name": spec.name,
                "weight": float(weights[t]),
                "params": values,
                "applies_to": applies_to(masks[t], env.is_predator),
            }
        )
    return terms


def oracle_for(env: GridWorld, params: EnvParams | None = None) -> ReferenceGridWorld:
    """The NumPy :class:`ReferenceGridWorld` configured exactly like ``env`` under ``params``
    (``env.default_params`` when omitted): same layout, action table and dynamics flags, and
    every traced number of ``params``."""
    from ppage_jax.state import NO_TRUNCATION, UNLIMITED_STAMINA

    params = env.default_params if params is None else params
    layout = env.layout
    max_steps = int(params.max_steps)
    return ReferenceGridWorld(
        size=layout.size,
        n_predators=layout.n_predators,
        n_prey=layout.n_prey,
        speeds=[int(s) for s in np.asarray(params.speeds)],
        stamina=[None if s >= UNLIMITED_STAMINA else int(s) for s in np.asarray(params.stamina)],
        allow_cell_sharing=layout.allow_cell_sharing,
        block_agents_by_obstacles=layout.block_agents_by_obstacles,
        capture_threshold=int(params.capture_threshold),
        max_steps=None if max_steps >= NO_TRUNCATION else max_steps,
        action_table=np.asarray(env.action_table),
        reward_terms=oracle_terms(env, params),
        gamma=float(params.reward.gamma),
        num_obstacles=layout.num_obstacles,
    )
