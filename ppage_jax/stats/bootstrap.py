"""Statistics for comparing few-seed RL runs (Agarwal et al., NeurIPS 2021), in NumPy.

Scores are ``[runs]`` (one task) or ``[runs, tasks]``; a *task* is a stratum (a config, a
metric family) and a *run* is one seed. All functions are host-side NumPy.

- :func:`iqm`: the interquartile mean, the mean of the runs left after trimming
  ``floor(n/4)`` from each end of the sorted scores (``scipy.stats.trim_mean(x, 0.25)``, the
  convention of rliable). One run gives that run; up to three runs give the plain mean.
- :func:`bootstrap_ci`: a percentile confidence interval from a *stratified* bootstrap: the
  runs of each task are resampled with replacement independently, so every replicate keeps
  each task's run count.
- :func:`probability_of_improvement`: ``P(X > Y)`` for a random run of X against a random run
  of Y, ties counting one half (the Mann-Whitney U statistic over ``m * n``), averaged over
  tasks; :func:`probability_of_improvement_ci` bootstraps it, resampling both sides.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np


class Statistic(Protocol):
    """A statistic of ``scores`` along ``axis`` (:func:`iqm`, :func:`mean`)."""

    def __call__(self, scores: Any, axis: int = -1) -> np.ndarray | float: ...


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval ``[low, high]``."""

    point: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.point:.3g} [{self.low:.3g}, {self.high:.3g}]"


def _as_runs_tasks(scores) -> np.ndarray:
    """float64[runs, tasks] from a [runs] or [runs, tasks] array; rejects empty or NaN input."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"scores must be [runs] or [runs, tasks], got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"scores need at least one run and one task, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("scores contain NaN or infinity")
    return arr


def iqm(scores, axis: int = -1) -> np.ndarray | float:
    """Interquartile mean along ``axis``: trim ``floor(n/4)`` runs from each end, average the
    rest."""
    arr = np.sort(np.asarray(scores, dtype=np.float64), axis=axis)
    n = arr.shape[axis]
    if n == 0:
        raise ValueError("iqm of no scores")
    cut = n // 4
    kept = np.take(arr, np.arange(cut, n - cut), axis=axis)
    result = kept.mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def mean(scores, axis: int = -1) -> np.ndarray | float:
    """Plain mean along ``axis`` (a statistic with the same signature as :func:`iqm`)."""
    result = np.asarray(scores, dtype=np.float64).mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


STATISTICS: dict[str, Statistic] = {"iqm": iqm, "mean": mean}


def stratified_resample_indices(
    rng: np.random.Generator, runs: int, tasks: int, reps: int
) -> np.ndarray:
    """int[reps, runs, tasks]: for each replicate and task, ``runs`` run indices drawn with
    replacement from that task's own runs (the stratification)."""
    return rng.integers(0, runs, size=(reps, runs, tasks))


def bootstrap_distribution(
    scores, statistic: Statistic | str = "iqm", reps: int = 2000, seed: int = 0
) -> np.ndarray:
    """float[reps]: the statistic (over all runs and tasks pooled) of stratified resamples."""
    stat = STATISTICS[statistic] if isinstance(statistic, str) else statistic
    arr = _as_runs_tasks(scores)
    runs, tasks = arr.shape
    idx = stratified_resample_indices(np.random.default_rng(seed), runs, tasks, reps)
    resampled = arr[idx, np.arange(tasks)[None, None, :]]  # [reps, runs, tasks]
    return np.asarray(stat(resampled.reshape(reps, runs * tasks), axis=-1))


def percentile_interval(
    point: float, samples: np.ndarray, confidence: float = 0.95, exact: bool = False
) -> Interval:
    """``point`` with the percentile interval of its bootstrap ``samples`` at ``confidence``
    (in (0, 1)); ``exact`` takes order statistics (which keep ``inf`` intact) instead of
    interpolating between them."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1 - confidence) / 2
    method = "inverted_cdf" if exact else "linear"
    low, high = np.quantile(samples, [tail, 1 - tail], method=method)
    return Interval(float(point), float(low), float(high))


def bootstrap_ci(
    scores,
    statistic: Statistic | str = "iqm",
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
) -> Interval:
    """Point estimate and percentile stratified-bootstrap CI of ``statistic``.

    The point estimate is the statistic over all runs and tasks pooled. With a single run the
    interval collapses onto the point (a bootstrap cannot show variance it never saw).
    """
    stat = STATISTICS[statistic] if isinstance(statistic, str) else statistic
    arr = _as_runs_tasks(scores)
    point = float(stat(arr.reshape(-1), axis=-1))  # one pooled value
    samples = bootstrap_distribution(arr, stat, reps, seed)
    return percentile_interval(point, samples, confidence)


def _poi_per_task(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + 0.5 P(X == Y) per task for x [..., m, tasks] and y [..., n, tasks]."""
    greater = (x[..., :, None, :] > y[..., None, :, :]).mean(axis=(-3, -2))
    ties = (x[..., :, None, :] == y[..., None, :, :]).mean(axis=(-3, -2))
    return greater + 0.5 * ties


def probability_of_improvement(x, y) -> float:
    """Probability that a random run of X scores higher than a random run of Y.

    Every pair of runs is compared (ties count 0.5) within each task, and the per-task
    probabilities are averaged. ``x`` and ``y`` are [runs] or [runs, tasks] with the same tasks
    (their run counts may differ).
    """
    xa, ya = _as_runs_tasks(x), _as_runs_tasks(y)
    if xa.shape[1] != ya.shape[1]:
        raise ValueError(f"x has {xa.shape[1]} tasks and y has {ya.shape[1]}")
    return float(_poi_per_task(xa, ya).mean())


def probability_of_improvement_ci(
    x, y, confidence: float = 0.95, reps: int = 2000, seed: int = 0, joint: bool = False
) -> Interval:
    """:func:`probability_of_improvement` with a stratified-bootstrap CI (both sides resampled).

    ``joint``: the runs are the same across tasks (one seed's scores on every evaluation
    layout, each layout a task), so a replicate resamples whole runs, the same run indices
    for every task; by default each task's runs are resampled independently."""
    xa, ya = _as_runs_tasks(x), _as_runs_tasks(y)
    if xa.shape[1] != ya.shape[1]:
        raise ValueError(f"x has {xa.shape[1]} tasks and y has {ya.shape[1]}")
    tasks = xa.shape[1]
    rng = np.random.default_rng(seed)
    cols = np.arange(tasks)[None, None, :]
    if joint:
        xs = xa[rng.integers(0, xa.shape[0], size=(reps, xa.shape[0]))[:, :, None], cols]
        ys = ya[rng.integers(0, ya.shape[0], size=(reps, ya.shape[0]))[:, :, None], cols]
    else:
        xs = xa[stratified_resample_indices(rng, xa.shape[0], tasks, reps), cols]
        ys = ya[stratified_resample_indices(rng, ya.shape[0], tasks, reps), cols]
    samples = _poi_per_task(xs, ys).mean(axis=-1)
    return percentile_interval(probability_of_improvement(xa, ya), samples, confidence)
