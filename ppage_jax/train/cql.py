"""CQL: centralised tabular Q-learning, one joint-action table per team (PPAGE's ``cql``,
"centralised", not "conservative"), each role its own team.

See :mod:`ppage_jax.train.tabular` for the joint keys, the marginal-mean action choice, the
batched update and the masking.
"""

from __future__ import annotations

from ppage_jax.train.hyperparams import CQLHyperparams
from ppage_jax.train.tabular import greedy_actions, init, policy_state, train, update  # noqa: F401

Hyperparams = CQLHyperparams
STOCHASTIC = False
