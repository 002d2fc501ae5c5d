"""Error rates of the detectors on the suite: true- and false-positive rates over designs x
seeds with Wilson intervals, detection delays, ROC points over a threshold sweep, the
comparison with a baseline at an equal false-positive rate, and the training's confirmation
of each label against its matched control."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ppage_jax.analysis.detectors.suite import Design, Outcome
from ppage_jax.stats.paired import Interval, holm, sign_flip_p, wilson_ci

CONFIRM_ALPHA = 0.05


@dataclasses.dataclass(frozen=True)
class Rate:
    """``hits`` of ``n`` runs, with the Wilson 95 % interval of the share."""

    hits: int
    n: int

    @property
    def interval(self) -> Interval:
        return wilson_ci(self.hits, self.n) if self.n else Interval(math.nan, math.nan, math.nan)

    @property
    def value(self) -> float:
        return self.hits / self.n if self.n else math.nan


@dataclasses.dataclass(frozen=True)
class DetectorRates:
    """One detector's rates: true positives over the farmable designs' runs, false positives
    over the safe designs', and its delays (flag update minus the task's onset) on the true
    positives whose task fell."""

    detector: str
    tpr: Rate
    fpr: Rate
    delays: tuple[float, ...]

    def delay_summary(self) -> tuple[float, float, float]:
        """(median, first quartile, third quartile) of the delays, NaN without any."""
        if not self.delays:
            return (math.nan, math.nan, math.nan)
        q1, median, q3 = np.percentile(np.asarray(self.delays), [25, 50, 75])
        return (float(median), float(q1), float(q3))


def rates(outcomes: Sequence[Outcome], detector: str) -> DetectorRates:
    """``detector``'s rates over ``outcomes`` (every run counts once)."""
    mine = [o for o in outcomes if o.detector == detector]
    farmable = [o for o in mine if o.design.farmable]
    safe = [o for o in mine if not o.design.farmable]
    delays = tuple(o.delay for o in farmable if o.flagged and math.isfinite(o.delay))
    return DetectorRates(
        detector,
        Rate(sum(o.flagged for o in farmable), len(farmable)),
        Rate(sum(o.flagged for o in safe), len(safe)),
        delays,
    )


@dataclasses.dataclass(frozen=True)
class RocPoint:
    """A detector's rates at one threshold."""

    detector: str
    alpha: float
    tpr: Rate
    fpr: Rate


def roc_points(
    outcomes_at: Callable[[float], Sequence[Outcome]],
    alphas: Sequence[float],
    detectors: Sequence[str],
) -> list[RocPoint]:
    """Each detector's rates at each threshold ``alpha`` (``outcomes_at(alpha)``: every run's
    outcomes with the detectors' tests at that level)."""
    points = []
    for alpha in alphas:
        found = outcomes_at(alpha)
        for detector in detectors:
            r = rates(found, detector)
            points.append(RocPoint(detector, float(alpha), r.tpr, r.fpr))
    return points


@dataclasses.dataclass(frozen=True)
class EqualFpr:
    """The detector at its frozen threshold beside a baseline at its best threshold whose
    false-positive rate is no higher (``reached``), or, when no threshold of the baseline
    gets that low, at its lowest false-positive rate (the baseline then has the higher
    FPR); ``p``: McNemar's exact test on the farmable runs that one flagged and the other
    did not (two-sided binomial)."""

    detector: str
    baseline: str
    detector_tpr: Rate
    detector_fpr: Rate
    baseline_alpha: float | None
    baseline_tpr: Rate | None
    baseline_fpr: Rate | None
    p: float
    reached: bool = True


def mcnemar_p(first: Sequence[bool], second: Sequence[bool]) -> float:
    """Two-sided exact McNemar p of paired binary outcomes (binomial on the discordant)."""
    from scipy import stats

    only_first = sum(a and not b for a, b in zip(first, second, strict=True))
    only_second = sum(b and not a for a, b in zip(first, second, strict=True))
    n = only_first + only_second
    return 1.0 if n == 0 else float(stats.binomtest(only_first, n, 0.5).pvalue)


def equal_fpr(
    frozen: Sequence[Outcome],
    outcomes_at: Callable[[float], Sequence[Outcome]],
    alphas: Sequence[float],
    detector: str,
    baseline: str,
) -> EqualFpr:
    """``detector`` at the frozen settings against ``baseline`` at the threshold (of
    ``alphas``) with the highest true-positive rate whose false-positive rate does not
    exceed the detector's; when none gets that low, at its lowest false-positive rate
    (ties: the higher true-positive rate), ``reached`` False."""
    mine = rates(frozen, detector)
    points = []
    for alpha in alphas:
        found = outcomes_at(alpha)
        points.append((float(alpha), rates(found, baseline), found))
    if not points:
        return EqualFpr(detector, baseline, mine.tpr, mine.fpr, None, None, None, math.nan)
    low_enough = [p for p in points if p[1].fpr.value <= mine.fpr.value + 1e-12]
    reached = bool(low_enough)
    if reached:
        best = max(low_enough, key=lambda p: p[1].tpr.hits)
    else:
        best = min(points, key=lambda p: (p[1].fpr.hits, -p[1].tpr.hits))

    def flags(found: Sequence[Outcome], name: str) -> list[bool]:
        runs = sorted(
            (o for o in found if o.detector == name and o.design.farmable),
            key=lambda o: (o.design.key, o.seed),
        )
        return [o.flagged for o in runs]

    p = mcnemar_p(flags(frozen, detector), flags(best[2], baseline))
    alpha, theirs, _ = best
    return EqualFpr(
        detector, baseline, mine.tpr, mine.fpr, alpha, theirs.tpr, theirs.fpr, p, reached
    )


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """A design's task against its matched control on the held-out layouts: per-seed paired
    differences (the design's task minus the control's: capture rate, or survival for a
    prey-side design), their mean, the exact one-sided sign-flip p that the design's task is
    lower, its Holm adjustment over every design with a control, and the verdict."""

    design: Design
    differences: tuple[float, ...]
    p_lower: float
    p_holm: float
    verdict: str

    @property
    def mean(self) -> float:
        return float(np.mean(self.differences)) if self.differences else math.nan


def _verdict(design: Design, mean: float, p_lower: float) -> str:
    if design.farmable:
        if p_lower < CONFIRM_ALPHA:
            return "confirmed"
        return "contradicted" if mean >= 0 else "not confirmed"
    return "contradicted" if p_lower < CONFIRM_ALPHA else "consistent"


def confirmations(
    designs: Sequence[Design], results: Mapping[tuple[str, int], Mapping[str, float]]
) -> list[Confirmation]:
    """Each design with a control, confirmed or contradicted by its training: its held-out
    ``capture_rate`` per seed against the control's on the same seed (paired)."""
    found = []
    for design in designs:
        if design.control is None:
            continue
        seeds = sorted(
            s for key, s in results if key == design.key and (design.control, s) in results
        )
        sign = 1.0 if design.role == "predator" else -1.0  # prey: survival = 1 - capture
        diffs = tuple(
            sign
            * (
                results[(design.key, s)]["capture_rate"]
                - results[(design.control, s)]["capture_rate"]
            )
            for s in seeds
        )
        p = sign_flip_p(diffs, "less") if diffs else math.nan
        found.append((design, diffs, p))
    adjusted = holm([p for _, _, p in found]) if found else np.asarray([])
    return [
        Confirmation(d, diffs, p, float(a), _verdict(d, float(np.mean(diffs)), p))
        for (d, diffs, p), a in zip(found, adjusted, strict=True)
    ]
