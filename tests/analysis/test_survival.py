"""Kaplan-Meier curve, median and RMST against values computed by hand, with censoring."""

from __future__ import annotations

import numpy as np
import pytest

from ppage_jax.stats import survival as S

# Five episodes: captured at 2, 3, 5; censored at 3 and 5 (ties: censored still at risk).
# S(2) = 4/5 = 0.8; S(3) = 0.8 * 3/4 = 0.6; S(5) = 0.6 * 1/2 = 0.3.
TIMES = [2, 3, 3, 5, 5]
EVENTS = [True, True, False, True, False]


def test_kaplan_meier_by_hand():
    t, surv = S.kaplan_meier(TIMES, EVENTS)
    np.testing.assert_array_equal(t, [2, 3, 5])
    np.testing.assert_allclose(surv, [0.8, 0.6, 0.3])
    assert S.km_median(TIMES, EVENTS) == 5.0  # first S <= 0.5
    assert S.rmst(TIMES, EVENTS, 5) == pytest.approx(2 * 1.0 + 1 * 0.8 + 2 * 0.6)
    assert S.rmst(TIMES, EVENTS, 6) == pytest.approx(4.0 + 1 * 0.3)
    assert S.rmst(TIMES, EVENTS, 2.5) == pytest.approx(2 + 0.5 * 0.8)
    np.testing.assert_allclose(S.capture_curve(TIMES, EVENTS, 6), [0, 0, 0.2, 0.4, 0.4, 0.7, 0.7])


def test_all_censored():
    times, events = [4, 4, 7], [False, False, False]
    assert S.km_median(times, events) == np.inf  # never reaches 0.5
    assert S.rmst(times, events, 7) == 7.0  # nothing is known to end
    assert S.rmst(times, events, 10) == 10.0
    assert not S.capture_curve(times, events, 7).any()
    summary = S.survival_summary(times, events, 7, S.Bootstrap(50))
    assert summary["km_median"] == np.inf and summary["km_median_ci"] == [np.inf, np.inf]
    assert summary["rmst_ci"] == [7.0, 7.0]


def test_no_censoring_is_the_plain_mean_and_median():
    times, events = [1, 2, 3, 6], [True] * 4
    assert S.km_median(times, events) == 2.0  # S(2) = 0.5 exactly
    assert S.rmst(times, events, 6) == pytest.approx(np.mean(times))
    assert S.rmst(times, events, 2) == pytest.approx(1 + 0.75)
    np.testing.assert_allclose(S.capture_curve(times, events, 3), [0, 0.25, 0.5, 0.75])


def test_censoring_at_the_horizon_gives_the_mean_of_min_t_horizon():
    rng = np.random.default_rng(0)
    times = rng.integers(1, 40, 300)
    cap = 25
    observed, captured = np.minimum(times, cap), times < cap
    assert S.rmst(observed, captured, cap) == pytest.approx(observed.mean())
    # the survivor-biased mean over captured episodes is much lower
    assert observed[captured].mean() < S.rmst(observed, captured, cap) - 3


def test_bootstrap_intervals():
    summary = S.survival_summary(TIMES, EVENTS, 5, S.Bootstrap(400, seed=1))
    assert summary["km_median"] == 5.0 and summary["rmst"] == pytest.approx(4.0)
    low, high = summary["rmst_ci"]
    assert 2.0 <= low < 4.0 < high <= 5.0
    assert summary["km_median_ci"][0] <= 5.0 <= summary["km_median_ci"][1]
    # Two strata of two: one always captured at turn 1, one censored at 10. Resampling within
    # strata keeps half captured in every replicate: S = 1/2 after turn 1, so the median is
    # 1 and the RMST 1 + 9/2 every time. Pooled resampling varies.
    times, events, strata = [1, 1, 10, 10], [True, True, False, False], [0, 0, 1, 1]
    fixed = S.survival_summary(times, events, 10, S.Bootstrap(300), strata=strata)
    assert fixed["rmst_ci"] == [5.5, 5.5] and fixed["km_median_ci"] == [1.0, 1.0]
    pooled = S.survival_summary(times, events, 10, S.Bootstrap(300))
    assert pooled["rmst_ci"][0] < 5.5 < pooled["rmst_ci"][1]
    assert "rmst_ci" not in S.survival_summary(times, events, 10, S.Bootstrap(0))


def test_rmst_ratio_is_paired_over_layouts():
    # Every layout takes the first policy half as long as the second: RMST 2.5 against 5.0,
    # and each paired resample keeps that ratio exactly, however hard the layouts drawn.
    fast, slow, captured = [1, 2, 3, 4], [2, 4, 6, 8], [True] * 4
    out = S.rmst_ratio(fast, captured, slow, captured, 100, S.Bootstrap(300))
    assert out["ratio"] == 0.5 and out["ratio_ci"] == [0.5, 0.5]
    # With censoring at the horizon: (2 + 500) / 2 over (4 + 500) / 2; a resample of the
    # first layout only gives 2 / 4, of the second only 500 / 500.
    out = S.rmst_ratio([2, 500], [True, False], [4, 500], [True, False], 500, S.Bootstrap(300))
    assert out["ratio"] == pytest.approx(251 / 252)
    assert 0.5 <= out["ratio_ci"][0] < 251 / 252 < out["ratio_ci"][1] <= 1.0
    assert "ratio_ci" not in S.rmst_ratio(fast, captured, slow, captured, 100, S.Bootstrap(0))
    with pytest.raises(ValueError, match="equal counts"):
        S.rmst_ratio([1, 2], [True, True], [1], [True], 10)


@pytest.mark.parametrize(
    "times, events, words",
    [
        ([1, 2], [True], "same length"),
        ([], [], "no episode"),
        ([-1.0], [True], ">= 0"),
    ],
)
def test_bad_input(times, events, words):
    with pytest.raises(ValueError, match=words):
        S.km_median(times, events)
