"""report.md and plots of a sweep directory (results.csv, curves.csv, sweep.json).

Headline metrics are task metrics, never the shaped total, led by the censored time to
capture: the restricted mean time to capture (``rmst``: censored at the step limit, so
episodes that never end in a capture count, unlike a mean over captured episodes), the
Kaplan-Meier median, the capture rate, the share of episodes that hit the step limit, the
episode length, and the base-reward return per role at unit weight. Each arm gets the
interquartile mean over its seeds with a 95 % stratified-bootstrap CI, and, per reference
arm (``baseline``, one or a list), the probability that a run of the arm beats a run of the
reference (with CI). The mean steps to capture of the captured episodes only is a
survivor-biased diagnostic, never a headline. Per-term returns per role (as paid) are
diagnostics. Learning curves show the mean over seeds with a 95 % bootstrap band of that
mean. The Kaplan-Meier median time to capture of each seed is summarised per arm beside them
(it is infinite for a seed that captured in under half its episodes). Then the reward audit
run before training (audit.csv) and the reward-hacking monitor's flags per arm (the
``monitor/`` columns of results.csv). Each section is one function returning its lines;
:func:`write_report` composes them, and the plots are :mod:`ppage_jax.analysis.sweep.figures`'s.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ppage_jax.analysis.batch.auditing import AUDIT_FILE, read_audit, stall_margin_of
from ppage_jax.analysis.batch.monitoring import FIRST
from ppage_jax.analysis.family.endpoints import HEADLINE
from ppage_jax.analysis.family.report import (
    MIN_INTERVAL_SEEDS,
    analysis_of,
    family_lines,
    interval_cell,
    write_scenario_report,
)
from ppage_jax.analysis.sweep.baselines import BASELINES_FILE, read_baselines
from ppage_jax.analysis.sweep.figures import plot_report
from ppage_jax.analysis.sweep.flag_timing import WINDOW, flag_timing_lines
from ppage_jax.analysis.sweep.writer import curves_path, read_curves, read_results
from ppage_jax.artifacts import write_text
from ppage_jax.episodes.metrics import diagnostics
from ppage_jax.stats import bootstrap as stats
from ppage_jax.stats.paired import wilson_ci
from ppage_jax.train.run.monitor import CHECKS, PREFIX

# Shown after the headline, labelled: biased towards arms whose slow episodes never end.
DIAGNOSTICS = diagnostics()
BOOTSTRAP_REPS = 2000


def _finite(values) -> np.ndarray:
    arr = np.asarray(list(values), np.float64)
    return arr[np.isfinite(arr)]


def _seed_map(results: dict, metric: str, arm: str, cap: float | None) -> dict[int, float]:
    """An arm's per-seed values of ``metric``, NaN dropped; an infinite KM median (under
    half the episodes captured) counts as the step limit ``cap``, a lower bound of it."""
    out = {}
    for seed, value in results[metric].get(arm, {}).items():
        if metric == "km_median" and cap is not None and value == math.inf:
            value = float(cap)
        if math.isfinite(value):
            out[seed] = float(value)
    return out


def _seed_values(results: dict, metric: str, arm: str, cap: float | None) -> np.ndarray:
    """:func:`_seed_map`'s values, in seed order."""
    values = _seed_map(results, metric, arm, cap)
    return np.asarray([values[s] for s in sorted(values)], np.float64)


def paired_improvement(
    mine: dict[int, float], theirs: dict[int, float], higher: bool
) -> tuple[stats.Interval, int] | None:
    """P(improvement) on paired seeds: the share of the seeds both arms have on which
    ``mine`` is better (ties half), with its Wilson 95 % CI (which does not collapse to a
    zero-width interval at 0 or 1; NaN bounds under :data:`MIN_INTERVAL_SEEDS` seeds), and
    the number of those seeds; None when they share none."""
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    sign = 1.0 if higher else -1.0
    diffs = np.asarray([sign * (mine[s] - theirs[s]) for s in seeds])
    wins = float((diffs > 0).sum() + 0.5 * (diffs == 0).sum())
    if len(seeds) < MIN_INTERVAL_SEEDS:
        return stats.Interval(wins / len(seeds), math.nan, math.nan), len(seeds)
    return wilson_ci(wins, len(seeds)), len(seeds)


def headline_stats(
    results: dict,
    arms: list[str],
    baseline: str | Sequence[str],
    cap: float | None = None,
    metrics: dict | None = None,
) -> dict:
    """{metric: {arm: {"n", "iqm", "low", "high", "poi": {reference: Interval}}}} over
    ``metrics`` (default :data:`HEADLINE`), P(improvement) against every reference arm of
    ``baseline`` (one name or several) on paired seeds (:func:`paired_improvement`; the
    number of paired seeds in ``"poi_n"``); ``cap``: the evaluation's step limit (see
    :func:`_seed_map`)."""
    references = [baseline] if isinstance(baseline, str) else list(baseline)
    out: dict = {}
    for metric, (_, higher) in (HEADLINE if metrics is None else metrics).items():
        if metric not in results:
            continue
        out[metric] = {}
        for arm in arms:
            values = _seed_values(results, metric, arm, cap)
            entry: dict = {"n": int(values.size), "poi": {}, "poi_n": {}}
            if values.size >= MIN_INTERVAL_SEEDS:
                ci = stats.bootstrap_ci(values, "iqm", reps=BOOTSTRAP_REPS)
                entry.update(iqm=ci.point, low=ci.low, high=ci.high)
            elif values.size:  # a point, no interval
                entry.update(iqm=float(stats.iqm(values)), low=math.nan, high=math.nan)
            for ref in references:
                if arm == ref:
                    continue
                mine, theirs = (
                    _seed_map(results, metric, arm, cap),
                    _seed_map(results, metric, ref, cap),
                )
                paired = paired_improvement(mine, theirs, higher)
                if paired is not None:
                    entry["poi"][ref], entry["poi_n"][ref] = paired
            out[metric][arm] = entry
    return out


def _shown_path(text: str) -> str:
    """A path as the report shows it: relative to the current directory when below it."""
    try:
        return str(Path(text).resolve().relative_to(Path.cwd().resolve())) if text else text
    except ValueError:
        return text


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


def write_report(output_dir: str | Path) -> Path:
    """Write report.md, headline.png and curves.png into ``output_dir``; return report.md."""
    out = Path(output_dir)
    info = json.loads((out / "sweep.json").read_text())
    if isinstance(info.get("scenarios"), dict):  # a sweep with scenarios
        return write_scenario_report(out)
    results = read_results(out / "results.csv")
    curves = read_curves(curves_path(out)) if curves_path(out).exists() else {}
    arms = list(info["arms"])
    references = list(info.get("baselines") or [info["baseline"]])
    cap = info.get("eval_step_limit")
    head = headline_stats(results, arms, references, cap)
    diagnostics = headline_stats(results, arms, references, cap, DIAGNOSTICS)
    lines = header_lines(info)
    lines += arm_lines(info, arms)
    lines += headline_lines(out, info, head, diagnostics, references)
    lines += km_median_lines(results, arms, cap)
    lines += term_return_lines(results, info["terms"], arms)
    lines += audit_lines(out / AUDIT_FILE, arms, info.get("audit", True))
    lines += monitor_lines(results, arms, info.get("monitor"))
    lines += timing_lines(info, results, curves, arms)
    lines += outcome_lines(out / AUDIT_FILE, results, head, arms, references)
    plots = plot_report(out, head, curves, arms)
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    report = out / "report.md"
    write_text(report, "\n".join(lines) + "\n")
    return report


def header_lines(info: dict) -> list[str]:
    """report.md's title and its lines on the config, the seeds, the evaluation and the
    timings (sweep.json's ``info``)."""
    lines = [f"# Sweep report: {_shown_path(info.get('sweep', ''))}", ""]
    lines.append(
        f"Config `{info['config']}` (hash {info['config_hash']}); terms "
        f"{', '.join(info['terms'])}; {info['seeds']} seeds per arm (training seeds "
        f"{info['train_seeds'][0]}-{info['train_seeds'][1]}, paired across arms); "
        f"evaluation of the {info.get('eval_policy', 'greedy')} policy on held-out "
        f"seeds {info['eval_seeds'][0]}-{info['eval_seeds'][1]}, one episode each"
        + (f", capped at {info['eval_max_steps']} turns." if info.get("eval_max_steps") else ".")
    )
    if "seconds" in info:
        lines.append(
            f"{info['runs']} runs on {info['devices']} {info['platform']} device(s) "
            f"in {info.get('chunks', '?')} chunk(s) of {info.get('chunk_size')}: "
            f"{info['seconds']:.0f} s ({info.get('compile_seconds', 0):.0f} s "
            f"compiling)."
        )
    return lines


def arm_lines(info: dict, arms: list[str]) -> list[str]:
    """report.md's "Arms": each arm's weight per term, its source and the training
    hyperparameters it sets (a column only when some arm sets one)."""
    hyper = any("hyperparams" in info["arms"][arm] for arm in arms)  # training settings
    lines = [
        "",
        "## Arms",
        "",
        "| arm | "
        + " | ".join(info["terms"])
        + " | source |"
        + (" hyperparams |" if hyper else ""),
        "|---|" + "---|" * (len(info["terms"]) + 1 + hyper),
    ]
    for arm in arms:
        w = info["arms"][arm]["weights"]
        settings = info["arms"][arm].get("hyperparams", {})
        lines.append(
            f"| {arm} | "
            + " | ".join(_fmt(w[t]) for t in info["terms"])
            + f" | {info['arms'][arm]['source']} |"
            + (" " + ", ".join(f"{k}={v:g}" for k, v in settings.items()) + " |" if hyper else "")
        )
    return lines


def headline_lines(
    out: Path, info: dict, head: dict, diagnostics: dict, references: list[str]
) -> list[str]:
    """report.md's "Task metrics (headline)": the headline table, the fixed baselines, the
    declared family of comparisons, then the survivor-biased diagnostics, labelled."""
    against = ", ".join(f"`{r}`" for r in references)
    lines = [
        "",
        "## Task metrics (headline)",
        "",
        f"IQM over seeds [95 % stratified-bootstrap CI]; P(improvement vs X) = the share of "
        f"paired seeds (seed i of both arms from the same key) on which the arm beats "
        f"reference arm X ({against}; ties count half), [Wilson 95 % CI] (n paired seeds). "
        f"RMST is the mean time to capture with episodes censored at the step "
        f"limit; a seed whose Kaplan-Meier median is not reached counts as the step limit "
        f"(a lower bound).",
        "",
    ]
    lines += metric_table(head, HEADLINE, references)
    lines += baseline_lines(read_baselines(out / BASELINES_FILE))
    lines += family_lines(out, analysis_of(info), info.get("scenario"))
    if diagnostics:
        lines += [
            "",
            "Diagnostic, not a headline: the mean over captured episodes only is "
            "survivor-biased (an arm that rarely captures, quickly when it does, looks fast).",
            "",
        ]
        lines += metric_table(diagnostics, DIAGNOSTICS, references)
    return lines


def term_return_lines(results: dict, terms: list[str], arms: list[str]) -> list[str]:
    """report.md's per-term return per agent, by role (as paid; mean over seeds): a term
    that paid a role nothing in every arm is left out, and so is a role no term paid."""
    lines = [
        "",
        "## Per-term return per agent, by role (as paid; mean over seeds)",
        "",
        "Diagnostics only: shaped totals are not comparable across arms.",
        "",
    ]
    for role in ("predator", "prey"):
        means = {}
        for t in list(terms) + ["total"]:
            for arm in arms:
                values = _finite(results.get(f"return/{role}/{t}", {}).get(arm, {}).values())
                means[t, arm] = float(values.mean()) if values.size else math.nan
        # a term that paid this role nothing in every arm is left out
        shown = [
            t for t in terms if any(math.isfinite(means[t, a]) and means[t, a] != 0 for a in arms)
        ]
        totals = [means["total", a] for a in arms if math.isfinite(means["total", a])]
        if not totals or (not shown and not any(totals)):
            continue  # no rows, or no term paid this role anything (it does not learn)
        lines += [
            f"**{role}**",
            "",
            "| arm | " + " | ".join(shown) + " | total |",
            "|---|" + "---|" * (len(shown) + 1),
        ]
        for arm in arms:
            lines.append(
                f"| {arm} | "
                + " | ".join(_fmt(means[t, arm]) for t in shown)
                + f" | {_fmt(means['total', arm])} |"
            )
        lines.append("")
    return lines


def timing_lines(info: dict, results: dict, curves: dict, arms: list[str]) -> list[str]:
    """report.md's timing of the monitor's flags (:func:`flag_timing_lines`), with the
    window and warm-up the monitor ran with (sweep.json's ``monitor``)."""
    watched = info.get("monitor") or {}
    window = (watched.get("config") or {}).get("window", WINDOW)
    after = watched.get("warmup_updates", 0) * info.get("env_steps_per_update", 0)
    return flag_timing_lines(results, curves, arms, window, after)


def _poi_cell(poi: stats.Interval | None, is_reference: bool, n: int | None = None) -> str:
    """A P(improvement) [CI] table cell, with its number of paired seeds."""
    if poi is None:
        return "reference" if is_reference else "-"
    cell = interval_cell(poi, n or 0, lambda x: f"{x:.2f}")
    return cell if "no CI" in cell or not n else f"{cell} (n={n})"


def _iqm_cell(entry: dict) -> str:
    """An IQM [CI] table cell ("-" without values; no interval under the minimum seeds)."""
    if "iqm" not in entry:
        return "-"
    ci = stats.Interval(entry["iqm"], entry["low"], entry["high"])
    return interval_cell(ci, entry["n"], _fmt)


def metric_table(head: dict, labels: dict, references: list[str]) -> list[str]:
    """The rows of a headline-style table: metric, arm, n, IQM [CI], then one
    P(improvement) [CI] column per reference arm."""
    lines = [
        "| metric | arm | n | IQM [95 % CI] | "
        + " | ".join(f"P(improvement vs {r}) [95 % CI]" for r in references)
        + " |",
        "|---|---|---|---|" + "---|" * len(references),
    ]
    for metric, per_arm in head.items():
        label, higher = labels[metric]
        label += " (higher is better)" if higher else " (lower is better)"
        for arm, e in per_arm.items():
            iqm = _iqm_cell(e)
            pois = []
            for ref in references:
                pois.append(_poi_cell(e["poi"].get(ref), arm == ref, e["poi_n"].get(ref)))
            lines.append(f"| {label} | {arm} | {e['n']} | {iqm} | " + " | ".join(pois) + " |")
    return lines


def audit_lines(path: Path, arms: list[str], enabled: bool) -> list[str]:
    """report.md's "Audit before training": per arm, the flags the reward audit raised."""
    lines = ["", "## Audit before training", ""]
    if not path.is_file():
        why = "`audit: false` in the sweep file" if not enabled else "no audit.csv"
        return lines + [f"Not run ({why})."]
    rows = read_audit(path)
    lines += [
        "The reward audit (`ppage-jax audit`) of each arm with baseline policies, before "
        "training; audit.csv has every check. Flags, by the audit's own names:",
        "",
        "| arm | flags | details |",
        "|---|---|---|",
    ]
    for arm in arms:
        raised = [r for r in rows if r["arm"] == arm and r["flagged"] == "1"]
        kinds = list(dict.fromkeys(r["check"] for r in raised))
        detail = "; ".join(
            f"{r['check']}: " + " ".join(r["detail"].split()).replace("|", "/") for r in raised
        )
        lines.append(f"| {arm} | {', '.join(kinds) or 'none'} | {detail or '-'} |")
    return lines


def baseline_lines(baselines: dict[str, dict[str, float]]) -> list[str]:
    """report.md lines: the fixed baselines on the same held-out layouts (baselines.csv)."""
    if not baselines:
        return []
    metrics = ("rmst", "km_median", "capture_rate", "truncated_share")
    lines = [
        "",
        "Fixed baselines on the same held-out layouts (one evaluation each, no training):",
        "",
        "| baseline | " + " | ".join(HEADLINE[m][0] for m in metrics) + " |",
        "|---|" + "---|" * len(metrics),
    ]
    for policy, values in baselines.items():
        lines.append(
            f"| {policy} | " + " | ".join(_fmt(values.get(m, math.nan)) for m in metrics) + " |"
        )
    return lines


def outcome_lines(
    audit_path: Path, results: dict, head: dict, arms: list[str], references: list[str]
) -> list[str]:
    """report.md's "Audit, monitor and outcome": per arm, the audit's flags before training,
    how many seeds the monitor flagged during training, and the headline task metric (RMST
    IQM and P(improvement) against each reference arm), side by side."""
    if "rmst" not in head:
        return []
    rows = read_audit(audit_path) if audit_path.is_file() else None
    columns = [m for m in results if m.startswith(PREFIX)]
    lines = [
        "",
        "## Audit, monitor and outcome",
        "",
        "| arm | stall margin (predators, a sub-step) | audit flags (before training) | "
        "monitor: seeds flagged | RMST IQM [95 % CI] | "
        + " | ".join(f"P(improvement vs {r})" for r in references)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(references),
    ]
    for arm in arms:
        margin = "-"
        if rows is None:
            audit = "not run"
        else:
            raised = [r["check"] for r in rows if r["arm"] == arm and r["flagged"] == "1"]
            audit = ", ".join(dict.fromkeys(c for c in raised if c != "dead_term")) or "none"
            value = stall_margin_of(rows, arm)
            margin = f"{value:+.3g}" if math.isfinite(value) else "-"
        watched = [c for c in columns if arm in results[c]]
        if watched:
            seeds = sorted({s for c in watched for s in results[c][arm]})
            hit = sum(any(results[c][arm].get(s) == 1 for c in watched) for s in seeds)
            monitor = f"{hit}/{len(seeds)}"
        else:
            monitor = "not watched"
        e = head["rmst"].get(arm, {})
        rmst = _iqm_cell(e)
        pois = [
            _poi_cell(e.get("poi", {}).get(r), arm == r, e.get("poi_n", {}).get(r))
            for r in references
        ]
        lines.append(
            f"| {arm} | {margin} | {audit} | {monitor} | {rmst} | " + " | ".join(pois) + " |"
        )
    return lines + [
        "",
        "Audit flags leave out `dead_term` (a term or param that never paid anything); "
        "the audit section has every flag.",
        "",
    ]


def monitor_lines(results: dict, arms: list[str], monitor: dict | None) -> list[str]:
    """report.md's monitor section: per arm and check, how many seeds flagged it and the
    earliest and median env step of the first flag (over the flagged seeds)."""
    lines = ["", "## Reward-hacking monitor (training curves)", ""]
    config = (monitor or {}).get("config") or {}
    if config.get("enabled") is False:
        return lines + ["Disabled (`experiment.monitor.enabled: false`)."]
    columns = [m for m in results if m.startswith(PREFIX)]
    lines += [
        "The monitor of `ppage-jax run` over each run's per-update curve: a check flags "
        "when the shaped return rises while the task gets worse (`hacking`), while the "
        "episode length moves against the task (`episode_length`), or when a shaping "
        "term's share of the return drifts up with no task gain (`share`). Columns "
        "`monitor/<check>/<role>[/<term>]` and `monitor_first/...` of results.csv.",
        "",
        "| arm | check | role | seeds flagged | first flag: earliest | first flag: median |",
        "|---|---|---|---|---|---|",
    ]
    for arm in arms:
        watched = [c for c in columns if arm in results[c]]
        if not watched:
            lines.append(f"| {arm} | not watched (no learning role is paid a shaping term) |||||")
            continue
        for column in watched:
            check, role, *term = column[len(PREFIX) :].split("/")
            flags = results[column][arm]
            firsts = _finite(results.get(FIRST + column[len(PREFIX) :], {}).get(arm, {}).values())
            name = check if check in CHECKS else column
            if term:
                name = f"{check} ({term[0]})"
            flagged = int(sum(v == 1 for v in flags.values()))
            lines.append(
                f"| {arm} | {name} | {role} | {flagged}/{len(flags)} | "
                + (
                    f"{int(firsts.min()):,} | {np.median(firsts):,.0f} |"
                    if firsts.size
                    else "- | - |"
                )
            )
    return lines + [""] + untrained_lines((monitor or {}).get("untrained") or {})


def untrained_lines(untrained: dict) -> list[str]:
    """report.md lines: where each watched arm's checks start, its untrained run (sweep.json's
    ``monitor.untrained``); none for a sweep without one."""
    if not untrained:
        return []
    lines = [
        "Where the checks start: each arm's untrained run (its learning roles playing "
        "uniformly random actions on the held-out layouts, before training). A `share` "
        "flag needs the term's share to rise above the threshold from here.",
        "",
        "| arm | capture rate | episode length | shaping term's share of the return |",
        "|---|---|---|---|",
    ]
    for arm, levels in untrained.items():
        shares = ", ".join(
            f"{k[len('share/') :]} {v:.2f}"
            for k, v in levels.items()
            if k.startswith("share/") and v is not None and math.isfinite(v)
        )
        lines.append(
            f"| {arm} | {levels['capture_rate']:.3f} | {levels['episode_length']:.1f} | "
            f"{shares or '-'} |"
        )
    return lines + [""]


def km_median_lines(results: dict, arms: list[str], cap: int | None) -> list[str]:
    """report.md lines: per arm, the median over seeds of each seed's Kaplan-Meier median
    turns to capture and how many seeds reached 50 % captured."""
    if "km_median" not in results:
        return []
    limit = f"> {cap}" if cap else "not reached"
    lines = [
        "",
        "## Median turns to capture (Kaplan-Meier, per seed)",
        "",
        "Each seed's KM median over its evaluation episodes (censored at the step limit; "
        f"`{limit}` when under half were captured), then the median over seeds.",
        "",
        "| arm | seeds reaching 50 % captured | median over seeds | range over seeds |",
        "|---|---|---|---|",
    ]

    def show(x: float) -> str:
        return limit if math.isinf(x) else _fmt(x)

    for arm in arms:
        values = np.asarray(list(results["km_median"].get(arm, {}).values()), np.float64)
        if not values.size:
            continue
        lines.append(
            f"| {arm} | {int(np.isfinite(values).sum())}/{values.size} | "
            f"{show(float(np.median(values)))} | {show(float(values.min()))} - "
            f"{show(float(values.max()))} |"
        )
    return lines
