"""The analytic stall margin of a reward design, per role, from its terms' declared bounds.

A sub-step that does not end the episode pays a role at most the sum, over its *direct*
shaping terms (every term but ``base`` and the potential-based ones), of the weighted term's
largest value (:meth:`ppage_jax.rewards.registry.TermSpec.value_bounds`), and charges it the
base term's per-sub-step cost (``step_cost``, predators only). The **stall margin** is that
largest payment minus the cost. Where it is positive, an agent can be paid for every
sub-step it keeps the episode going, so for predators (whose task ends the episode) not
capturing can pay more than capturing; where it is zero or negative, every sub-step without
a capture costs something and stalling never pays. Potential-based terms are left out: their
discounted flow from any state telescopes to the same total whether the episode ends in a
capture or not. A direct term without declared bounds makes the margin unknown.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ppage_jax.analysis.audit.settings import TASK_TERM, role_rows
from ppage_jax.env import GridWorld
from ppage_jax.rewards.registry import get_term
from ppage_jax.state import EnvParams


def _float_params(params: EnvParams, term: str) -> dict[str, float]:
    return {k: float(np.asarray(v)) for k, v in params.reward.term_params[term].items()}


def stall_margins(env: GridWorld, params: EnvParams) -> dict[str, dict[str, Any]]:
    """Per role with agents: ``{"margin", "largest_payment", "cost", "payments",
    "unbounded"}``: the margin (NaN when some direct term declares no bounds), the largest
    direct payment a sub-step, the base term's cost a sub-step, each direct term's largest
    weighted value, and the direct terms without declared bounds."""
    weights = np.asarray(params.reward.weights, np.float64)
    masks = np.asarray(params.reward.role_masks, bool)  # [T, A]
    out: dict[str, dict[str, Any]] = {}
    for role, rows in role_rows(env).items():
        payments: dict[str, float] = {}
        unbounded: list[str] = []
        cost = 0.0
        for t, term in enumerate(env.reward_terms):
            if weights[t] == 0 or not masks[t, rows].any():
                continue
            spec = get_term(term)
            if term == TASK_TERM:
                if role == "predator":
                    cost = weights[t] * _float_params(params, term)["step_cost"]
                continue
            if spec.potential:
                continue
            bounds = spec.value_bounds(_float_params(params, term), env.layout.size)
            if bounds is None:
                unbounded.append(term)
                continue
            payments[term] = float(max(weights[t] * bounds[0], weights[t] * bounds[1]))
        largest = float(sum(payments.values()))
        out[role] = {
            "margin": math.nan if unbounded else largest - float(cost),
            "largest_payment": largest,
            "cost": float(cost),
            "payments": payments,
            "unbounded": unbounded,
        }
    return out
