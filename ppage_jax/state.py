"""The environment's pytrees (State, EnvParams) and its static Layout."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from ppage_jax.types import Replaceable, pytree_dataclass, static_field

# Stamina at or above this value is unlimited (config `stamina: null`); it is never spent.
UNLIMITED_STAMINA = 2**30
# `max_steps: null` (no truncation) is stored as the largest int32.
NO_TRUNCATION = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Layout:
    """Static facts that fix array shapes: grid size, agent roles, obstacle count, speeds."""

    size: int
    n_predators: int
    n_prey: int
    num_obstacles: int
    max_speed: int
    allow_cell_sharing: bool
    block_agents_by_obstacles: bool
    predator_prefix: str = "predator"  # agent names: <prefix>_1, <prefix>_2, ...
    prey_prefix: str = "prey"

    @property
    def num_agents(self) -> int:
        return self.n_predators + self.n_prey

    @property
    def agent_names(self) -> tuple[str, ...]:
        return tuple(f"{self.predator_prefix}_{i + 1}" for i in range(self.n_predators)) + tuple(
            f"{self.prey_prefix}_{i + 1}" for i in range(self.n_prey)
        )

    @property
    def is_predator(self) -> np.ndarray:
        """bool[A]: True for the predator rows (the first n_predators)."""
        return np.arange(self.num_agents) < self.n_predators


@pytree_dataclass
class State(Replaceable):
    """One grid's state. Agents are rows, predators first; coordinates are [x, y]."""

    positions: jax.Array  # int32[A, 2]
    captured: jax.Array  # bool[A]; predators are never captured
    stamina: jax.Array  # int32[A]; >= UNLIMITED_STAMINA means unlimited
    obstacles: jax.Array  # int32[K, 2], obstacle i keeps its slot for the episode
    obstacle_map: jax.Array  # bool[H, W], indexed [y, x]
    turn: jax.Array  # int32 scalar: turns (env steps) taken
    captures_total: jax.Array  # int32 scalar: prey captured so far
    terminated: jax.Array  # bool scalar: captures_total >= capture_threshold
    truncated: jax.Array  # bool scalar: turn >= max_steps


@pytree_dataclass
class RewardParams(Replaceable):
    """Traced reward numbers: one weight and one role mask per term, plus term params."""

    weights: jax.Array  # float32[T], in env.reward_terms order
    role_masks: jax.Array  # float32[T, A]: applies_to as a 0/1 mask per agent
    term_params: dict  # {term name: {param name: array scalar}}
    gamma: jax.Array  # float32 scalar, for potential-based terms


@dataclasses.dataclass(frozen=True)
class Structure:
    """The static identity of the environment structure that EnvParams were built for."""

    reward_terms: tuple[str, ...]  # in the column order of the weights
    observation: str  # observation builder name
    n_predators: int
    n_prey: int
    num_obstacles: int

    def differences(self, other: Structure) -> list[str]:
        """``"field: mine vs other"`` for each field that differs."""
        return [
            f"{f.name} {getattr(self, f.name)!r} vs {getattr(other, f.name)!r}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]


@pytree_dataclass
class EnvParams(Replaceable):
    """Every traced number of the environment. Changing any leaf never recompiles.

    ``structure`` is static metadata (never traced): the structure the params were built for.
    An env refuses params built for another structure; ``None`` (params assembled by hand)
    skips that check.
    """

    speeds: jax.Array  # int32[A], each <= the static max_speed
    stamina: jax.Array  # int32[A] at reset; UNLIMITED_STAMINA for unlimited
    capture_threshold: jax.Array  # int32 scalar
    max_steps: jax.Array  # int32 scalar (NO_TRUNCATION for none)
    reward: RewardParams
    structure: Structure | None = static_field(default=None)


@pytree_dataclass
class CaptureEvents(Replaceable):
    """What capture did in one sub-step (all bool/int arrays over agents)."""

    captured_now: jax.Array  # bool[A]: prey captured in this sub-step
    credited: jax.Array  # bool[A]: predators on a cell where prey were captured
    predators_on_cell: jax.Array  # int32[A]: predators sharing each agent's cell (incl. itself)
    num_captured: jax.Array  # int32 scalar: prey captured in this sub-step
