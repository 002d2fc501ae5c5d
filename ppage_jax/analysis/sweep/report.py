"""report.md and plots of a sweep directory (results.csv, curves.csv, sweep.json).

Headline metrics are task metrics, never the shaped total: capture rate, the restricted
mean time to capture (``rmst``: censored at the step limit, so episodes that never end in a
capture count, unlike a mean over captured episodes) and the base-reward return per role at
unit weight. Each arm gets the
interquartile mean over its seeds with a 95 % stratified-bootstrap CI, and the probability
that a run of the arm beats a run of the baseline arm (with CI). Per-term returns per role
(as paid) are diagnostics. Learning curves show the mean over seeds with a 95 % bootstrap
band of that mean. The Kaplan-Meier median time to capture of each seed is summarised per
arm beside them (it is infinite for a seed that captured in under half its episodes).
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from ppage_jax.analysis import stats
from ppage_jax.artifacts import save_figure, write_text

# metric -> (label, higher is better)
HEADLINE = {
    "capture_rate": ("capture rate", True),
    "rmst": ("RMST: mean turns to capture, censored", False),
    "base_return/predator": ("base return, predator", True),
    "base_return/prey": ("base return, prey", True),
}
CURVES = ("capture_rate", "episode_length", "return/predator/base", "return/prey/base")
BOOTSTRAP_REPS = 2000


def read_results(path: Path) -> dict[str, dict[str, dict[int, float]]]:
    """results.csv -> {metric: {arm: {seed: value}}}."""
    table: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            table[row["metric"]][row["arm"]][int(row["seed"])] = float(row["value"])
    return table


def read_curves(path: Path) -> dict[str, dict[str, dict[int, dict[int, float]]]]:
    """curves.csv -> {metric: {arm: {seed: {env_steps: value}}}}."""
    table: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            table[row["metric"]][row["arm"]][int(row["seed"])][int(row["env_steps"])] = float(
                row["value"]
            )
    return table


def _finite(values) -> np.ndarray:
    arr = np.asarray(list(values), np.float64)
    return arr[np.isfinite(arr)]


def headline_stats(results: dict, arms: list[str], baseline: str) -> dict:
    """{metric: {arm: {"n", "iqm", "low", "high", "poi", "poi_low", "poi_high"}}}."""
    out: dict = {}
    for metric, (_, higher) in HEADLINE.items():
        if metric not in results:
            continue
        out[metric] = {}
        base = results[metric].get(baseline, {})
        for arm in arms:
            by_seed = results[metric].get(arm, {})
            values = _finite(by_seed.values())
            entry: dict = {"n": int(values.size)}
            if values.size:
                ci = stats.bootstrap_ci(values, "iqm", reps=BOOTSTRAP_REPS)
                entry.update(iqm=ci.point, low=ci.low, high=ci.high)
            base_values = _finite(base.values())
            if arm != baseline and values.size and base_values.size:
                sign = 1.0 if higher else -1.0
                poi = stats.probability_of_improvement_ci(
                    sign * values, sign * base_values, reps=BOOTSTRAP_REPS
                )
                entry.update(poi=poi.point, poi_low=poi.low, poi_high=poi.high)
            out[metric][arm] = entry
    return out


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


def write_report(output_dir: str | Path) -> Path:
    """Write report.md, headline.png and curves.png into ``output_dir``; return report.md."""
    out = Path(output_dir)
    info = json.loads((out / "sweep.json").read_text())
    results = read_results(out / "results.csv")
    curves = read_curves(out / "curves.csv") if (out / "curves.csv").exists() else {}
    arms = list(info["arms"])
    baseline = info["baseline"]
    head = headline_stats(results, arms, baseline)

    lines = [f"# Sweep report: {info.get('sweep', '')}", ""]
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
    hyper = any("hyperparams" in info["arms"][arm] for arm in arms)  # training settings
    lines += [
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

    lines += [
        "",
        "## Task metrics (headline)",
        "",
        f"IQM over seeds [95 % stratified-bootstrap CI]; P(improvement) = probability "
        f"that a run of the arm beats a run of `{baseline}` (ties count half), "
        f"[95 % CI].",
        "",
    ]
    lines += [
        "| metric | arm | n | IQM [95 % CI] | P(improvement) [95 % CI] |",
        "|---|---|---|---|---|",
    ]
    for metric, per_arm in head.items():
        label, higher = HEADLINE[metric]
        label += " (higher is better)" if higher else " (lower is better)"
        for arm, e in per_arm.items():
            iqm = f"{_fmt(e['iqm'])} [{_fmt(e['low'])}, {_fmt(e['high'])}]" if "iqm" in e else "-"
            poi = (
                f"{e['poi']:.2f} [{e['poi_low']:.2f}, {e['poi_high']:.2f}]"
                if "poi" in e
                else ("baseline" if arm == baseline else "-")
            )
            lines.append(f"| {label} | {arm} | {e['n']} | {iqm} | {poi} |")

    lines += km_median_lines(results, arms, info.get("eval_step_limit"))
    lines += [
        "",
        "## Per-term return per agent, by role (as paid; mean over seeds)",
        "",
        "Diagnostics only: shaped totals are not comparable across arms.",
        "",
    ]
    for role in ("predator", "prey"):
        means = {}
        for t in list(info["terms"]) + ["total"]:
            for arm in arms:
                values = _finite(results.get(f"return/{role}/{t}", {}).get(arm, {}).values())
                means[t, arm] = float(values.mean()) if values.size else math.nan
        # a term that paid this role nothing in every arm is left out
        shown = [
            t
            for t in info["terms"]
            if any(math.isfinite(means[t, a]) and means[t, a] != 0 for a in arms)
        ]
        if not any(math.isfinite(means["total", a]) for a in arms):
            continue
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

    plots = _plot(out, head, curves, arms)
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    report = out / "report.md"
    write_text(report, "\n".join(lines) + "\n")
    return report


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


def curve_band(
    by_seed: dict[int, dict[int, float]], reps: int = 500
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(env_steps, mean, low, high) over seeds at each step; the band is a 95 % bootstrap
    CI of the mean (a single seed gives a zero-width band)."""
    steps = sorted({s for series in by_seed.values() for s in series})
    mean, low, high = [], [], []
    for s in steps:
        values = _finite(series[s] for series in by_seed.values() if s in series)
        if not values.size:
            mean.append(np.nan), low.append(np.nan), high.append(np.nan)
            continue
        ci = stats.bootstrap_ci(values, "mean", reps=reps)
        mean.append(ci.point), low.append(ci.low), high.append(ci.high)
    return np.asarray(steps), np.asarray(mean), np.asarray(low), np.asarray(high)


def _plot(out: Path, head: dict, curves: dict, arms: list[str]) -> list[Path]:
    from ppage_jax.viz import figures as plt  # off-screen figures; no global backend switch

    paths = []
    metrics = [m for m in HEADLINE if m in head]
    if metrics:
        fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2), squeeze=False)
        for ax, metric in zip(axes[0], metrics, strict=True):
            xs, ys, err = [], [], [[], []]
            for i, arm in enumerate(arms):
                e = head[metric].get(arm, {})
                if "iqm" in e:
                    xs.append(i), ys.append(e["iqm"])
                    err[0].append(e["iqm"] - e["low"]), err[1].append(e["high"] - e["iqm"])
            ax.errorbar(xs, ys, yerr=err, fmt="o", capsize=4)
            ax.set_xticks(range(len(arms)), arms, rotation=30, ha="right", fontsize=8)
            ax.set_title(HEADLINE[metric][0], fontsize=9)
        fig.suptitle("IQM over seeds with 95 % stratified-bootstrap CI", fontsize=10)
        fig.tight_layout()
        paths.append(out / "headline.png")
        save_figure(fig, paths[-1], dpi=110)
        plt.close(fig)
    shown = [m for m in CURVES if m in curves]
    if shown:
        fig, axes = plt.subplots(1, len(shown), figsize=(3.6 * len(shown), 3.2), squeeze=False)
        for ax, metric in zip(axes[0], shown, strict=True):
            for arm in arms:
                if arm not in curves[metric]:
                    continue
                steps, mean, low, high = curve_band(curves[metric][arm])
                ax.plot(steps, mean, label=arm)
                ax.fill_between(steps, low, high, alpha=0.25)
            ax.set_title(metric, fontsize=9)
            ax.set_xlabel("env steps per seed", fontsize=8)
        axes[0][0].legend(fontsize=7)
        fig.suptitle("Learning curves: mean over seeds, 95 % bootstrap band", fontsize=10)
        fig.tight_layout()
        paths.append(out / "curves.png")
        save_figure(fig, paths[-1], dpi=110)
        plt.close(fig)
    return paths
