"""report.md's sections for the declared analysis (:mod:`.declare`, tested by
:mod:`.paired`): the endpoint and prediction as declared, the arms on the normalised
score, and the family's comparisons with their statistics; and the whole report of a sweep
with ``scenarios``."""

from __future__ import annotations

import dataclasses
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
    sweep_dirs,
    write_comparisons,
)
from ppage_jax.analysis.family.signals import lead_lag
from ppage_jax.analysis.sweep.writer import curves_path, read_curves
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
        int(raw.get("signal_window", 5)),
        bool(raw.get("declared", False)),
    )


def _num(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


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
            rmst = e["rmst"]
            rmst_cell = f"{_num(rmst.point)} [{_num(rmst.low)}, {_num(rmst.high)}]" if rmst else "-"
            t = e["take_off"]
            lines.append(
                f"| {label} | {e['n']} | {e['score'].point:.3f} [{e['score'].low:.3f}, "
                f"{e['score'].high:.3f}] | {e['mean_score']:.3f} | {rmst_cell} | "
                f"{t.point:.2f} [{t.low:.2f}, {t.high:.2f}] ({round(t.point * e['n'])}/{e['n']}) |"
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
            turns = (
                f"{_num(t.turns.point)} [{_num(t.turns.low)}, {_num(t.turns.high)}]"
                if t.turns
                else "-"
            )
            lines.append(
                f"| {t.comparison.name} | {t.comparison.endpoint} | {t.n} | "
                f"{_num(t.difference.point)} [{_num(t.difference.low)}, "
                f"{_num(t.difference.high)}] | {turns} | {_p(t.p)} | {_p(t.p_holm)} | "
                f"{t.better.point:.2f} [{t.better.low:.2f}, {t.better.high:.2f}] | "
                f"{_num(t.dz)} | {'yes' if t.p_holm < analysis.alpha else 'no'} |"
            )
        lines += ["", power_line(tested, analysis.alpha)]
    if analysis.signals:
        lines += signal_lines(directory, analysis)
    return lines


def signal_lines(directory: Path, analysis: AnalysisSpec) -> list[str]:
    """report.md's "Which signal moves first": :func:`lead_lag` of the task's signal (the
    first declared) against each other one, per arm (every scenario's)."""
    task, *others = analysis.signals
    lines = ["", "## Which signal moves first", ""]
    lines.append(
        f"Per seed, the update at which each training signal turned bad: its episode-weighted "
        f"level over the last {analysis.signal_window} blocks of at least the monitor's "
        f"min_episodes episodes fell behind its best earlier window by the monitor's "
        f"minimum change, held for its patience, after its warm-up "
        f"(ppage_jax.analysis.family.signals). "
        f"Lead: the task signal `{task}`'s turn minus the other signal's, in updates "
        f"(positive: the other signal moved first), median over the seeds in which both "
        f"turned, with the exact sign-flip p."
    )
    lines += [
        "",
        f"| arm | signal | seeds | turned | `{task}` turned | both | it first | `{task}` first | "
        f"same update | median lead (updates) | p |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for prefix, path in sweep_dirs(directory):
        info = json.loads((path / "sweep.json").read_text())
        per_update = info.get("env_steps_per_update") or 1
        monitor = info.get("monitor") or {}
        cfg = MonitorConfig(**(monitor.get("config") or {}))
        cfg = dataclasses.replace(cfg, window=analysis.signal_window)
        after = int(monitor.get("warmup_updates") or 0) * per_update
        curves = read_curves(curves_path(path))
        for arm in info["arms"]:
            arm_curves = {m: by_arm[arm] for m, by_arm in curves.items() if arm in by_arm}
            if "episodes" not in arm_curves:
                continue
            for other in others:
                lag = lead_lag(arm_curves, other, task, cfg, after)
                turned = [sum(math.isfinite(t[i]) for t in lag.turns.values()) for i in (0, 1)]
                lines.append(
                    f"| {prefix}{arm} | `{other}` | {len(lag.turns)} | {turned[0]} | "
                    f"{turned[1]} | {lag.both} | {lag.first_sooner} | {lag.second_sooner} | "
                    f"{lag.ties} | {_num(lag.lead / per_update)} | {_num(lag.p)} |"
                )
    return lines
