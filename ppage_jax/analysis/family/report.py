"""report.md's sections for the declared analysis (:mod:`.declare`, tested by
:mod:`.paired`): the endpoint and prediction as declared, the arms on the normalised
score, and the family's comparisons with their statistics; and the whole report of a sweep
with ``scenarios``."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ppage_jax.analysis.family.declare import AnalysisSpec, Comparison
from ppage_jax.analysis.family.endpoints import ENDPOINTS
from ppage_jax.analysis.family.paired import (
    arm_summaries,
    family_results,
    power_line,
    scales,
    seed_tables,
    write_comparisons,
)
from ppage_jax.analysis.family.signals import lead_lag
from ppage_jax.analysis.sweep.writer import curves_path, read_curves
from ppage_jax.artifacts import write_text
from ppage_jax.train.run.monitor import MonitorConfig


def analysis_of(info: dict) -> AnalysisSpec:
    """The declared analysis a sweep.json records (``analysis``; the default when none)."""
    raw = info.get("analysis") or {}
    comparisons = tuple(
        Comparison(tuple((label, int(sign)) for label, sign in c["terms"]), c["endpoint"])
        for c in raw.get("comparisons", [])
    )
    return AnalysisSpec(
        raw.get("endpoint", "score"),
        comparisons,
        raw.get("prediction", ""),
        float(raw.get("take_off", 0.5)),
        float(raw.get("alpha", 0.05)),
        tuple(raw.get("signals") or ()),
        int(raw.get("signal_window", 4)),
        raw.get("signal_control"),
        bool(raw.get("declared", False)),
    )


def _num(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


# Fewer seeds than this give a point estimate and no interval (a bootstrap over one or two
# seeds, or a Wilson interval of 1/1, says more than the data do).
MIN_INTERVAL_SEEDS = 3


def interval_cell(interval, n: int, fmt=_num) -> str:
    """A ``point [low, high]`` table cell of an Interval over ``n`` seeds; under
    :data:`MIN_INTERVAL_SEEDS` seeds (or without bounds) the point alone and why there is no
    interval; "-" without an interval."""
    if interval is None:
        return "-"
    if n < MIN_INTERVAL_SEEDS or not math.isfinite(interval.low):
        return f"{fmt(interval.point)} (n={n}: no CI under {MIN_INTERVAL_SEEDS} seeds)"
    return f"{fmt(interval.point)} [{fmt(interval.low)}, {fmt(interval.high)}]"


def _two(x: float) -> str:
    return f"{x:.2f}"


def _three(x: float) -> str:
    return f"{x:.3f}"


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 1e-4 else f"{p:.4f}" if p < 0.01 else f"{p:.3f}"


def family_lines(
    directory: str | Path, analysis: AnalysisSpec, scenario: str | None = None
) -> list[str]:
    """The declared analysis of the sweep in ``directory``, tested (and comparisons.csv
    written there); no lines when nothing is declared and no score can be computed. For one
    ``scenario`` of a sweep with scenarios only its arms are shown: the family, which names
    arms of every scenario, is tested in the top directory's report."""
    directory = Path(directory)
    try:
        tables = seed_tables(directory, analysis.endpoints)
    except ValueError as err:  # no headroom (refused before training when declared)
        if not analysis.declared:
            return []
        return ["", "## Declared analysis", "", f"Not computed: {err}"]
    if analysis.declared:
        lines = ["", "## Declared analysis", ""]
        lines.append(
            f"Declared in the sweep file before the run: primary endpoint "
            f"`{analysis.endpoint}` ({ENDPOINTS[analysis.endpoint][0]}), "
            f"{len(analysis.comparisons)} comparison(s) in the family, Holm-corrected "
            f"together at {analysis.alpha:g}."
        )
        if analysis.prediction:
            lines += ["", f"Prediction: {analysis.prediction}"]
    else:
        lines = ["", "## Normalised score", ""]
        lines.append(
            "No analysis is declared in the sweep file (`sweep.analysis`: the endpoint, the "
            "family of paired comparisons and the prediction, written before the run), so "
            "nothing is tested; the arms on the normalised score:"
        )
    baselines = scales(directory)
    if baselines:
        lines += [""] + [
            f"Score scale{f' ({prefix[:-1]})' if prefix else ''}: random {low:.4g}, "
            f"chase {high:.4g} turns of RMST (1 score = {low - high:.4g} turns)."
            for prefix, (low, high) in baselines.items()
        ]
    summaries = arm_summaries(tables, analysis.take_off)
    if summaries:
        lines += [
            "",
            f"| arm | seeds | score IQM [95 % CI] | mean score | RMST IQM [95 % CI] | "
            f"P(take-off: score >= {analysis.take_off:g}) [Wilson 95 %] |",
            "|---|---|---|---|---|---|",
        ]
        for label, e in summaries.items():
            n, t = e["n"], e["take_off"]
            lines.append(
                f"| {label} | {n} | {interval_cell(e['score'], n, _three)} | "
                f"{e['mean_score']:.3f} | {interval_cell(e['rmst'], n)} | "
                f"{interval_cell(t, n, _two)} ({round(t.point * n)}/{n}) |"
            )
    if scenario is not None:
        return lines + [
            "",
            f"This is scenario `{scenario}` of a sweep with scenarios: its declared family is "
            f"tested in the sweep's top report (`../report.md`, `../comparisons.csv`).",
        ]
    tested = family_results(analysis, tables)
    write_comparisons(directory, tested)
    if tested:
        lines += [
            "",
            "Paired by seed (seed i of every arm trains from the same key). Difference: mean "
            "over seeds of the signed difference (first arm minus second), BCa 95 % CI; in "
            "turns: the same for RMST (negative: the first arm captures sooner); p: exact "
            "two-sided sign-flip test; Holm: adjusted over the family; P(first better): "
            "share of paired seeds on which the first arm is better (ties half), Wilson 95 % "
            "CI; dz: mean difference over its SD.",
            "",
            "| comparison | endpoint | seeds | difference [95 % CI] | in turns [95 % CI] | "
            "p | Holm p | P(first better) | dz | holds at alpha |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for t in tested:
            lines.append(
                f"| {t.comparison.name} | {t.comparison.endpoint} | {t.n} | "
                f"{interval_cell(t.difference, t.n)} | {interval_cell(t.turns, t.n)} | "
                f"{_p(t.p)} | {_p(t.p_holm)} | {interval_cell(t.better, t.n, _two)} | "
                f"{_num(t.dz)} | {'yes' if t.p_holm < analysis.alpha else 'no'} |"
            )
        lines += ["", power_line(tested, analysis.alpha)]
    if analysis.signals:
        lines += signal_lines(directory, analysis)
    return lines


def signal_lines(directory: Path, analysis: AnalysisSpec) -> list[str]:
    """report.md's "Which signal moves first": :func:`lead_lag` of the task's signal (the
    first declared) against each other one, per arm against the declared control."""
    task, *others = analysis.signals
    control = analysis.signal_control
    lines = ["", "## Which signal moves first", ""]
    if control is None:
        return lines + ["Not computed: the analysis names no `signal_control`."]
    info = json.loads((directory / "sweep.json").read_text())
    per_update = info.get("env_steps_per_update") or 1
    cfg = MonitorConfig(**(((info.get("monitor") or {}).get("config")) or {}))
    lines.append(
        f"Per seed, the update at which each training signal turned worse than in the "
        f"control `{control}`'s run of the same seed: its mean over the episodes that "
        f"finished in the last {analysis.signal_window} updates worse than the control's by "
        f"{cfg.min_change:g} of it, for {cfg.patience} updates in a row "
        f"(ppage_jax.analysis.family.signals). Lead: the task signal `{task}`'s turn minus "
        f"the other signal's, in updates (positive: the other signal moved first), median "
        f"over the seeds in which both turned, with the exact sign-flip p."
    )
    lines += [
        "",
        f"| arm | signal | seeds | it turned | `{task}` turned | both | it first | "
        f"`{task}` first | same update | median lead (updates) | p |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    curves = read_curves(curves_path(directory))
    reference = {m: by_arm[control] for m, by_arm in curves.items() if control in by_arm}
    for arm in info["arms"]:
        if arm == control:
            continue
        arm_curves = {m: by_arm[arm] for m, by_arm in curves.items() if arm in by_arm}
        for other in others:
            lag = lead_lag(
                arm_curves,
                reference,
                other,
                task,
                analysis.signal_window,
                cfg.min_change,
                cfg.patience,
            )
            turned = [sum(math.isfinite(t[i]) for t in lag.turns.values()) for i in (0, 1)]
            lines.append(
                f"| {arm} | `{other}` | {len(lag.turns)} | {turned[0]} | {turned[1]} | "
                f"{lag.both} | {lag.first_sooner} | {lag.second_sooner} | {lag.ties} | "
                f"{_num(lag.lead / per_update)} | {_num(lag.p)} |"
            )
    return lines


def write_scenario_report(directory: str | Path) -> Path:
    """report.md of a sweep with ``scenarios``: each scenario's baselines and arms, the
    declared analysis over all of them, and links to each scenario's own report."""
    out = Path(directory)
    info = json.loads((out / "sweep.json").read_text())
    analysis = analysis_of(info)
    lines = [f"# Sweep report: {info.get('sweep', '')}", ""]
    lines.append(
        f"{len(info['scenarios'])} scenarios ({', '.join(info['scenarios'])}), each its own "
        f"sweep directory, {len(info['arms'])} arms x {info['seeds']} seeds in each; "
        f"{info.get('seconds', 0):.0f} s in all."
    )
    lines += family_lines(out, analysis)
    lines += ["", "## Scenarios", ""]
    lines += [f"- [{name}]({name}/report.md)" for name in info["scenarios"]]
    path = out / "report.md"
    write_text(path, "\n".join(lines) + "\n")
    return path
