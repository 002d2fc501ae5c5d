"""What an audit plays and how it judges: the held-out block, the policy pairs, the flag
thresholds, and the components the base term is split into."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from ppage_jax.defaults import AUDIT_SEED
from ppage_jax.env import GridWorld
from ppage_jax.policies import PREDATOR_POLICIES, PREY_POLICIES

TASK_TERM = "base"
ROLE_TITLES = {"predator": "predators", "prey": "prey"}


@dataclasses.dataclass(frozen=True)
class Component:
    """One additive part of a term, isolated by zeroing the term's other component params.

    ``kind`` is ``terminal`` for the payoff of the episode-ending event (capture) and
    ``stream`` for per-step payments; ``dead_hint`` explains a component that never fires.
    """

    param: str
    label: str
    kind: str
    dead_hint: str = ""


TERM_COMPONENTS: dict[str, tuple[Component, ...]] = {
    "base": (
        Component("capture_reward", "capture", "terminal"),
        Component("captured_penalty", "captured", "terminal"),
        Component("step_cost", "step", "stream"),
        Component(
            "obstacle_penalty",
            "obstacle",
            "stream",
            "no agent can stand on an obstacle while "
            "env.dynamics.block_agents_by_obstacles is true",
        ),
    ),
}

COMPONENT_LABELS = {
    f"{term}.{c.param}": c.label for term, comps in TERM_COMPONENTS.items() for c in comps
}


@dataclasses.dataclass(frozen=True)
class AuditSettings:
    """How many episodes, which seeds and policies, and the flag thresholds."""

    episodes: int = 256
    seed: int = AUDIT_SEED
    # The heuristics PPAGE users know; ``intercept`` can be asked for by name.
    policies: tuple[tuple[str, str], ...] = tuple(
        itertools.product(("noop", "random", "chase"), PREY_POLICIES)
    )
    dominance: float = 0.9
    shaping_share: float = 0.5
    ordering_margin: float = 0.05

    def __post_init__(self):
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        for pred, prey in self.policies:
            if pred not in PREDATOR_POLICIES or prey not in PREY_POLICIES:
                raise ValueError(
                    f"unknown policy pair {pred}/{prey}; predators: "
                    f"{list(PREDATOR_POLICIES)}, prey: {list(PREY_POLICIES)}"
                )


def parse_policy_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """``"chase/evade,random/random"`` -> (("chase", "evade"), ("random", "random"))."""
    pairs = []
    for item in text.split(","):
        pred, sep, prey = item.strip().partition("/")
        if not sep or pred not in PREDATOR_POLICIES or prey not in PREY_POLICIES:
            raise ValueError(
                f"bad policy pair {item.strip()!r}: write PREDATOR/PREY with "
                f"predator in {list(PREDATOR_POLICIES)} and prey in "
                f"{list(PREY_POLICIES)}"
            )
        pairs.append((pred, prey))
    return tuple(pairs)


def role_rows(env: GridWorld) -> dict[str, np.ndarray]:
    """bool agent rows of each role that has agents."""
    is_pred = np.asarray(env.is_predator, bool)
    return {role: rows for role, rows in (("predator", is_pred), ("prey", ~is_pred)) if rows.any()}
