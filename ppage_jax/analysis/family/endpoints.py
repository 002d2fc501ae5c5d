"""What a sweep's runs are scored on, named once: the task metrics of ``results.csv`` and the
normalised score derived from them.

**The normalised score** of a run is ``(random - run) / (random - chase)`` on the restricted
mean time to capture (RMST), where ``random`` and ``chase`` are the RMSTs of random and
greedy BFS-chase predators on the same held-out layouts (``baselines.csv``): 0 is no better
than random predators, 1 is the scripted chase, and the fraction in between is the share of
the random-to-chase headroom the run covers. It needs headroom: on a scenario where the
chase is no faster than random predators it is refused (:class:`NoHeadroom`). With the prey
learning instead, the baselines are random and greedy BFS-evade prey and the score is
``(run - random) / (evade - random)``: again 0 at random, 1 at the scripted policy.

**The area under the evaluation curve** (``auc``) is the mean normalised score over the
checkpoints of ``sweep.checkpoints`` (evenly spaced over training, scored on their own fresh
layout block against baselines on that block): 1 for a run at the chase's level from its
first checkpoint, so it rewards reaching a level sooner as well as the level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ppage_jax.episodes.metrics import headline

# metric -> (label, higher is better): the headline task metrics of results.csv, in the
# report's order (the metric table, ppage_jax.episodes.metrics, less the survivor-biased).
HEADLINE = headline()
# Derived from results.csv and baselines.csv (score) or checkpoints.csv (auc).
DERIVED = {
    "score": ("normalised RMST score: (random - arm) / (random - chase)", True),
    "auc": ("area under the evaluation curve of the normalised score", True),
}
ENDPOINTS = {**DERIVED, **HEADLINE}
# The baselines.csv rows the score is normalised between: (floor, expert) per learning role.
SCORE_BASELINES = {"predator": ("random", "chase"), "prey": ("prey_random", "prey_evade")}


class NoHeadroom(ValueError):
    """The normalised score asked for where the scripted policy is no better than random."""


def score_scale(levels: Mapping[str, Mapping[str, float]], where: str = "") -> tuple[float, float]:
    """``(floor, expert)`` RMSTs the score is normalised between, from one block of
    :func:`~ppage_jax.analysis.sweep.baselines.baseline_levels`; :class:`NoHeadroom` when
    the expert is not better than the floor (or the baselines are missing)."""
    for floor, expert in SCORE_BASELINES.values():
        if floor in levels and expert in levels:
            low, high = levels[floor]["rmst"], levels[expert]["rmst"]
            better = high < low if floor == "random" else high > low
            if not (math.isfinite(low) and math.isfinite(high) and better):
                raise NoHeadroom(
                    f"{where}the normalised score needs headroom between {floor} and {expert} "
                    f"on the held-out layouts, but their RMSTs are {low:.4g} and {high:.4g} "
                    f"turns: choose another endpoint (rmst, capture_rate, ...)"
                )
            return float(low), float(high)
    raise NoHeadroom(
        f"{where}the normalised score needs the random and scripted baselines, which a sweep "
        f"plays only when exactly one role learns: choose another endpoint (rmst, ...)"
    )


def normalised(rmst, scale: tuple[float, float]) -> np.ndarray:
    """RMST -> the normalised score between ``scale = (floor, expert)``."""
    floor, expert = scale
    return (floor - np.asarray(rmst, np.float64)) / (floor - expert)


def turns_per_score(scale: tuple[float, float]) -> float:
    """Turns of RMST one unit of score is worth (negative: a higher score is fewer turns
    for predators)."""
    floor, expert = scale
    return expert - floor
