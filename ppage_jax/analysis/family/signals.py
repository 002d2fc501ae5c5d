"""Which training signal moves first: the update at which each signal of a run turns bad.

A signal (a training-curve metric such as ``captures`` or ``episode_length``) *turns* at
the first update where its episode-weighted level over the last ``window`` blocks (the
monitor's blocks of at least ``min_episodes`` finished episodes,
:func:`ppage_jax.train.run.monitor.pool_rows`) is worse than its best window so far (one
that ended at least a window earlier) by ``min_change`` of that best level, for
``patience`` blocks in a row: the monitor's peak-relative rule, on one signal. For each arm
the turning updates of two signals are paired by seed; the seeds in which both turned give
the lead in updates (second signal's turn minus the first's: positive when the first moved
first) and its exact sign-flip p. A seed in which a signal never turned is censored at the
run's end.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from ppage_jax.stats.paired import sign_flip_p
from ppage_jax.train.run.monitor import MonitorConfig, pool_rows

# signal -> the direction in which it moving is bad for the predators' task (+1 rising)
BAD_DIRECTION = {
    "captures": -1,
    "capture_rate": -1,
    "episode_length": +1,
    "steps_to_capture": +1,
    "hover_share": +1,
}


def blocks_of(
    series: Mapping[str, Mapping[int, float]], min_episodes: int, after: int = 0
) -> list[dict[str, float]]:
    """One seed's curve (metric -> {env_steps: value}, with ``episodes``) pooled into the
    monitor's blocks, each with the env steps of its last update; the updates up to
    ``after`` env steps (the warm-up) are left out."""
    steps = sorted(s for s in series.get("episodes", {}) if s > after)
    pending: list[dict] = []
    out = []
    for s in steps:
        row = {"env_steps": s, **{m: v.get(s, math.nan) for m, v in series.items()}}
        pending.append(row)
        if sum(max(0.0, r["episodes"] or 0.0) for r in pending) >= min_episodes:
            out.append(pool_rows(pending))
            pending = []
    return out


def turning_step(blocks: Sequence[Mapping[str, float]], metric: str, cfg: MonitorConfig) -> float:
    """The env steps at which ``metric`` turned bad (see the module docstring), NaN if never."""
    direction = BAD_DIRECTION[metric]
    levels = np.asarray([float(b.get(metric, math.nan)) for b in blocks], np.float64)
    weights = np.asarray([float(b.get("episodes", 0.0)) for b in blocks], np.float64)
    windows = []
    streak = 0
    for end in range(cfg.window, len(blocks) + 1):
        v, w = levels[end - cfg.window : end], weights[end - cfg.window : end]
        keep = np.isfinite(v) & (w > 0)
        if not keep.any():
            windows.append(math.nan)
            continue
        good = -direction * float(np.average(v[keep], weights=w[keep]))
        windows.append(good)
        earlier = [x for x in windows[: len(windows) - cfg.window] if math.isfinite(x)]
        turned = False
        if earlier:
            best = max(earlier)
            turned = best - good >= cfg.min_change * max(abs(best), 1e-9)
        streak = streak + 1 if turned else 0
        if streak >= cfg.patience:
            return float(blocks[end - 1]["env_steps"])
    return math.nan


@dataclasses.dataclass(frozen=True)
class LeadLag:
    """Two signals' turning points over an arm's seeds."""

    first: str
    second: str
    turns: dict[int, tuple[float, float]]  # seed -> (first's env steps, second's), NaN: never
    both: int  # seeds in which both turned
    first_sooner: int
    second_sooner: int
    ties: int
    lead: float  # median over the seeds in which both turned of (second - first) env steps
    p: float  # exact two-sided sign-flip p of those differences (NaN: none)


def lead_lag(
    curves: Mapping[str, Mapping[int, Mapping[int, float]]],
    first: str,
    second: str,
    cfg: MonitorConfig,
    after: int = 0,
) -> LeadLag:
    """``curves``: one arm's curves, metric -> {seed: {env_steps: value}} (with
    ``episodes``); the turning points of ``first`` and ``second`` paired by seed (read from
    past ``after`` env steps, with ``cfg``'s window, patience and minimum change)."""
    seeds = sorted(curves.get("episodes", {}))
    turns = {}
    for seed in seeds:
        series = {m: by_seed[seed] for m, by_seed in curves.items() if seed in by_seed}
        blocks = blocks_of(series, cfg.min_episodes, after)
        turns[seed] = (turning_step(blocks, first, cfg), turning_step(blocks, second, cfg))
    both = [(a, b) for a, b in turns.values() if math.isfinite(a) and math.isfinite(b)]
    diffs = np.asarray([b - a for a, b in both], np.float64)
    return LeadLag(
        first,
        second,
        turns,
        len(both),
        int((diffs > 0).sum()),
        int((diffs < 0).sum()),
        int((diffs == 0).sum()),
        float(np.median(diffs)) if diffs.size else math.nan,
        sign_flip_p(diffs) if diffs.size else math.nan,
    )
