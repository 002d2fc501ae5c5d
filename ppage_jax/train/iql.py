"""IQL: independent tabular Q-learning, one hashed table per agent (PPAGE's ``iql``).

See :mod:`ppage_jax.train.tabular` for the hashing, the batched update and the masking.
"""
from __future__ import annotations

import dataclasses

from ppage_jax.train import tabular
from ppage_jax.train.tabular import greedy_actions, init, policy_state, train, update  # noqa: F401


@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """``experiment.algorithm.params`` of ``iql`` (PPAGE's experiment_iql.yaml values)."""

    alpha: float = 0.1
    gamma: float = 0.99
    epsilon: float = 1.0
    epsilon_decay: float = 0.995      # per finished episode, as PPAGE
    min_epsilon: float = 0.05
    table_size: int = 262_144         # rows per agent table (observations are hashed)
    num_steps: int = 16               # turns per grid per update (one metrics row)

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": "iql", "prey": "iql"}


CHECKS = dict(tabular.CHECKS)


def check(hp: Hyperparams, data: dict, fail) -> None:
    """No cross-key rules beyond the shared ones."""
    tabular.check_tables(hp, data, fail)
