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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from ppage_jax.analysis.search.spec import Constraint
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
