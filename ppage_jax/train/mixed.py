"""Mixed: each team chooses ``iql`` (a table per agent) or ``cql`` (a joint table for the
team), PPAGE's ``mixed`` trainer (defaults: predators cql, prey iql).

See :mod:`ppage_jax.train.tabular` for both kinds of learner.
"""

from __future__ import annotations

from ppage_jax.train.hyperparams import MixedHyperparams
from ppage_jax.train.tabular import greedy_actions, init, policy_state, train, update  # noqa: F401

Hyperparams = MixedHyperparams
STOCHASTIC = False
