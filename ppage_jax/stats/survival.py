"""Time to capture as a survival quantity, in NumPy: Kaplan-Meier curve, median and RMST.

An episode is a *capture* (an event) at its capture turn, or *censored* at the turn it
stopped uncaptured (the step limit). Averaging the capture turn over captured episodes only
ignores every episode that ran out of time and so flatters slow policies (survivor bias);
these estimators use the censored episodes too.

- :func:`kaplan_meier`: the product-limit estimate ``S(t)`` of P(not captured by turn t), at
  every distinct observed time; an episode censored at ``t`` counts as still at risk at ``t``.
- :func:`km_median`: the first time with ``S(t) <= 0.5``; ``inf`` when the curve never gets
  there (fewer than half the episodes are seen captured).
- :func:`rmst`: the restricted mean time to capture, ``integral_0^horizon S(t) dt``: the mean of
  ``min(T, horizon)``, always finite. With every uncaptured episode censored exactly at the
  horizon it equals the mean episode length.
- :func:`survival_summary`: both with percentile-bootstrap CIs (episodes resampled with
  replacement, within each stratum when ``strata`` is given) as a :class:`Bootstrap` sets
  them: its resamples, confidence and seed.
- :func:`rmst_ratio`: one policy's RMST over another's on the same layouts, with a paired
  bootstrap CI (the layouts resampled together), the honest "x baseline" figure.

Every function accepts ``times`` (non-negative) and ``events`` (bool: captured) of equal length.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ppage_jax.stats.bootstrap import percentile_interval

BOOTSTRAP_REPS = 2000


def _check(times, events) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(times, np.float64).reshape(-1)
    e = np.asarray(events, bool).reshape(-1)
    if t.shape != e.shape:
        raise ValueError(f"times and events need the same length, got {t.size} and {e.size}")
    if t.size == 0:
        raise ValueError("survival statistics of no episode")
    if not np.isfinite(t).all() or (t < 0).any():
        raise ValueError("times must be finite and >= 0")
    return t, e


def _on_grid(times, events) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(grid, index, events)``: the distinct times, each episode's position in them and the
    events, what :func:`_curves` reads for the full sample and for every resample."""
    t, e = _check(times, events)
    grid = np.unique(t)
    return grid, np.searchsorted(grid, t), e


def _curves(grid: np.ndarray, index: np.ndarray, events: np.ndarray) -> np.ndarray:
    """S at each ``grid`` time for one or many samples: ``index`` int[..., N] (grid position of
    each episode's time), ``events`` bool[..., N] -> float[..., K]."""
    k = grid.size
    lead = index.shape[:-1]
    flat = index.reshape(-1, index.shape[-1])
    offsets = (np.arange(flat.shape[0]) * k)[:, None]
    ev = events.reshape(flat.shape)
    total = np.bincount((flat + offsets).ravel(), minlength=flat.shape[0] * k)
    deaths = np.bincount(
        (flat + offsets).ravel(), weights=ev.ravel().astype(np.float64), minlength=flat.shape[0] * k
    )
    total, deaths = total.reshape(-1, k), deaths.reshape(-1, k)
    at_risk = total[:, ::-1].cumsum(axis=1)[:, ::-1]  # #(time >= grid[k])
    factor = np.where(at_risk > 0, 1.0 - deaths / np.maximum(at_risk, 1), 1.0)
    return np.cumprod(factor, axis=1).reshape(lead + (k,))


def kaplan_meier(times, events) -> tuple[np.ndarray, np.ndarray]:
    """``(t, S)``: the distinct observed times, ascending, and the Kaplan-Meier survival just
    after each (S is right-continuous and equals 1 before the first time)."""
    t, e = _check(times, events)
    grid = np.unique(t)
    return grid, _curves(grid, np.searchsorted(grid, t), e)


def _median(grid: np.ndarray, surv: np.ndarray) -> np.ndarray:
    reached = surv <= 0.5
    first = np.argmax(reached, axis=-1)
    return np.where(reached.any(axis=-1), grid[first], np.inf)


def _rmst(grid: np.ndarray, surv: np.ndarray, horizon: float) -> np.ndarray:
    edges = np.minimum(np.concatenate([[0.0], grid, [horizon]]), horizon)
    widths = np.diff(edges)  # [K + 1]
    before = np.concatenate([np.ones(surv.shape[:-1] + (1,)), surv], axis=-1)
    return (before * widths).sum(axis=-1)


def km_median(times, events) -> float:
    """The Kaplan-Meier median time: the first time with ``S(t) <= 0.5``, else ``inf``."""
    grid, surv = kaplan_meier(times, events)
    return float(_median(grid, surv))


def rmst(times, events, horizon: float) -> float:
    """Restricted mean time to capture up to ``horizon``: ``integral_0^horizon S(t) dt``."""
    grid, surv = kaplan_meier(times, events)
    return float(_rmst(grid, surv, float(horizon)))


def capture_curve(times, events, horizon: int) -> np.ndarray:
    """float[horizon + 1]: the Kaplan-Meier fraction captured by turn ``t = 0 .. horizon``,
    ``1 - S(t)`` (a step function of whole turns)."""
    grid, surv = kaplan_meier(times, events)
    turns = np.arange(int(horizon) + 1)
    at = np.searchsorted(grid, turns, side="right") - 1
    return np.where(at >= 0, 1.0 - surv[np.maximum(at, 0)], 0.0)


def _resample(rng: np.random.Generator, strata: np.ndarray, reps: int) -> np.ndarray:
    """int[reps, N]: episode indices drawn with replacement within each stratum."""
    out = np.empty((reps, strata.size), np.int64)
    for s in np.unique(strata):  # host-side, a handful of strata (seeds)
        members = np.flatnonzero(strata == s)
        out[:, members] = members[rng.integers(0, members.size, (reps, members.size))]
    return out


@dataclasses.dataclass(frozen=True)
class Bootstrap:
    """A percentile bootstrap: ``reps`` resamples (0: no interval), the interval's
    ``confidence`` in (0, 1) and the ``seed`` of the resampling."""

    reps: int = BOOTSTRAP_REPS
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self):
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")

    def interval(self, samples: np.ndarray, exact: bool) -> list[float]:
        """``[low, high]`` of the resampled statistic ``samples``
        (:func:`~ppage_jax.stats.bootstrap.percentile_interval`; ``exact``: order
        statistics, which keep ``inf`` intact)."""
        ci = percentile_interval(np.nan, samples, self.confidence, exact)
        return [ci.low, ci.high]


def survival_summary(
    times, events, horizon: float, bootstrap: Bootstrap | None = None, strata=None
) -> dict:
    """``km_median``, ``rmst`` and (``bootstrap.reps > 0``) their percentile-bootstrap CIs
    ``km_median_ci``, ``rmst_ci`` as ``[low, high]`` (default :class:`Bootstrap`). ``strata``
    (e.g. the training seed of each episode) keeps each stratum's episode count in every
    resample. A median CI bound may be ``inf`` (the resampled curve never reached 0.5)."""
    bootstrap = Bootstrap() if bootstrap is None else bootstrap
    grid, index, e = _on_grid(times, events)
    surv = _curves(grid, index, e)
    out: dict[str, Any] = {
        "km_median": float(_median(grid, surv)),
        "rmst": float(_rmst(grid, surv, horizon)),
    }
    if bootstrap.reps > 0:
        n = index.size
        strata = np.zeros(n, np.int64) if strata is None else np.asarray(strata).reshape(-1)
        if strata.size != n:
            raise ValueError(f"strata has {strata.size} entries for {n} episodes")
        picks = _resample(np.random.default_rng(bootstrap.seed), strata, bootstrap.reps)
        boot = _curves(grid, index[picks], e[picks])
        out["km_median_ci"] = bootstrap.interval(_median(grid, boot), exact=True)
        out["rmst_ci"] = bootstrap.interval(_rmst(grid, boot, horizon), exact=False)
    return out


def rmst_ratio(
    times, events, base_times, base_events, horizon: float, bootstrap: Bootstrap | None = None
) -> dict:
    """``ratio``: the RMST of ``(times, events)`` over the RMST of ``(base_times,
    base_events)``, episode ``j`` of both played from the same layout, and
    (``bootstrap.reps > 0``, default :class:`Bootstrap`) ``ratio_ci`` ``[low, high]``: the
    percentile bootstrap with the layouts resampled jointly (paired), so layout difficulty,
    shared by both policies, cancels out of the interval."""
    bootstrap = Bootstrap() if bootstrap is None else bootstrap
    top, bottom = _on_grid(times, events), _on_grid(base_times, base_events)
    n = top[1].size
    if bottom[1].size != n:
        raise ValueError(f"paired episodes need equal counts, got {n} and {bottom[1].size}")

    def ratio(picks: np.ndarray) -> np.ndarray:  # the same episode indices for both
        top_mean, bottom_mean = (
            _rmst(grid, _curves(grid, index[picks], e[picks]), horizon)
            for grid, index, e in (top, bottom)
        )
        return top_mean / bottom_mean

    out: dict[str, Any] = {"ratio": float(ratio(np.arange(n)))}
    if bootstrap.reps > 0:
        picks = np.random.default_rng(bootstrap.seed).integers(0, n, (bootstrap.reps, n))
        out["ratio_ci"] = bootstrap.interval(ratio(picks), exact=False)
    return out


def number_text(value: float | None, digits: int = 1) -> str:
    """A censored statistic as printed: ``n/a`` for None or NaN, ``not reached`` when
    infinite, else ``digits`` decimals."""
    if value is None or not np.isfinite(value):
        return "n/a" if value is None or np.isnan(value) else "not reached"
    return f"{value:.{digits}f}"


def turns_text(value: float | None, cap: int) -> str:
    """A KM median or CI bound in turns: infinite means the curve never reached 0.5 within
    ``cap`` (``>cap``); whole numbers print without decimals."""
    if value is not None and np.isinf(value):
        return f">{cap}"
    return number_text(value, 0 if value is not None and float(value).is_integer() else 1)
