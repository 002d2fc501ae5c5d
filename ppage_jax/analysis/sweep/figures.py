"""A sweep report's figures: headline.png (each headline metric's IQM over seeds with its 95 %
CI per arm, on a grid of panels whose y axes are floored so that arms 0.1 % apart do not look
far apart) and curves.png (the learning curves, and the evaluation curve when the sweep has
one)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ppage_jax.analysis.family.endpoints import HEADLINE
from ppage_jax.analysis.sweep.curves import captured_counts, weighted_band
from ppage_jax.artifacts import save_figure

CURVES = ("capture_rate", "episode_length", "return/predator/base", "return/prey/base")
# The evaluation curve (sweep.checkpoints), plotted when the sweep has one.
CHECKPOINT_CURVES = ("checkpoint/rmst", "checkpoint/capture_rate")
# headline.png and curves.png: panels in rows of at most this many.
PANEL_COLUMNS = 3
# A headline panel's y axis spans at least this share of its largest magnitude (and at least
# MIN_SPAN): arms 0.1 % apart then differ by a sliver of the panel, not by its whole height.
MIN_RELATIVE_SPAN = 0.05
MIN_SPAN = 0.05


def panel_grid(n: int, columns: int = PANEL_COLUMNS) -> tuple[int, int]:
    """``(rows, columns)`` of a figure of ``n`` panels in rows of at most ``columns``."""
    cols = max(1, min(columns, n))
    return -(-n // cols), cols


def floored_ylim(
    values: Sequence[float], relative: float = MIN_RELATIVE_SPAN, minimum: float = MIN_SPAN
) -> tuple[float, float] | None:
    """Y limits holding ``values`` (points and interval ends) that span at least
    ``relative`` x their largest magnitude and at least ``minimum``, centred on the values
    where they spread less than that; None without a finite value (matplotlib's own limits)."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return None
    low, high = min(finite), max(finite)
    floor = max(relative * max(abs(low), abs(high)), minimum)
    if high - low >= floor:
        margin = 0.05 * (high - low)  # matplotlib's default margin
        return low - margin, high + margin
    middle = (low + high) / 2
    return middle - floor / 2, middle + floor / 2


def _panels(n: int, width: float, height: float):
    """A figure of ``n`` panels on :func:`panel_grid`, its empty cells removed: the figure
    and the ``n`` axes in reading order."""
    from ppage_jax.viz import figures as plt  # off-screen figures; no global backend switch

    rows, cols = panel_grid(n)
    fig, grid = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[n:]:
        fig.delaxes(ax)
    return fig, axes[:n]


def headline_figure(head: dict, arms: list[str]):
    """headline.png's figure: one panel per headline metric of ``head``
    (:func:`headline_stats`), IQM over seeds with its 95 % CI per arm, in rows of
    :data:`PANEL_COLUMNS`, each y axis floored by :func:`floored_ylim`; None without a
    headline metric."""
    metrics = [m for m in HEADLINE if m in head]
    if not metrics:
        return None
    fig, axes = _panels(len(metrics), 3.4, 3.2)
    for ax, metric in zip(axes, metrics, strict=True):
        xs, ys, err, ends = [], [], [[], []], []
        for i, arm in enumerate(arms):
            e = head[metric].get(arm, {})
            if "iqm" in e:  # no bar where no interval was computed
                xs.append(i)
                ys.append(e["iqm"])
                bar = math.isfinite(e["low"]) and math.isfinite(e["high"])
                err[0].append(e["iqm"] - e["low"] if bar else 0.0)
                err[1].append(e["high"] - e["iqm"] if bar else 0.0)
                ends += [e["low"], e["high"]] if bar else []
        ax.errorbar(xs, ys, yerr=err, fmt="o", capsize=4)
        limits = floored_ylim(ys + ends)
        if limits is not None:
            ax.set_ylim(*limits)
        ax.set_xticks(range(len(arms)), arms, rotation=30, ha="right", fontsize=8)
        ax.set_title(HEADLINE[metric][0], fontsize=9)
    fig.suptitle("IQM over seeds with 95 % stratified-bootstrap CI", fontsize=10)
    fig.tight_layout()
    return fig


def plot_report(out: Path, head: dict, curves: dict, arms: list[str]) -> list[Path]:
    """headline.png (:func:`headline_figure`) and curves.png (each shown curve per arm,
    :func:`arm_curve`) in ``out``: the paths written."""
    paths = []
    fig = headline_figure(head, arms)
    if fig is not None:
        paths.append(out / "headline.png")
        save_figure(fig, paths[-1], dpi=110)
    shown = [  # a curve that is zero in every arm (a role that is paid nothing) is left out
        m
        for m in (*CURVES, *CHECKPOINT_CURVES)
        if m in curves
        and any(v for arm in curves[m].values() for run in arm.values() for v in run.values())
    ]
    if shown:
        fig, axes = _panels(len(shown), 3.6, 3.2)
        for ax, metric in zip(axes, shown, strict=True):
            for arm in arms:
                if arm not in curves[metric]:
                    continue
                steps, mean, low, high = arm_curve(curves, metric, arm)
                ax.plot(steps, mean, label=arm, marker="o" if metric in CHECKPOINT_CURVES else "")
                ax.fill_between(steps, low, high, alpha=0.25)
            ax.set_title(metric, fontsize=9)
            ax.set_xlabel("env steps per seed", fontsize=8)
        axes[0].legend(fontsize=7)
        fig.suptitle(
            "Learning curves: each seed weighted by the episodes that finished, mean over "
            "seeds, 95 % bootstrap band (checkpoint/: the evaluation curve)",
            fontsize=9,
        )
        fig.tight_layout()
        paths.append(out / "curves.png")
        save_figure(fig, paths[-1], dpi=110)
    return paths


def arm_curve(
    curves: dict, metric: str, arm: str, bins: int = 24
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(env_steps, mean, low, high)`` of one arm's curve of ``metric``: training metrics
    weighted by the episodes that finished (:func:`weighted_band`), the evaluation curve's
    checkpoints (each already a whole block of episodes) as they are."""
    by_seed = curves[metric][arm]
    if metric.startswith("checkpoint/"):
        ones = {seed: {s: 1.0 for s in series} for seed, series in by_seed.items()}
        return weighted_band(by_seed, ones, bins=len({s for v in ones.values() for s in v}))
    episodes = curves.get("episodes", {}).get(arm, {})
    captures = captured_counts(curves, arm) if metric == "steps_to_capture" else None
    return weighted_band(by_seed, episodes, bins, captures)
