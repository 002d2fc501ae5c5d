"""The detector suite's outputs: detectors.csv (every run x detector), rates.csv (each
detector's rates and delays, and its ROC points), report.md and roc.png, written atomically
into one directory."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

from ppage_jax.analysis.batch.output import csv_text
from ppage_jax.analysis.detectors.naive import NAIVE_CHECKS
from ppage_jax.analysis.detectors.rates import (
    Confirmation,
    DetectorRates,
    EqualFpr,
    Rate,
    RocPoint,
    confirmations,
    equal_fpr,
    rates,
    roc_points,
)
from ppage_jax.analysis.detectors.replay import ANY
from ppage_jax.analysis.detectors.settings import DetectorSettings
from ppage_jax.analysis.detectors.suite import (
    COMBINED,
    SUITE_DETECTORS,
    Outcome,
    Suite,
    SuiteRuns,
    detect_suite,
)
from ppage_jax.artifacts import save_figure, write_text

OUTPUTS = ("detectors.csv", "rates.csv", "report.md", "roc.png")
ROC_DETECTORS = (ANY, *NAIVE_CHECKS)
TARGET_TPR, TARGET_FPR = 0.8, 0.1


@dataclasses.dataclass(frozen=True)
class SuiteResult:
    """Everything the suite measured with its frozen settings and over the ROC sweep."""

    suite: Suite
    settings: DetectorSettings
    outcomes: tuple[Outcome, ...]
    rates: tuple[DetectorRates, ...]
    roc: tuple[RocPoint, ...]
    versus: tuple[EqualFpr, ...]
    confirmations: tuple[Confirmation, ...]

    def rate(self, detector: str) -> DetectorRates:
        return next(r for r in self.rates if r.detector == detector)


def measure(suite: Suite, read: SuiteRuns, settings: DetectorSettings) -> SuiteResult:
    """The suite's outcomes, rates, ROC points, equal-FPR comparisons and confirmations."""
    frozen = detect_suite(suite, read, settings)
    cache: dict[float, list[Outcome]] = {}

    def at(alpha: float) -> list[Outcome]:
        if alpha not in cache:
            cache[alpha] = detect_suite(suite, read, settings.with_alpha(alpha))
        return cache[alpha]

    alphas = settings.roc_alphas
    return SuiteResult(
        suite,
        settings,
        tuple(frozen),
        tuple(rates(frozen, d) for d in SUITE_DETECTORS),
        tuple(roc_points(at, alphas, ROC_DETECTORS)),
        tuple(equal_fpr(frozen, at, alphas, d, b) for d in (ANY, COMBINED) for b in NAIVE_CHECKS),
        tuple(confirmations(suite.designs, read.results)),
    )


def _number(value: float | None) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _rate_text(rate: Rate | None) -> str:
    if rate is None or not rate.n:
        return "-"
    ci = rate.interval
    return f"{rate.hits}/{rate.n} = {rate.value:.2f} [{ci.low:.2f}, {ci.high:.2f}]"


def _delay_text(r: DetectorRates) -> str:
    median, q1, q3 = r.delay_summary()
    if math.isnan(median):
        return "-"
    return f"{median:+.0f} ({q1:+.0f} to {q3:+.0f}), n = {len(r.delays)}"


def detectors_csv(result: SuiteResult) -> str:
    """One row per run and detector."""
    header = (
        "scenario", "arm", "label", "role", "seed", "detector", "flagged",
        "first_update", "onset_update", "delay_updates",
    )  # fmt: skip
    rows = [
        (
            o.design.scenario,
            o.design.arm,
            o.design.label,
            o.design.role,
            o.seed,
            o.detector,
            int(o.flagged),
            _number(o.first_update),
            _number(o.onset),
            _number(o.delay),
        )  # fmt: skip
        for o in result.outcomes
    ]
    return csv_text(header, rows)


def rates_csv(result: SuiteResult) -> str:
    """Each detector's rates at the frozen settings (``alpha`` empty), then its ROC points."""
    header = (
        "detector", "alpha", "tp", "farmable_runs", "tpr", "tpr_low", "tpr_high",
        "fp", "safe_runs", "fpr", "fpr_low", "fpr_high", "delay_median", "delay_q1", "delay_q3",
    )  # fmt: skip

    def row(detector: str, alpha: float | None, tpr: Rate, fpr: Rate, delays=None) -> tuple:
        t, f = tpr.interval, fpr.interval
        median, q1, q3 = delays.delay_summary() if delays else (math.nan,) * 3
        return (
            detector, _number(alpha), tpr.hits, tpr.n, t.point, t.low, t.high,
            fpr.hits, fpr.n, f.point, f.low, f.high, _number(median), _number(q1), _number(q3),
        )  # fmt: skip

    rows = [row(r.detector, None, r.tpr, r.fpr, r) for r in result.rates]
    rows += [row(p.detector, p.alpha, p.tpr, p.fpr) for p in result.roc]
    return csv_text(header, rows)


def plot_roc(result: SuiteResult, path: Path) -> Path:
    """roc.png: each ROC detector's (FPR, TPR) over the threshold sweep, the frozen point
    circled, the target region shaded."""
    from ppage_jax.viz import figures as plt

    fig, axes = plt.subplots(1, 1, figsize=(4.8, 4.4), squeeze=False)
    ax = axes[0][0]
    ax.axvspan(0, TARGET_FPR, ymin=TARGET_TPR, ymax=1.0, color="0.9", label="target")
    for detector in ROC_DETECTORS:
        points = sorted((p.fpr.value, p.tpr.value) for p in result.roc if p.detector == detector)
        xs = [0.0, *(x for x, _ in points), 1.0]
        ys = [0.0, *(y for _, y in points), 1.0]
        (line,) = ax.plot(xs, ys, marker=".", label=detector)
        frozen = result.rate(detector)
        ax.plot(
            [frozen.fpr.value], [frozen.tpr.value], "o", mfc="none", ms=10, color=line.get_color()
        )
    ax.plot([0, 1], [0, 1], ":", color="0.5", lw=0.8)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("false-positive rate (safe runs)")
    ax.set_ylabel("true-positive rate (farmable runs)")
    ax.set_title(
        f"ROC over alpha (circles: frozen alpha = {result.settings.monitor.alpha:g})", fontsize=9
    )
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def report_text(result: SuiteResult, commits: Sequence[str] = ()) -> str:
    """report.md: the designs, each detector's rates and delays, the target, the equal-FPR
    comparisons and the training's confirmations."""
    suite = result.suite
    lines = [
        "# Detector suite",
        "",
        f"Suite `{suite.source}`, settings `{result.settings.source}`"
        + (f", commits {', '.join(commits)}" if commits else "")
        + ".",
        f"{len(suite.designs)} designs over {len(suite.scenarios)} scenarios: "
        f"{sum(d.farmable for d in suite.designs)} farmable, "
        f"{sum(not d.farmable for d in suite.designs)} safe (labels by algebra, before the run).",
        "",
        "## Rates at the frozen settings",
        "",
        "Runs are designs x seeds. TPR over the farmable designs' runs, FPR over the safe "
        "designs'; Wilson 95 % intervals. Delay: the flag's update minus the update at which "
        "the task's 20-update mean peaked, on the flagged farmable runs whose task fell "
        "(median, IQR; negative: flagged before the fall; the audit flags at update 0).",
        "",
        "| detector | TPR | FPR | delay (updates) |",
        "|---|---|---|---|",
    ]
    for r in result.rates:
        lines.append(
            f"| {r.detector} | {_rate_text(r.tpr)} | {_rate_text(r.fpr)} | {_delay_text(r)} |"
        )
    combined = result.rate(COMBINED)
    hit = combined.tpr.value >= TARGET_TPR and combined.fpr.value <= TARGET_FPR
    measured = f"TPR {combined.tpr.value:.2f}, FPR {combined.fpr.value:.2f}"
    alone = result.rate(ANY)
    lines += [
        "",
        f"Target (TPR >= {TARGET_TPR}, FPR <= {TARGET_FPR}) for `{COMBINED}`: "
        + ("met" if hit else "not met")
        + f" ({measured}). For `{ANY}`: TPR {alone.tpr.value:.2f}, FPR {alone.fpr.value:.2f}.",
        "",
        "## At an equal false-positive rate",
        "",
        "The detector at its frozen alpha beside a naive baseline at the alpha (of the ROC "
        "sweep) with the best TPR whose FPR is no higher; where no alpha of the baseline gets "
        "that low, the baseline at its lowest FPR (marked *, a higher FPR than the "
        "detector's). p: exact McNemar on the farmable runs.",
        "",
        "| detector | baseline | detector TPR | detector FPR | baseline alpha | baseline TPR "
        "| baseline FPR | p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in result.versus:
        alpha = "-" if v.baseline_alpha is None else f"{v.baseline_alpha:g}"
        alpha += "" if v.reached else " *"
        lines.append(
            f"| {v.detector} | {v.baseline} | {_rate_text(v.detector_tpr)} | "
            f"{_rate_text(v.detector_fpr)} | {alpha} | {_rate_text(v.baseline_tpr)} | "
            f"{_rate_text(v.baseline_fpr)} | {v.p:.3g} |"
        )
    contradicted = {c.design.key for c in result.confirmations if c.verdict == "contradicted"}
    if contradicted:
        kept = [o for o in result.outcomes if o.design.key not in contradicted]
        lines += [
            "",
            "## Without the labels that training contradicted",
            "",
            f"The same rates with {', '.join(sorted(contradicted))} left out (their labels "
            "stand in the tables above; this only shows what the contradiction changes).",
            "",
            "| detector | TPR | FPR |",
            "|---|---|---|",
        ]
        for detector in (ANY, COMBINED, *NAIVE_CHECKS):
            r = rates(kept, detector)
            lines.append(f"| {detector} | {_rate_text(r.tpr)} | {_rate_text(r.fpr)} |")
    lines += ["", "## Per design", "", _design_table(result), "", "## Labels against training", ""]
    lines += [
        "Each design's held-out task (capture rate; survival for a prey-side design) minus its "
        "matched control's on the same seed; p: exact one-sided sign-flip that the design's "
        "task is lower; Holm over every design with a control. A farmable label is confirmed "
        "at raw p < 0.05 and contradicted when the mean difference is not negative; a safe "
        "one is contradicted at raw p < 0.05.",
        "",
        "| design | label | control | differences | mean | p | Holm p | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in result.confirmations:
        diffs = ", ".join(f"{d:+.3f}" for d in c.differences)
        lines.append(
            f"| {c.design.key} | {c.design.label} | {c.design.control} | {diffs} | "
            f"{c.mean:+.3f} | {c.p_lower:.3g} | {c.p_holm:.3g} | {c.verdict} |"
        )
    return "\n".join(lines) + "\n"


def _design_table(result: SuiteResult) -> str:
    shown = (ANY, COMBINED, "audit", "monitor/below_start", "monitor/drift", *NAIVE_CHECKS)
    head = "| design | label | why | " + " | ".join(shown) + " |"
    rows = [head, "|" + "---|" * (3 + len(shown))]
    for design in result.suite.designs:
        cells = []
        for detector in shown:
            mine = [o for o in result.outcomes if o.design == design and o.detector == detector]
            cells.append(f"{sum(o.flagged for o in mine)}/{len(mine)}")
        rows.append(f"| {design.key} | {design.label} | {design.why} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write_suite(result: SuiteResult, out: Path, commits: Sequence[str] = ()) -> list[Path]:
    """detectors.csv, rates.csv, report.md and roc.png in ``out``, each written atomically."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        write_text(out / "detectors.csv", detectors_csv(result)),
        write_text(out / "rates.csv", rates_csv(result)),
        write_text(out / "report.md", report_text(result, commits)),
        plot_roc(result, out / "roc.png"),
    ]
