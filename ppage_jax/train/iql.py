"""IQL: independent tabular Q-learning, one hashed table per agent (PPAGE's ``iql``).

See :mod:`ppage_jax.train.tabular` for the hashing, the batched update and the masking.
"""
from __future__ import annotations

import dataclasses

from ppage_jax.train import tabular
from ppage_jax.train.tabular import greedy_actions, init, policy_state, train, update  # noqa: F401


@dataclasses.dataclass(frozen=True)
class Hyperparams(tabular.TabularHyperparams):
    """``experiment.algorithm.params`` of ``iql`` (PPAGE's experiment_iql.yaml values)."""

    table_size: int = 262_144         # rows per agent table (observations are hashed)

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": "iql", "prey": "iql"}


CHECKS = dict(tabular.CHECKS)


def check(hp: Hyperparams, data: dict, fail) -> None:
    """No cross-key rules beyond the shared ones."""
    tabular.check_tables(hp, data, fail)
