"""Trend and fall tests over short series (host side, NumPy and SciPy).

A trend is Kendall's tau of the values against their index, exact test ``p < alpha``, with a
Theil-Sen change over the series of at least ``min_change`` (relative to the series' median
magnitude, or absolute). A fall is the one-sided pooled two-proportion z-test. The
reward-hacking monitor, its naive baselines and a replay of saved curves test the same
windows again and again, so a window's result is kept.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Trend:
    """A significant monotone trend: direction (+1/-1), Kendall's tau and the change over
    the series (relative, or absolute)."""

    direction: int
    tau: float
    change: float


@functools.lru_cache(maxsize=1 << 16)
def significant_trend(
    values: tuple[float, ...], window: int, alpha: float, min_change: float, absolute: bool
) -> Trend | None:
    """The significant trend of ``values`` (NaNs dropped; at least ``max(4, window // 2)``
    finite values), or None."""
    from scipy import stats

    y = np.asarray(values, np.float64)
    x = np.arange(y.size, dtype=np.float64)
    keep = np.isfinite(y)
    x, y = x[keep], y[keep]
    if y.size < max(4, window // 2) or np.ptp(y) == 0 or not may_trend(y, alpha):
        return None
    # Kendall's exact test without scipy's per-call argument handling (the same function).
    tau: Any = getattr(stats.kendalltau, "__wrapped__", stats.kendalltau)(x, y)
    if not (tau.pvalue < alpha):
        return None
    span = theil_sen_slope(x, y) * (x[-1] - x[0])
    scale = 1.0 if absolute else max(float(np.median(np.abs(y))), 1e-9)
    change = span / scale
    if abs(change) < min_change or np.sign(change) != np.sign(tau.statistic):
        return None
    return Trend(int(np.sign(change)), float(tau.statistic), float(change))


def theil_sen_slope(x: np.ndarray, y: np.ndarray) -> float:
    """The Theil-Sen slope, the median of the pairwise slopes (``scipy.stats.theilslopes``'
    slope, without its intercept and interval)."""
    dx = x[None, :] - x[:, None]
    dy = y[None, :] - y[:, None]
    pairs = dx > 0
    return float(np.median(dy[pairs] / dx[pairs]))


def normal_sf(z: float) -> float:
    """P(Z > z) of a standard normal."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def proportion_fall_p(then: float, n_then: float, now: float, n_now: float) -> float:
    """One-sided p of a fall from the rate ``then`` (of ``n_then`` episodes) to ``now`` (of
    ``n_now``): the pooled two-proportion z-test."""
    pooled = (then * n_then + now * n_now) / (n_then + n_now)
    se = math.sqrt(max(pooled * (1 - pooled), 1e-12) * (1 / n_then + 1 / n_now))
    return normal_sf((then - now) / se)


@functools.lru_cache(maxsize=8)
def _critical_z(alpha: float) -> float:
    from scipy import stats

    return float(stats.norm.isf(alpha / 2))


@functools.lru_cache(maxsize=64)
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The index pairs (i, j), i < j, of ``n`` values."""
    return np.triu_indices(n, 1)


def may_trend(y: np.ndarray, alpha: float) -> bool:
    """A cheap necessary condition for Kendall's test: Mann-Kendall's S, normal with its
    tie-corrected variance, within 80 % of the critical z (far looser than the exact test),
    so the exact test runs only where it might pass."""
    n = y.size
    s = np.sign(y[None, :] - y[:, None])[_upper_pairs(n)].sum()
    _, counts = np.unique(y, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - (counts * (counts - 1) * (2 * counts + 5)).sum()) / 18
    return var > 0 and abs(s) / math.sqrt(var) >= 0.8 * _critical_z(alpha)
