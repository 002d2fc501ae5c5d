"""When the reward-hacking monitor flagged a run, set against when the run's task metric
turned: the env step at which the trailing mean of the training capture rate peaked, after
which it fell. Host side, from a sweep's ``results.csv`` and ``curves.csv`` tables
(:func:`~ppage_jax.analysis.sweep.report.read_results`, ``read_curves``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ppage_jax.analysis.batch.monitoring import FIRST
from ppage_jax.viz.run_figures import smoothed

# The monitor's default window (experiment.monitor.window): the trailing mean's length.
WINDOW = 20


def task_peak(
    series: Mapping[int, float],
    window: int = WINDOW,
    after: int = 0,
    episodes: Mapping[int, float] | None = None,
) -> tuple[int, float, float]:
    """``(env_steps, peak, final)`` of a per-update task metric (higher is better), keyed by
    env steps and read from past ``after`` env steps (the monitor's warm-up): where its
    trailing mean over ``window`` updates was highest (the first such step), that mean, and
    the trailing mean at the last update. The mean weighs each update by the ``episodes``
    that finished in it (each update alike without them), skips NaN updates and is NaN until
    a full window has passed: the first updates see only the episodes that ended early, so
    alone they overstate the capture rate."""
    steps = np.asarray(sorted(s for s in series if s > after), np.int64)
    values = np.asarray([series[s] for s in steps], np.float64)
    if episodes is None:
        smooth = smoothed(values, window)
    else:
        weights = np.asarray([float(episodes.get(s, 0.0) or 0.0) for s in steps], np.float64)
        weights = np.where(np.isfinite(values), weights, 0.0)
        kernel = np.ones(window)
        total = np.convolve(np.where(weights > 0, values, 0.0) * weights, kernel)[: steps.size]
        count = np.convolve(weights, kernel)[: steps.size]
        smooth = np.where(count > 0, total / np.maximum(count, 1e-12), np.nan)
    smooth[: min(window, steps.size) - 1] = np.nan
    if not np.isfinite(smooth).any():
        return int(steps[-1]) if steps.size else 0, math.nan, math.nan
    best = int(np.nanargmax(smooth))
    return int(steps[best]), float(smooth[best]), float(smooth[-1])


def flag_timing(
    results: Mapping,
    curves: Mapping,
    arm: str,
    metric: str = "capture_rate",
    window: int = WINDOW,
    after: int = 0,
) -> list[dict]:
    """One row per seed of ``arm`` with a monitor flag: ``seed``, ``first_flag`` (the env step
    of its earliest flag over every check), ``checks`` (the flagged ``monitor/...`` columns),
    and ``peak_step``, ``peak`` and ``final`` of the training ``metric``
    (:func:`task_peak` past ``after`` env steps)."""
    rows = []
    flags = {
        c: by_arm[arm]
        for c, by_arm in results.items()
        if c.startswith("monitor/") and arm in by_arm
    }
    seeds = sorted({s for by_seed in flags.values() for s in by_seed})
    for seed in seeds:
        hit = [c for c, by_seed in flags.items() if by_seed.get(seed) == 1]
        if not hit:
            continue
        firsts = [
            results.get(FIRST + c[len("monitor/") :], {}).get(arm, {}).get(seed, math.nan)
            for c in hit
        ]
        firsts = [f for f in firsts if math.isfinite(f)]
        peak_step, peak, final = task_peak(
            curves.get(metric, {}).get(arm, {}).get(seed, {}),
            window,
            after,
            curves.get("episodes", {}).get(arm, {}).get(seed),
        )
        rows.append(
            dict(
                seed=seed,
                first_flag=int(min(firsts)) if firsts else None,
                checks=sorted(hit),
                peak_step=peak_step,
                peak=peak,
                final=final,
            )
        )
    return rows


def flag_timing_lines(
    results: Mapping, curves: Mapping, arms: list[str], window: int = WINDOW, after: int = 0
) -> list[str]:
    """report.md's section: for every flagged seed, the first flag against the step at which
    the training capture rate (trailing mean over the monitor's window) peaked."""
    table = [
        (arm, row)
        for arm in arms
        for row in flag_timing(results, curves, arm, window=window, after=after)
    ]
    if not table:
        return []
    lines = [
        "",
        "## Monitor flags against the task metric",
        "",
        f"Per flagged seed: the env step of its first flag, and where the training capture "
        f"rate (over the episodes that finished in the last {window} updates, after the "
        f"monitor's warm-up of {after:,} env steps) peaked and then fell.",
        "",
        "| arm | seed | first flag (env steps) | capture rate peaked at | peak | at the end "
        "| checks |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, r in table:
        first = "-" if r["first_flag"] is None else f"{r['first_flag']:,}"
        checks = ", ".join(c[len("monitor/") :] for c in r["checks"])
        lines.append(
            f"| {arm} | {r['seed']} | {first} | {r['peak_step']:,} | {r['peak']:.3f} | "
            f"{r['final']:.3f} | {checks} |"
        )
    return lines + [""]
