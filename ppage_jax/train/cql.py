"""CQL: centralised tabular Q-learning, one joint-action table per team (PPAGE's ``cql``,
"centralised", not "conservative"), each role its own team.

See :mod:`ppage_jax.train.tabular` for the joint keys, the marginal-mean action choice, the
batched update and the masking.
"""
from __future__ import annotations

import dataclasses

from ppage_jax.train import tabular
from ppage_jax.train.tabular import greedy_actions, init, policy_state, train, update  # noqa: F401


@dataclasses.dataclass(frozen=True)
class Hyperparams(tabular.TabularHyperparams):
    """``experiment.algorithm.params`` of ``cql`` (PPAGE's experiment_cql.yaml values;
    one hashed table per team)."""

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": "cql", "prey": "cql"}


CHECKS = dict(tabular.CHECKS)


def check(hp: Hyperparams, data: dict, fail) -> None:
    """A team's joint action space must stay small."""
    tabular.check_tables(hp, data, fail)
