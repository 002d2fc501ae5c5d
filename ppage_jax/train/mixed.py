"""Mixed: each team chooses ``iql`` (a table per agent) or ``cql`` (a joint table for the
team), PPAGE's ``mixed`` trainer (defaults: predators cql, prey iql).

See :mod:`ppage_jax.train.tabular` for both kinds of learner.
"""
from __future__ import annotations

import dataclasses

from ppage_jax.config import Field
from ppage_jax.train import tabular
from ppage_jax.train.tabular import greedy_actions, init, policy_state, train, update  # noqa: F401


@dataclasses.dataclass(frozen=True)
class Hyperparams(tabular.TabularHyperparams):
    """``experiment.algorithm.params`` of ``mixed`` (PPAGE's experiment_mixed.yaml values)."""

    predator_algo: str = "cql"
    prey_algo: str = "iql"

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": self.predator_algo, "prey": self.prey_algo}


_KIND = Field(str, False, lambda v: v in tabular.KINDS, f"one of {list(tabular.KINDS)}")
CHECKS = dict(tabular.CHECKS, predator_algo=_KIND, prey_algo=_KIND)


def check(hp: Hyperparams, data: dict, fail) -> None:
    """A cql team's joint action space must stay small."""
    tabular.check_tables(hp, data, fail)
