"""The search space: named dimensions with bounds and a scale, and candidates built from them.

A strategy works in the unit cube ``[0, 1]^d``; :meth:`Dimension.value` maps a coordinate to
the dimension's bounds (linearly, or log-uniformly for ``scale: log``) and
:meth:`Dimension.unit` maps back. Coordinates outside the cube are clipped to the bounds, so a
candidate never leaves them; the bounds are checked against the declared range of what they
search when the search file is loaded (:mod:`.spec`), and a search announces once per key
that a strategy's proposals were clipped (CMA-ES and SNES sample normal distributions).

A dimension names what it sets in a reward design (a :class:`~ppage_jax.analysis.batch.spec.Arm`):

- ``weights.<term>``: the term's weight;
- ``params.<term>.<param>``: one of the term's numeric params (``params.base.step_cost``);
- ``hyperparams.<name>``: a traced training hyperparameter (``hyperparams.learning_rate``).

All are traced, so every candidate of every generation runs in the same compiled program.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ppage_jax.analysis.batch.spec import Arm

KINDS = ("weights", "params", "hyperparams")
SCALES = ("linear", "log")


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One searched number: ``kind`` (``weights``/``params``/``hyperparams``), the term (or
    hyperparameter) it sets, the param (``params`` only), bounds and scale."""

    key: str  # as written in the search file: weights.predator_closeness
    kind: str
    name: str  # term name, or hyperparameter name
    param: str | None
    low: float
    high: float
    scale: str = "linear"

    @property
    def param_name(self) -> str:
        """The term param a ``params`` dimension sets."""
        if self.param is None:
            raise ValueError(f"{self.key} sets no term param")
        return self.param

    def value(self, u: float) -> float:
        """The value at unit coordinate ``u`` (clipped to [0, 1])."""
        u = min(max(float(u), 0.0), 1.0)
        if self.scale == "log":
            lo, hi = math.log(self.low), math.log(self.high)
            value = math.exp(lo + u * (hi - lo))
        else:
            value = self.low + u * (self.high - self.low)
        return float(min(max(value, self.low), self.high))  # never a rounding step outside

    def unit(self, value: float) -> float:
        """The unit coordinate of ``value`` (clipped to the bounds)."""
        value = min(max(float(value), self.low), self.high)
        if self.scale == "log":
            lo, hi = math.log(self.low), math.log(self.high)
            return (math.log(value) - lo) / (hi - lo)
        return (value - self.low) / (self.high - self.low)

    def current(self, arm: Arm) -> float:
        """This dimension's value in ``arm`` (the design the search starts from)."""
        if self.kind == "hyperparams":
            return float(arm.hyperparams[self.name])
        entry = next(e for e in arm.entries if e.name == self.name)
        return float(entry.weight if self.kind == "weights" else entry.params[self.param_name])


def outside_box(dims: Sequence[Dimension], unit: np.ndarray) -> list[str]:
    """The keys of ``dims`` where some of a population's unit vectors [P, d] lie outside
    [0, 1] (their values are clipped to the bounds)."""
    unit = np.asarray(unit, np.float64)
    return [d.key for d, col in zip(dims, unit.T, strict=True) if ((col < 0) | (col > 1)).any()]


def candidate_values(dims: Sequence[Dimension], unit: np.ndarray) -> np.ndarray:
    """float64[P, d]: the values of a population of unit vectors [P, d]."""
    unit = np.asarray(unit, np.float64)
    return np.array([[d.value(u) for d, u in zip(dims, row, strict=True)] for row in unit])


def candidate_arm(
    design: Arm, dims: Sequence[Dimension], values: Sequence[float], name: str
) -> Arm:
    """``design`` with each dimension set to its value, named ``name``."""
    terms = {t.name: t for t in design.terms}
    hyper = dict(design.hyperparams)
    for dim, value in zip(dims, values, strict=True):
        value = float(value)
        if dim.kind == "hyperparams":
            hyper[dim.name] = value
        elif dim.kind == "weights":
            terms[dim.name] = dataclasses.replace(terms[dim.name], weight=value)
        else:
            params = dict(terms[dim.name].params)
            params[dim.param_name] = value
            terms[dim.name] = dataclasses.replace(terms[dim.name], params=params)
    return Arm(name, tuple(terms.values()), design.gamma, f"{design.source} + search", hyper)


# A value within this share of its box's width (in the searched scale) lies on a bound.
NEAR_BOUND = 0.05


def near_bounds(
    dims: Sequence[Dimension], values: Sequence[float], margin: float = NEAR_BOUND
) -> list[tuple[str, str, float, float]]:
    """``(key, "low" | "high", bound, value)`` for each value within ``margin`` of the box's
    width of one of its bounds (unit coordinates, so a log-scale key is measured on its log
    scale): a winner there may be held back by the box, not chosen by the landscape."""
    out = []
    for dim, value in zip(dims, values, strict=True):
        u = dim.unit(float(value))
        if u <= margin:
            out.append((dim.key, "low", dim.low, float(value)))
        elif u >= 1.0 - margin:
            out.append((dim.key, "high", dim.high, float(value)))
    return out


def bound_lines(dims: Sequence[Dimension], values: Sequence[float]) -> list[str]:
    """One line per key whose value lies within 5 % of a bound (:func:`near_bounds`)."""
    return [
        f"`{key}` = {value:.4g} lies within {NEAR_BOUND:.0%} of the box's width of its "
        f"{side} bound ({bound:g}): the bound may be the answer; widen it and search again."
        for key, side, bound, value in near_bounds(dims, values)
    ]


def column(dim: Dimension) -> str:
    """A dimension's column in search.csv: its key (``weights.predator_closeness``)."""
    return dim.key
