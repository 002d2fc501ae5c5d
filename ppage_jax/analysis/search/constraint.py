"""The search's constraint and ranking: candidates are scored on the task metric only, never
on the shaped return, and one that the reward-hacking monitor flags in the majority of its
seeds is infeasible (it ranks after every feasible candidate, and says why).

A run is *flagged* when any of the constraint's monitor checks (``hacking``,
``episode_length``, ``share``; :mod:`ppage_jax.train.run.monitor`) fired on its training curve:
a ``monitor/<check>/...`` column of its result is 1. A candidate whose design pays no
learning role a shaping term has no monitor columns and is never flagged. Opt-in, the
constraint's ``audit`` list makes a candidate infeasible when the reward audit raised one of
those flags for its design (``stalling``: capturing pays less than carrying on). Also opt-in,
``stall_margin`` bounds the predators' analytic stall margin (the largest direct payment a
sub-step minus the turn cost, from the terms' declared bounds,
:mod:`ppage_jax.analysis.audit.margin`): a candidate above it is not trained at all, and it is
recorded and ranked last with the reason (:func:`margin_reason`).

PBT's members are judged alike each interval (:func:`judge_members`), on the task metric of
their rolling block of training episodes (:func:`block_score`) and the monitor's flags on
their lineage's curve.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppage_jax.analysis.audit.margin import stall_margins
from ppage_jax.analysis.batch.monitoring import monitor_run
from ppage_jax.analysis.batch.program import take
from ppage_jax.analysis.search.spec import Constraint, SearchSpec
from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams
from ppage_jax.train.run.monitor import PREFIX


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One candidate's score: the mean task metric over its seeds, the loss (lower is
    better), the seeds the monitor flagged (with the checks), and feasibility with why not."""

    metric: float
    loss: float
    flagged: dict[int, list[str]]
    feasible: bool
    reason: str


def flagged_checks(result: Mapping[str, float], checks: Sequence[str]) -> list[str]:
    """The monitor columns of one run that fired, among ``checks``."""
    out = []
    for column, value in result.items():
        if not column.startswith(PREFIX) or not value == 1.0:
            continue
        check = column[len(PREFIX) :].split("/", 1)[0]
        if check in checks:
            out.append(column[len(PREFIX) :])
    return sorted(out)


def judge(
    results: Mapping[int, Mapping[str, float]],
    metric: str,
    direction: int,
    constraint: Constraint,
    cap: float = math.inf,
    audit_flags: Sequence[str] = (),
) -> Verdict:
    """A candidate's :class:`Verdict` from its runs' results ``{seed: {metric: value}}``; a
    non-finite metric (a Kaplan-Meier median never reached) counts as ``cap``, the step
    limit. ``audit_flags``: the reward audit's flags of the design (infeasible when one is
    in ``constraint.audit``)."""
    values = [float(r[metric]) if math.isfinite(r[metric]) else cap for r in results.values()]
    finite = [v for v in values if math.isfinite(v)]
    mean = float(np.mean(finite)) if finite else math.nan
    # an infinite metric (km_median never reached) ranks as the worst
    loss = -direction * mean if finite else math.inf
    flagged: dict[int, list[str]] = {}
    if constraint.monitor:
        for seed, result in results.items():
            checks = flagged_checks(result, constraint.checks)
            if checks:
                flagged[seed] = checks
    reasons = []
    if 2 * len(flagged) > len(results):
        seen = sorted({c for cs in flagged.values() for c in cs})
        reasons.append(
            f"the reward-hacking monitor flagged {len(flagged)} of {len(results)} seeds "
            f"({', '.join(seen)})"
        )
    audit = sorted(set(audit_flags) & set(constraint.audit))
    if audit:
        reasons.append(f"the reward audit flagged {', '.join(audit)}")
    return Verdict(mean, loss, flagged, not reasons, "; ".join(reasons))


def margin_reason(margins: Mapping[str, Mapping], limit: float | None) -> str:
    """Why a design breaks the stall-margin constraint ``limit`` (empty when it keeps it, or
    when there is no constraint). ``margins``: its per-role stall margins
    (:func:`ppage_jax.analysis.audit.margin.stall_margins`); the constraint reads the
    predators', whose task ends the episode (prey paid to keep it going are doing theirs)."""
    if limit is None:
        return ""
    pred = margins.get("predator")
    if pred is None:
        return ""
    margin = float(pred["margin"])
    if math.isnan(margin):
        return (
            f"the predators' stall margin is unknown ({', '.join(pred['unbounded'])} declare no "
            f"bounds), so the stall-margin constraint ({limit:+.4g}) cannot be checked"
        )
    if margin <= limit:
        return ""
    paid = ", ".join(f"{t} up to {v:.3g}" for t, v in pred["payments"].items() if v > 0)
    return (
        f"stall margin {margin:+.4g} > {limit:+.4g}: a sub-step without a capture can pay "
        f"predators {pred['largest_payment']:.3g} ({paid or 'nothing'}) against a cost of "
        f"{pred['cost']:.3g} (not trained)"
    )


def selection_order(candidates: Sequence[Mapping]) -> list[int]:
    """Indices of ``candidates`` (records with ``feasible``, ``loss``, ``generation``,
    ``index``) from best to worst: feasible first, then by loss, then by when proposed."""

    def key(i: int):
        c = candidates[i]
        loss = c["loss"] if c["loss"] is not None and math.isfinite(c["loss"]) else math.inf
        return (not c["feasible"], loss, c["generation"], c["index"])

    return sorted(range(len(candidates)), key=key)


# --------------------------------------------------------------------------- PBT's members
def block_score(metrics: Mapping[str, Any], metric: str) -> float:
    """The task metric of one member's rolling block of training episodes (its metrics rows
    of one interval), episode-weighted: the mean episode length (``rmst``, ``km_median``,
    ``episode_length``: truncated episodes count at the step limit), the capture rate, or
    the share not captured (``truncated_share``). NaN when no episode finished."""
    episodes = np.asarray(metrics["episodes"], np.float64)
    if "active" in metrics:
        episodes = np.where(np.asarray(metrics["active"], bool), episodes, 0.0)
    name = "capture_rate" if metric in ("capture_rate", "truncated_share") else "episode_length"
    values = np.asarray(metrics[name], np.float64)
    weights = np.where(np.isfinite(values), episodes, 0.0)
    if weights.sum() <= 0:
        return math.nan
    mean = float((weights * np.nan_to_num(values)).sum() / weights.sum())
    return 1.0 - mean if metric == "truncated_share" else mean


def judge_members(
    spec: SearchSpec,
    env: GridWorld,
    lineages: Sequence[tuple[int, list]],
    metrics: dict,
    member_params: Sequence[EnvParams],
    monitors: Sequence[Any],
    seeds: Sequence[int],
    g: int,
) -> tuple[list[dict], dict]:
    """Each PBT member's record of interval ``g`` (its block's task metric,
    :func:`block_score`; the monitor's flags on its lineage's curve, ``lineages[m]`` being
    its root and that curve; the stall margin; feasibility, rank) and its results row."""
    records, results = [], {}
    for m in range(len(seeds)):
        score = block_score(take(metrics, m), spec.metric)
        result: dict[str, float] = {spec.metric: score}
        result.update(monitor_run(monitors[lineages[m][0]], seeds[m], lineages[m][1]))
        reasons = []
        checks = flagged_checks(result, spec.constraint.checks) if spec.constraint.monitor else []
        if checks:
            reasons.append(f"the reward-hacking monitor flagged its lineage ({', '.join(checks)})")
        if spec.constraint.stall_margin is not None:
            margin = margin_reason(
                stall_margins(env, member_params[m]), spec.constraint.stall_margin
            )
            if margin:
                reasons.append(margin.replace(" (not trained)", ""))
        name = f"i{g:02d}m{m:02d}"
        loss = -spec.direction * score if math.isfinite(score) else math.inf
        records.append(
            {
                "name": name,
                "generation": g,
                "index": m,
                "member": m,
                "root": int(lineages[m][0]),
                "seeds": [int(seeds[m])],
                "metric": score,
                "loss": loss,
                "flagged_seeds": {str(seeds[m]): len(checks)} if checks else {},
                "flagged_checks": {str(seeds[m]): checks} if checks else {},
                "feasible": not reasons,
                "reason": "; ".join(reasons),
                "audit_flags": [],
            }
        )
        results[name, int(seeds[m])] = result
    order = sorted(
        range(len(records)),
        key=lambda i: (not records[i]["feasible"], records[i]["loss"], i),
    )
    for rank, i in enumerate(order):
        records[i]["rank"] = rank
    return records, results
