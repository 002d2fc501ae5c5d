"""A sweep's declared analysis: the primary endpoint, the family of comparisons and the
prediction, written in the sweep file before it runs (``sweep.analysis``)::

    analysis:
      endpoint: score              # the primary endpoint (default score, ENDPOINTS)
      comparisons:                 # the declared family: Holm-corrected together
        - [hybrid, dense]          # hybrid - dense, paired by seed
        - [[large/a, large/b], [small/a, small/b]]    # (a - b) at large minus at small
        - {compare: [potential, sparse_time], endpoint: auc}   # another endpoint
      prediction: capture falls where the stall margin is positive
      take_off: 0.5                # a seed has taken off once its score reaches this
      signals: [capture_rate, episode_length]   # which training signal turns bad first
      signal_control: high_paid    # ... against this arm's runs of the same seeds
      signal_window: 4             # updates a signal's level is read over

An arm is named as in ``sweep.arms``, or ``scenario/arm`` in a sweep with ``scenarios``.
Every comparison is a difference of paired seeds, oriented so that a positive difference
favours its first arm (:mod:`ppage_jax.analysis.family.paired` tests them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ppage_jax.analysis.family.endpoints import ENDPOINTS
from ppage_jax.analysis.family.signals import BAD_DIRECTION

ANALYSIS_KEYS = (
    "endpoint",
    "comparisons",
    "prediction",
    "take_off",
    "alpha",
    "signals",
    "signal_window",
    "signal_control",
)
COMPARISON_KEYS = ("compare", "endpoint")
PRIMARY = "score"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One declared comparison: ``(label, sign)`` terms whose signed sum over a seed is its
    paired difference (``a - b``: ``((a, 1), (b, -1))``), and the endpoint it is read on."""

    terms: tuple[tuple[str, int], ...]
    endpoint: str

    @property
    def name(self) -> str:
        labels = [label for label, _ in self.terms]
        if len(labels) == 2:
            return f"{labels[0]} - {labels[1]}"
        return f"({labels[0]} - {labels[1]}) - ({labels[2]} - {labels[3]})"

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self.terms)


@dataclasses.dataclass(frozen=True)
class AnalysisSpec:
    """``sweep.analysis``: the primary endpoint, the family (Holm over all of it, at
    ``alpha``), the prediction as written before the run, and the take-off level."""

    endpoint: str = PRIMARY
    comparisons: tuple[Comparison, ...] = ()
    prediction: str = ""
    take_off: float = 0.5
    alpha: float = 0.05
    # training signals whose turning points are compared: the first (the task's) against each
    signals: tuple[str, ...] = ()
    signal_window: int = 4
    signal_control: str | None = None  # the arm the signals are read against
    declared: bool = False  # the sweep file has an analysis (its endpoints are asked for)

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Every endpoint the analysis reads: the primary one first."""
        return tuple(dict.fromkeys([self.endpoint, *(c.endpoint for c in self.comparisons)]))

    def describe(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "comparisons": [
                {"name": c.name, "terms": [list(t) for t in c.terms], "endpoint": c.endpoint}
                for c in self.comparisons
            ],
            "prediction": self.prediction,
            "take_off": self.take_off,
            "alpha": self.alpha,
            "signals": list(self.signals),
            "signal_window": self.signal_window,
            "signal_control": self.signal_control,
            "declared": self.declared,
        }


def read_analysis(read: Any, raw: Any, labels: Sequence[str]) -> AnalysisSpec:
    """``sweep.analysis`` through ``read`` (a :class:`~.reading.SpecReader`): every arm it
    names must be one of ``labels``; every endpoint one of :data:`ENDPOINTS`."""
    where = "sweep.analysis"
    body = read.mapping(where, raw, ANALYSIS_KEYS)
    endpoint = _endpoint(read, f"{where}.endpoint", body.get("endpoint", PRIMARY))
    items = body.get("comparisons") or []
    if not isinstance(items, list):
        read.fail(f"{where}.comparisons", items, "must be a list of comparisons")
    comparisons = []
    for i, item in enumerate(items):
        key = f"{where}.comparisons[{i}]"
        own = endpoint
        if isinstance(item, dict):
            item = read.mapping(key, item, COMPARISON_KEYS)
            own = _endpoint(read, f"{key}.endpoint", item.get("endpoint", endpoint))
            if "compare" not in item:
                read.fail(key, item, "a mapping names its arms under 'compare'")
            item = item["compare"]
        comparisons.append(Comparison(_terms(read, key, item, labels), own))
    prediction = body.get("prediction", "")
    if not isinstance(prediction, str):
        read.fail(f"{where}.prediction", prediction, "must be text")
    take_off = read.number(f"{where}.take_off", body.get("take_off", 0.5))
    alpha = read.number(f"{where}.alpha", body.get("alpha", 0.05))
    if not 0 < alpha < 1:
        read.fail(f"{where}.alpha", alpha, "must be in (0, 1)")
    signals = body.get("signals") or []
    if signals and (
        not isinstance(signals, list)
        or len(signals) < 2
        or any(not isinstance(x, str) or x not in BAD_DIRECTION for x in signals)
        or len(set(signals)) != len(signals)
    ):
        read.fail(
            f"{where}.signals",
            signals,
            f"must be two or more different training signals of {list(BAD_DIRECTION)} (the "
            f"first is the task's; each other is set against it)",
        )
    window = read.integer(f"{where}.signal_window", body.get("signal_window", 4), 1)
    control = body.get("signal_control")
    if signals and control not in labels:
        read.fail(
            f"{where}.signal_control",
            control,
            f"the signals are read against a control: name one of the arms {list(labels)}",
        )
    return AnalysisSpec(
        endpoint,
        tuple(comparisons),
        prediction.strip(),
        take_off,
        alpha,
        tuple(signals),
        window,
        control,
        declared=raw is not None,
    )


def _endpoint(read: Any, key: str, value: Any) -> str:
    if value not in ENDPOINTS:
        read.fail(key, value, f"not a metric; endpoints: {list(ENDPOINTS)}")
    return value


def _terms(read: Any, key: str, item: Any, labels: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """``[a, b]`` -> ``((a, 1), (b, -1))``; ``[[a, b], [c, d]]`` -> ``a - b - c + d``."""
    shape = "[A, B] (A - B) or [[A, B], [C, D]] ((A - B) - (C - D))"
    if not isinstance(item, list) or len(item) != 2:
        read.fail(key, item, f"must be {shape}")
    if all(isinstance(x, list) for x in item):
        if any(len(x) != 2 for x in item):
            read.fail(key, item, f"must be {shape}")
        names = [*item[0], *item[1]]
        signs = (1, -1, -1, 1)
    else:
        names, signs = list(item), (1, -1)
    for name in names:
        if not isinstance(name, str) or name not in labels:
            read.fail(key, name, f"names an unknown arm; arms: {list(labels)}")
    if len(set(names)) != len(names):
        read.fail(key, item, "names an arm twice")
    return tuple(zip(names, signs, strict=True))
