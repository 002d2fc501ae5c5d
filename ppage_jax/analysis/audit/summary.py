"""The audit report: per policy pair, how episodes ended (capture rate, censored time to
capture) and each role's discounted return per term and component; fire rates and the
termination check over all pairs; then the flags (:mod:`ppage_jax.analysis.audit.flags`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ppage_jax.analysis.audit.flags import audit_flags, gross_magnitudes
from ppage_jax.analysis.audit.margin import stall_margins
from ppage_jax.analysis.audit.rollouts import Variant, audit_rollouts
from ppage_jax.analysis.audit.settings import TASK_TERM, TERM_COMPONENTS, AuditSettings, role_rows
from ppage_jax.config import Config
from ppage_jax.env import GridWorld
from ppage_jax.episodes.summary import summarize_episodes
from ppage_jax.state import EnvParams

# The report's ``config`` when the audited env comes with no Config (its hash is the spec's).
SPEC_SOURCE = "env spec"


def column_names(env: GridWorld, variants: list[Variant]) -> list[tuple[str, int, int]]:
    """(column name, variant row, term column) for every term and component, in table order."""
    columns = []
    for t, term in enumerate(env.reward_terms):
        columns.append((term, 0, t))
        for v, var in enumerate(variants):
            if var.term == term:
                columns.append((f"{term}.{var.component.param}", 1 + v, t))
    return columns


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def summarize_pair(
    env: GridWorld, raw: dict, variants: list[Variant], turns: int
) -> dict[str, Any]:
    """Host-side summary of one policy pair: episode outcomes and per-role returns.

    Time to capture is censored at the step limit: ``rmst`` (restricted mean turns to
    capture) and ``km_median`` (Kaplan-Meier median; None when fewer than half the episodes
    end in a capture), with 95 % bootstrap CIs."""
    episodes = raw["episodes"]
    outcome = summarize_episodes(episodes, env, horizon=turns)
    disc = raw["discounted_returns"]  # [V, N, A, T]
    terminated = np.asarray(episodes["terminated"], bool)
    n = terminated.shape[0]
    summary: dict[str, Any] = {
        "episodes": int(n),
        "capture_rate": outcome["capture_rate"],
        "captures_per_episode": outcome["captures"],
        "episode_length": outcome["episode_length"],
        "rmst": outcome["rmst"],
        "rmst_ci": outcome["rmst_ci"],
        "km_median": _finite_or_none(outcome["km_median"]),
        "km_median_ci": [_finite_or_none(v) for v in outcome["km_median_ci"]],
        "truncated_share": outcome["truncated_share"],
        "ended": {
            "terminated": int(terminated.sum()),
            "truncated": int(round(outcome["truncated_share"] * n)),
        },
        "returns": {},
        "return_se": {},
        "shaping_share": {},
    }
    columns = column_names(env, variants)
    for role, rows in role_rows(env).items():
        role_returns = {name: float(disc[v][:, rows, t].mean()) for name, v, t in columns}
        per_episode = disc[0][:, rows, :].sum(-1).mean(-1)  # [N]
        role_returns["total"] = float(per_episode.mean())
        summary["returns"][role] = role_returns
        summary["return_se"][role] = float(per_episode.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
        gross = gross_magnitudes(role_returns, env.reward_terms)
        total = sum(gross.values())
        shaping = sum(v for t, v in gross.items() if t != TASK_TERM)
        summary["shaping_share"][role] = float(shaping / total) if total > 0 else 0.0
    return summary


def audit_rewards(
    env: GridWorld,
    params: EnvParams | None = None,
    settings: AuditSettings | None = None,
    *,
    config: Config | None = None,
) -> dict[str, Any]:
    """Run the audit (``settings`` default: ``AuditSettings()``) and return a JSON-ready
    report (``format_audit_report`` renders it). ``config``, the Config ``env`` was made from,
    names the report's ``config`` (its path, None for the package defaults) and
    ``config_hash``; without it ``config`` is ``"env spec"`` and ``config_hash`` the
    spec's digest."""
    params = env.default_params if params is None else params
    settings = AuditSettings() if settings is None else settings
    rollouts = audit_rollouts(env, params, settings)
    variants, results = rollouts["variants"], rollouts["results"]
    weights = dict(zip(env.reward_terms, np.asarray(params.reward.weights).tolist(), strict=True))
    masks = np.asarray(params.reward.role_masks)
    rows = role_rows(env)
    report: dict[str, Any] = {
        "config": SPEC_SOURCE if config is None else config.path,
        "config_hash": env.spec.digest() if config is None else config.hash(),
        "layout": {
            "size": env.layout.size,
            "predators": env.layout.n_predators,
            "prey": env.layout.n_prey,
            "obstacles": env.layout.num_obstacles,
            "block_agents_by_obstacles": env.layout.block_agents_by_obstacles,
        },
        "gamma": float(params.reward.gamma),
        "max_turns": rollouts["turns"],
        "episodes": settings.episodes,
        "seeds": [settings.seed, settings.seed + settings.episodes - 1],
        "terms": list(env.reward_terms),
        "weights": weights,
        "applies_to": {
            term: [role for role, r in rows.items() if masks[t][r].any()]
            for t, term in enumerate(env.reward_terms)
        },
        "components": {
            term: [c.param for c in TERM_COMPONENTS.get(term, ())]
            for term in env.reward_terms
            if term in TERM_COMPONENTS
        },
        "policies": [],
        "fire_rates": {},
        "termination": {},
        "stall_margin": {},
        "flags": [],
    }
    for (pred, prey), raw in results.items():
        entry = {"name": f"{pred}/{prey}", "predator_policy": pred, "prey_policy": prey}
        entry.update(summarize_pair(env, raw, variants, rollouts["turns"]))
        report["policies"].append(entry)
    report["fire_rates"] = fire_rates(env, results, variants)
    report["termination"] = termination(env, results)
    report["stall_margin"] = stall_margins(env, params)
    report["flags"] = audit_flags(env, params, report, variants, settings)
    return report


def fire_rates(env: GridWorld, results: dict, variants: list[Variant]) -> dict:
    """Per column and role: the fraction of live agent-turns on which it paid anything."""
    rates: dict[str, dict[str, float]] = {}
    for name, v, t in column_names(env, variants):
        rates[name] = {}
        for role, rows in role_rows(env).items():
            fired = sum(int(r["fires"][v][rows, t].sum()) for r in results.values())
            turns = sum(
                int(r["episodes"]["episode_length"].sum()) * int(rows.sum())
                for r in results.values()
            )
            rates[name][role] = fired / turns if turns else 0.0
    return rates


def termination(env: GridWorld, results: dict) -> dict:
    """Ending payoff against the worst (prey) / best (predators) continuation stream."""
    out = {}
    for role, rows in role_rows(env).items():
        end_sum = sum(float(r["end_sum"][rows].sum()) for r in results.values())
        end_count = sum(int(r["end_count"][rows].sum()) for r in results.values())
        visited = sum(int(r["visited"][rows].sum()) for r in results.values())
        worst = min(float(r["worst_to_go"][rows].min()) for r in results.values())
        best = max(float(r["best_to_go"][rows].max()) for r in results.values())
        out[role] = {
            "ending_payoff": end_sum / end_count if end_count else 0.0,
            "ending_events": end_count,
            "visited_states": visited,
            "worst_continuation": worst if visited else None,
            "best_continuation": best if visited else None,
        }
    return out
