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
class Hyperparams:
    """``experiment.algorithm.params`` of ``cql`` (PPAGE's experiment_cql.yaml values)."""

    alpha: float = 0.1
    gamma: float = 0.99
    epsilon: float = 1.0
    epsilon_decay: float = 0.995      # per finished episode, as PPAGE
    min_epsilon: float = 0.05
    table_size: int = 65_536          # rows per team table (joint observations are hashed)
    num_steps: int = 16               # turns per grid per update (one metrics row)

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": "cql", "prey": "cql"}


CHECKS = dict(tabular.CHECKS)


def check(hp: Hyperparams, data: dict, fail) -> None:
    """A team's joint action space must stay small."""
    tabular.check_tables(hp, data, fail)
