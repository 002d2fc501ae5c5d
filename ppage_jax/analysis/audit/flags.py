"""The audit's flags: dead or dominant terms, shaping share, non-potential shaping, ordering
violations, and early-termination / stalling incentives (see the package docstring)."""

from __future__ import annotations

import itertools
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ppage_jax.analysis.audit.settings import ROLE_TITLES, TASK_TERM, AuditSettings, role_rows
from ppage_jax.env import GridWorld
from ppage_jax.rewards.registry import get_term
from ppage_jax.state import EnvParams

if TYPE_CHECKING:
    from ppage_jax.analysis.audit.rollouts import Variant


def gross_magnitudes(returns: dict[str, float], terms) -> dict[str, float]:
    """Per term, the size of what it pays or charges: the sum of its components' absolute
    returns where it has components (so a capture bonus and a step cost do not cancel), else
    its absolute return."""
    out = {}
    for term in terms:
        parts = [abs(v) for k, v in returns.items() if k.startswith(f"{term}.")]
        out[term] = sum(parts) if parts else abs(returns[term])
    return out


def _flag(kind: str, message: str, **where: Any) -> dict[str, Any]:
    return {"kind": kind, "message": message, **where}


def audit_flags(
    env: GridWorld,
    params: EnvParams,
    report: dict,
    variants: list[Variant],
    settings: AuditSettings,
) -> list[dict]:
    flags: list[dict] = []
    weights, applies_to = report["weights"], report["applies_to"]
    policies = report["policies"]
    rates = report["fire_rates"]
    n_episodes = settings.episodes * len(policies)

    # Terms and components that never fired.
    for term in env.reward_terms:
        if weights[term] == 0:
            continue
        for role in applies_to[term]:
            if rates[term][role] == 0:
                flags.append(
                    _flag(
                        "dead_term",
                        f"{term} never paid {ROLE_TITLES[role]} anything in {n_episodes} episodes",
                        term=term,
                        role=role,
                    )
                )
    term_params = params.reward.term_params
    for var in variants:
        name = f"{var.term}.{var.component.param}"
        value = float(term_params[var.term][var.component.param])
        if weights[var.term] == 0 or value == 0:
            continue
        if all(r == 0 for r in rates[name].values()):
            hint = var.component.dead_hint
            if (
                var.component.param == "obstacle_penalty"
                and not env.layout.block_agents_by_obstacles
            ):
                hint = ""
            flags.append(
                _flag(
                    "dead_term",
                    f"{name} never fired in {n_episodes} episodes" + (f": {hint}" if hint else ""),
                    term=var.term,
                    component=var.component.param,
                )
            )

    # A term that dominates a role's return under every policy pair.
    for role in role_rows(env):
        active = [t for t in env.reward_terms if weights[t] != 0 and role in applies_to[t]]
        if len(active) < 2:
            continue
        for term in active:
            shares = []
            for p in policies:
                mags = gross_magnitudes(p["returns"][role], active)
                total = sum(mags.values())
                if total > 0:
                    shares.append(mags[term] / total)
            if shares and min(shares) >= settings.dominance:
                flags.append(
                    _flag(
                        "dominant_term",
                        f"{term} carries {100 * min(shares):.0f}-"
                        f"{100 * max(shares):.0f}% of the {ROLE_TITLES[role]}' absolute return "
                        f"under every policy pair: the other terms barely matter",
                        term=term,
                        role=role,
                    )
                )

    # Shaping share: flagged when shaping carries most of a role's pay in most policy pairs.
    for role in role_rows(env):
        shares = sorted(p["shaping_share"][role] for p in policies)
        median = float(np.median(shares))
        if median > settings.shaping_share:
            flags.append(
                _flag(
                    "shaping_share",
                    f"shaping terms carry {100 * median:.0f}% (median over "
                    f"policy pairs; {100 * shares[0]:.0f}-{100 * shares[-1]:.0f}%) of what the "
                    f"{ROLE_TITLES[role]} are paid or charged, above "
                    f"{100 * settings.shaping_share:.0f}%: the task reward is the minority",
                    role=role,
                    share=median,
                )
            )

    # Shaping terms that are not potential-based.
    for term in env.reward_terms:
        if term != TASK_TERM and weights[term] != 0 and not get_term(term).potential:
            flags.append(
                _flag(
                    "not_potential",
                    f"{term} is a direct shaping term, not potential-based: it "
                    f"can change which policy is optimal",
                    term=term,
                )
            )

    flags.extend(_ordering_flags(policies, settings))
    flags.extend(_termination_flags(report["termination"]))
    flags.extend(_margin_flags(report["stall_margin"]))
    return flags


def describe_margin(margin: dict) -> str:
    """One role's stall margin in words (:func:`ppage_jax.analysis.audit.margin.stall_margins`)."""
    if margin["unbounded"]:
        return f"unknown ({', '.join(margin['unbounded'])} declare no bounds)"
    return (
        f"{margin['margin']:+.4g} a sub-step (largest direct payment "
        f"{margin['largest_payment']:.3g}, cost {margin['cost']:.3g})"
    )


def _margin_flags(margins: dict) -> list[dict]:
    """Predators (whose task ends the episode) with a positive analytic stall margin."""
    pred = margins.get("predator")
    if not pred or not pred["margin"] > 0:
        return []
    paid = ", ".join(f"{t} up to {v:.3g}" for t, v in pred["payments"].items() if v > 0)
    return [
        _flag(
            "stall_margin",
            f"predators: a sub-step without a capture can pay {pred['largest_payment']:.3g} "
            f"({paid}) against a cost of {pred['cost']:.3g}: stall margin "
            f"{pred['margin']:+.3g} > 0, so keeping the episode going can pay more than "
            f"ending it with a capture",
            role="predator",
            margin=pred["margin"],
        )
    ]


def _ordering_flags(policies: list[dict], settings: AuditSettings) -> list[dict]:
    """Against a fixed opponent: worse on capture rate (for the role) but better paid."""
    flags = []
    margin = settings.ordering_margin
    for role, other, sign in (("predator", "prey_policy", 1), ("prey", "predator_policy", -1)):
        if not all(role in p["returns"] for p in policies):
            continue
        for a, b in itertools.permutations(policies, 2):
            if a[other] != b[other]:
                continue
            # task score: capture rate for predators, 1 - capture rate for prey
            worse_task = sign * (b["capture_rate"] - a["capture_rate"]) > margin
            gap = a["returns"][role]["total"] - b["returns"][role]["total"]
            noise = 2 * np.hypot(a["return_se"][role], b["return_se"][role])
            if worse_task and gap > noise:
                flags.append(
                    _flag(
                        "ordering",
                        f"{ROLE_TITLES[role]}: {a['name']} captures in "
                        f"{100 * a['capture_rate']:.0f}% of episodes against "
                        f"{100 * b['capture_rate']:.0f}% for {b['name']}, yet pays the "
                        f"{ROLE_TITLES[role]} more ({a['returns'][role]['total']:.2f} vs "
                        f"{b['returns'][role]['total']:.2f}): the reward prefers the worse "
                        f"{role} policy",
                        role=role,
                        better_paid=a["name"],
                        better_task=b["name"],
                    )
                )
    return flags


# One row per role whose episode-ending payoff is checked against what it could get by going
# on: the role, the continuation it is compared with, the comparison that flags it (ending
# payoff first), the flag's kind, and its message.
_TERMINATION_CHECKS = (
    (
        "prey",
        "worst_continuation",
        operator.gt,
        "early_termination",
        "prey: being captured pays {ending:.2f}, more than the worst continuation seen "
        "({continuation:.2f} discounted from a visited state): prey gain by getting caught",
    ),
    (
        "predator",
        "best_continuation",
        operator.lt,
        "stalling",
        "predators: capturing pays {ending:.2f}, less than the best continuation seen "
        "({continuation:.2f} discounted from a visited state, capture payoffs excluded): "
        "predators gain by not capturing",
    ),
)


def _termination_flags(termination: dict) -> list[dict]:
    flags = []
    for role, key, flags_it, kind, message in _TERMINATION_CHECKS:
        entry = termination.get(role)
        if not entry or entry[key] is None:
            continue
        ending, continuation = entry["ending_payoff"], entry[key]
        if flags_it(ending, continuation):
            text = message.format(ending=ending, continuation=continuation)
            flags.append(_flag(kind, text, role=role))
    return flags
