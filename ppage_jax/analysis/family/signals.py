"""Which training signal moves first: the update at which each signal of a run departs from
its control's.

A stall is read against the arm's declared control (``signal_control``: the same design
with the stall removed, trained on the same seeds), so that what every run goes through
(the early updates, in which only the short episodes have finished; the learning itself)
cancels out. Per seed and update, each signal (a training-curve metric such as
``capture_rate``, ``episode_length`` or ``hover_share``) is the mean over the episodes that
finished in the last ``window`` updates, in the arm's run and in the control's run of the
same seed. The signal *turns* at the first update at which the arm's level is worse than the
control's by ``min_change`` of the control's, for ``patience`` updates in a row. Every signal
is read with the same window, so the delay the window adds is the same for each and their
order is kept. For each arm, the task's signal (the first declared) is paired by seed with
each other one: the seeds in which both turned give the lead in env steps (the task's turn
minus the other's: positive when the other moved first) and its exact sign-flip p. A seed in
which a signal never turned is left out of the lead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from ppage_jax.episodes.metrics import better_sign
from ppage_jax.stats.paired import sign_flip_p

# signal -> the direction in which it moving is bad for the predators' task (+1 rising): from
# the metric table for the task metrics; captures and hover_share are training signals only.
BAD_DIRECTION = {
    "captures": -1,
    **{m: -better_sign(m) for m in ("capture_rate", "episode_length", "steps_to_capture")},
    "hover_share": +1,
}
Series = Mapping[int, float]  # env_steps -> value


def trailing_level(values: Series, episodes: Series, window: int) -> dict[int, float]:
    """env_steps -> the mean of ``values`` over the episodes that finished in the last
    ``window`` updates (NaN where none did)."""
    steps = sorted(values)
    v = np.asarray([values[s] for s in steps], np.float64)
    w = np.asarray([float(episodes.get(s, 0.0) or 0.0) for s in steps], np.float64)
    w = np.where(np.isfinite(v), w, 0.0)
    total = np.convolve(np.where(w > 0, v, 0.0) * w, np.ones(window))[: len(steps)]
    count = np.convolve(w, np.ones(window))[: len(steps)]
    level = np.where(count > 0, total / np.maximum(count, 1e-12), np.nan)
    return dict(zip(steps, level.tolist(), strict=True))


def turning_step(
    arm: Mapping[str, Series],
    control: Mapping[str, Series],
    metric: str,
    window: int,
    min_change: float,
    patience: int,
) -> float:
    """The env steps at which ``metric`` of one seed's run (``arm``: metric -> series, with
    ``episodes``) turned worse than the control's run of the same seed, NaN if never."""
    direction = BAD_DIRECTION[metric]
    mine = trailing_level(arm[metric], arm["episodes"], window)
    theirs = trailing_level(control[metric], control["episodes"], window)
    streak = 0
    for s in sorted(set(mine) & set(theirs)):
        a, b = mine[s], theirs[s]
        worse = (
            math.isfinite(a)
            and math.isfinite(b)
            and direction * (a - b) >= min_change * max(abs(b), 1e-9)
        )
        streak = streak + 1 if worse else 0
        if streak >= patience:
            return float(s)
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
    curves: Mapping[str, Mapping[int, Series]],
    control: Mapping[str, Mapping[int, Series]],
    first: str,
    second: str,
    window: int = 4,
    min_change: float = 0.1,
    patience: int = 3,
) -> LeadLag:
    """``curves`` and ``control``: one arm's and its control's curves, metric -> {seed:
    {env_steps: value}} (with ``episodes``); the turning points of ``first`` and ``second``
    paired by seed (see the module docstring)."""
    seeds = sorted(set(curves.get("episodes", {})) & set(control.get("episodes", {})))
    turns = {}
    for seed in seeds:
        mine = {m: by_seed[seed] for m, by_seed in curves.items() if seed in by_seed}
        theirs = {m: by_seed[seed] for m, by_seed in control.items() if seed in by_seed}
        turns[seed] = tuple(
            turning_step(mine, theirs, m, window, min_change, patience) for m in (first, second)
        )
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
