"""Paired comparisons over seeds, in NumPy: seed ``i`` of every arm trains from the same key,
so two arms are compared through their per-seed differences.

- :func:`sign_flip_p`: the exact sign-flip permutation test of a zero mean difference: under
  the null each difference is as likely to have either sign, so the p-value is the share of
  the ``2**n`` sign assignments whose sum is at least as extreme as the observed one
  (enumerated up to :data:`EXACT_MAX` seeds, a seeded Monte Carlo estimate above).
- :func:`holm`: Holm's step-down adjustment over a family of p-values (controls the
  family-wise error rate under any dependence).
- :func:`bca_ci`: the bias-corrected and accelerated bootstrap CI of a mean
  (``scipy.stats.bootstrap``, ``method="BCa"``); a sample whose values are all equal has the
  zero-width interval at that value instead of scipy's NaN.
- :func:`wilson_ci`: the Wilson score interval of a proportion (it never collapses to a
  zero-width interval at 0 or 1, unlike a percentile bootstrap of a win rate); ``successes``
  may be fractional (ties counted half).
- :func:`paired_power`: the power of a two-sided paired test at ``n`` seeds for a
  standardised effect ``dz`` (mean difference over its SD), from the noncentral t
  distribution (the paired t-test's power, which the sign-flip test's approaches for
  normal differences).
"""

from __future__ import annotations

import math

import numpy as np

from ppage_jax.stats.bootstrap import Interval

# Up to this many differences the sign-flip test enumerates every assignment (2**22 sums).
EXACT_MAX = 22
MONTE_CARLO_DRAWS = 200_000
BOOTSTRAP_REPS = 9999
ALTERNATIVES = ("two-sided", "greater", "less")


def _differences(diffs) -> np.ndarray:
    d = np.asarray(diffs, np.float64).reshape(-1)
    if d.size == 0:
        raise ValueError("a paired test needs at least one difference")
    if not np.isfinite(d).all():
        raise ValueError("paired differences must be finite")
    return d


def _all_sign_sums(d: np.ndarray) -> np.ndarray:
    """float[2**n]: the sum of ``d`` under every sign assignment (each half's sums
    enumerated, then added as an outer sum: 2**n floats, no 2**n x n matrix)."""
    if d.size <= 10:
        bits = (np.arange(2**d.size)[:, None] >> np.arange(d.size)[None, :]) & 1
        return (1 - 2 * bits) @ d
    half = d.size // 2
    return np.add.outer(_all_sign_sums(d[:half]), _all_sign_sums(d[half:])).reshape(-1)


def _sign_sums(d: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """The sums of ``d`` under every sign assignment (or ``MONTE_CARLO_DRAWS`` random ones)."""
    if rng is None:
        return _all_sign_sums(d)
    signs = rng.integers(0, 2, size=(MONTE_CARLO_DRAWS, d.size)) * 2 - 1
    return signs @ d


def sign_flip_p(diffs, alternative: str = "two-sided", seed: int = 0) -> float:
    """p-value of the sign-flip test of ``mean(diffs) == 0`` against ``alternative``
    (``two-sided``, ``greater``: the mean is above 0, ``less``). Exact for up to
    :data:`EXACT_MAX` differences; above, ``(hits + 1) / (draws + 1)`` over seeded random
    assignments."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {list(ALTERNATIVES)}, got {alternative!r}")
    d = _differences(diffs)
    exact = d.size <= EXACT_MAX
    sums = _sign_sums(d, None if exact else np.random.default_rng(seed))
    observed = d.sum()
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if alternative == "two-sided":
        hits = np.abs(sums) >= abs(observed) - tol
    elif alternative == "greater":
        hits = sums >= observed - tol
    else:
        hits = sums <= observed + tol
    if exact:
        return float(hits.mean())
    return float((hits.sum() + 1) / (hits.size + 1))


def holm(pvalues) -> np.ndarray:
    """Holm-adjusted p-values, in the order given: the ``k``-th smallest p becomes
    ``max_{j <= k} (m - j + 1) p_(j)``, capped at 1."""
    p = np.asarray(pvalues, np.float64).reshape(-1)
    if p.size == 0:
        return p
    if np.any((p < 0) | (p > 1)) or not np.isfinite(p).all():
        raise ValueError("p-values must be in [0, 1]")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(stepped, 1.0)
    return out


def bca_ci(values, confidence: float = 0.95, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> Interval:
    """The mean of ``values`` with its BCa bootstrap CI (``scipy.stats.bootstrap``)."""
    from scipy import stats

    x = _differences(values)
    point = float(x.mean())
    if x.size < 2 or np.ptp(x) == 0:
        return Interval(point, point, point)
    result = stats.bootstrap(
        (x,),
        np.mean,
        confidence_level=confidence,
        n_resamples=reps,
        method="BCa",
        # scipy's older name (rng needs scipy>=1.15); its stubs no longer list it
        random_state=np.random.default_rng(seed),  # pyright: ignore[reportCallIssue]
    )
    low, high = result.confidence_interval
    return Interval(point, float(low), float(high))


def wilson_ci(successes: float, n: int, confidence: float = 0.95) -> Interval:
    """The share ``successes / n`` with its Wilson score interval."""
    from scipy import stats

    if n < 1:
        raise ValueError(f"a proportion needs n >= 1, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n] = [0, {n}], got {successes}")
    z = float(stats.norm.isf((1 - confidence) / 2))
    share = successes / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return Interval(share, max(0.0, centre - half), min(1.0, centre + half))


def paired_power(n: int, dz: float, alpha: float = 0.05) -> float:
    """Power of a two-sided paired test at level ``alpha`` with ``n`` pairs for the
    standardised effect ``dz`` (noncentral t with ``n - 1`` degrees of freedom)."""
    from scipy import stats

    if n < 2:
        return math.nan
    df = n - 1
    critical = stats.t.isf(alpha / 2, df)
    shift = abs(dz) * math.sqrt(n)
    return float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))
