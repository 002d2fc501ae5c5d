"""IQL: independent tabular Q-learning, one hashed table per agent (PPAGE's ``iql``).

See :mod:`ppage_jax.train.tabular` for the hashing, the batched update and the masking.
"""

from __future__ import annotations

from ppage_jax.train.hyperparams import IQLHyperparams
from ppage_jax.train.tabular import greedy_actions, init, policy_state, train, update  # noqa: F401

Hyperparams = IQLHyperparams
STOCHASTIC = False
