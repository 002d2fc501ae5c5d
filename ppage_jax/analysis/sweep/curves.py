"""Training curves weighted by the episodes that finished.

A training update's capture rate, episode length or return is a mean over the episodes that
happened to finish in it: one episode in an early update of a 200-turn task, forty in a late
one. A plain mean over updates gives both the same weight and can hide a slow fall; here
every value is weighted by its update's ``episodes`` count (``steps_to_capture`` by its
captured episodes), first within a seed over bins of consecutive updates, then the seeds'
binned values are averaged with a bootstrap band over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ppage_jax.stats import bootstrap as stats

# A per-seed series: env_steps -> value.
Series = Mapping[int, float]


def weighted_bins(
    values: Series, episodes: Series, edges: np.ndarray, weights: Series | None = None
) -> np.ndarray:
    """float[len(edges) - 1]: the episode-weighted mean of ``values`` in each bin
    ``(edges[i], edges[i + 1]]`` of env steps (NaN for a bin in which no episode finished).
    ``weights`` replaces the episode counts (the captured episodes, for steps to capture)."""
    counts = episodes if weights is None else weights
    out = np.full(len(edges) - 1, np.nan)
    steps = np.asarray(sorted(values), np.int64)
    if not steps.size:
        return out
    v = np.asarray([values[s] for s in steps], np.float64)
    w = np.asarray([float(counts.get(s, 0.0) or 0.0) for s in steps], np.float64)
    keep = np.isfinite(v) & np.isfinite(w) & (w > 0)
    which = np.searchsorted(edges, steps, side="left") - 1  # bin i holds (edges[i], edges[i+1]]
    for i in range(len(edges) - 1):
        inside = keep & (which == i)
        if inside.any():
            out[i] = float(np.average(v[inside], weights=w[inside]))
    return out


def bin_edges(steps: list[int], bins: int) -> np.ndarray:
    """``bins`` + 1 edges over the env steps 0 .. max(steps), each bin holding whole
    updates (at most one bin per update)."""
    last = max(steps) if steps else 0
    per = max(1, math.ceil(len(set(steps)) / bins)) if steps else 1
    ordered = sorted(set(steps))
    edges = [0] + [ordered[min(i + per, len(ordered)) - 1] for i in range(0, len(ordered), per)]
    edges[-1] = last
    return np.asarray(edges, np.int64)


def weighted_band(
    by_seed: Mapping[int, Series],
    episodes: Mapping[int, Series],
    bins: int = 24,
    captures: Mapping[int, Series] | None = None,
    reps: int = 500,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(env_steps, mean, low, high)``: per bin (its last env step), the mean over seeds of
    each seed's episode-weighted value, with a 95 % bootstrap band of that mean over seeds.
    ``captures`` (captured episodes per update) weighs ``steps_to_capture`` instead of the
    episodes."""
    steps = sorted({s for series in by_seed.values() for s in series})
    edges = bin_edges(steps, bins)
    rows = []
    for seed, series in by_seed.items():
        weights = None if captures is None else captures.get(seed, {})
        rows.append(weighted_bins(series, episodes.get(seed, {}), edges, weights))
    table = np.asarray(rows, np.float64).reshape(len(rows), len(edges) - 1)
    mean, low, high = [], [], []
    for column in table.T:
        finite = column[np.isfinite(column)]
        if not finite.size:
            mean.append(math.nan), low.append(math.nan), high.append(math.nan)
            continue
        ci = stats.bootstrap_ci(finite, "mean", reps=reps)
        mean.append(ci.point), low.append(ci.low), high.append(ci.high)
    return edges[1:], np.asarray(mean), np.asarray(low), np.asarray(high)


def captured_counts(curves: Mapping, arm: str) -> dict[int, dict[int, float]]:
    """Per seed and env step: the episodes that ended in a capture (capture rate x
    episodes), the weights of ``steps_to_capture``."""
    rates = curves.get("capture_rate", {}).get(arm, {})
    counts = curves.get("episodes", {}).get(arm, {})
    return {
        seed: {s: rates[seed].get(s, math.nan) * n for s, n in series.items()}
        for seed, series in counts.items()
        if seed in rates
    }
