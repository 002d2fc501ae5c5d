"""ppage_jax.stats.paired against hand-computed values and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from ppage_jax.stats import paired


def test_sign_flip_exact_p_by_hand():
    # [1, 2, 3]: the 8 sign sums are 6, 4, 2, 0, 0, -2, -4, -6; |s| >= 6 twice.
    assert paired.sign_flip_p([1, 2, 3]) == 0.25
    assert paired.sign_flip_p([1, 2, 3], "greater") == 0.125
    assert paired.sign_flip_p([1, 2, 3], "less") == 1.0
    # [2, 2, 2, 2, -1]: the four 2s sum to 8, 4, 0, -4, -8 (1, 4, 6, 4, 1 ways), +-1 on top:
    # |s| >= 7 for 9, 7, -7, -9, one way each: 4 of 32.
    assert paired.sign_flip_p([2, 2, 2, 2, -1]) == 0.125
    # zeros flip to themselves: [0, 0, 5] has |s| = 5 in all 8 assignments
    assert paired.sign_flip_p([0.0, 0.0, 5.0]) == 1.0


def test_sign_flip_split_enumeration_matches_the_direct_one():
    d = np.random.default_rng(3).normal(0.4, 1.0, 14)
    bits = (np.arange(2**14)[:, None] >> np.arange(14)[None, :]) & 1
    sums = (1 - 2 * bits) @ d
    expected = np.mean(np.abs(sums) >= abs(d.sum()) - 1e-9)
    assert paired.sign_flip_p(d) == pytest.approx(expected, abs=1e-12)
    # 16 seeds all favouring one arm: p = 2 / 2**16
    assert paired.sign_flip_p(np.arange(1, 17.0)) == 2 / 2**16


def test_sign_flip_above_the_exact_limit_is_a_seeded_estimate():
    d = np.r_[np.full(24, 1.0), -np.full(2, 1.0)]
    p = paired.sign_flip_p(d)
    assert p == paired.sign_flip_p(d)  # seeded
    assert 0 < p < 1e-3
    with pytest.raises(ValueError, match="alternative"):
        paired.sign_flip_p([1.0], "up")
    with pytest.raises(ValueError, match="finite"):
        paired.sign_flip_p([1.0, np.nan])


def test_holm_on_known_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max
    adjusted = paired.holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(paired.holm([0.5, 0.9]), [1.0, 1.0])
    assert paired.holm([]).size == 0
    with pytest.raises(ValueError):
        paired.holm([1.5])


def test_bca_matches_scipy_on_a_fixed_dataset():
    data = np.array(
        [3.1, -0.4, 2.2, 5.0, 1.1, 0.3, 2.8, 4.4, -1.2, 1.9, 2.5, 0.7, 3.3, 1.4, 2.0, 0.9]
    )
    ours = paired.bca_ci(data, reps=4000, seed=7)
    theirs = sps.bootstrap(
        (data,),
        np.mean,
        confidence_level=0.95,
        n_resamples=4000,
        method="BCa",
        random_state=np.random.default_rng(7),
    ).confidence_interval
    assert ours.point == pytest.approx(data.mean())
    assert (ours.low, ours.high) == pytest.approx((theirs.low, theirs.high))
    # BCa is not the percentile interval: skewed data move it
    percentile = sps.bootstrap(
        (data,),
        np.mean,
        n_resamples=4000,
        method="percentile",
        random_state=np.random.default_rng(7),
    ).confidence_interval
    assert (ours.low, ours.high) != pytest.approx((percentile.low, percentile.high), abs=1e-6)


def test_bca_of_equal_values_is_a_point():
    ci = paired.bca_ci([0.25] * 16)
    assert (ci.point, ci.low, ci.high) == (0.25, 0.25, 0.25)


def test_wilson_by_hand_and_against_scipy():
    ci = paired.wilson_ci(16, 16)
    assert ci.point == 1.0 and ci.high == 1.0
    assert ci.low == pytest.approx(0.8063, abs=1e-4)  # 16 / (16 + 1.96^2)
    for k in (0, 3, 7, 16):
        low, high = sps.binomtest(k, 16).proportion_ci(method="wilson")
        ours = paired.wilson_ci(k, 16)
        assert (ours.low, ours.high) == pytest.approx((low, high))
    half = paired.wilson_ci(7.5, 16)  # ties counted half: between its integer neighbours
    assert paired.wilson_ci(7, 16).low < half.low < paired.wilson_ci(8, 16).low
    with pytest.raises(ValueError):
        paired.wilson_ci(17, 16)


def test_paired_power():
    # noncentral t, df 15, shift 0.8 * 4: 0.848 at 0.05 (a simulated paired t-test of 200 000
    # normal samples rejects 0.849 of them)
    assert paired.paired_power(16, 0.8, 0.05) == pytest.approx(0.8484, abs=1e-4)
    assert paired.paired_power(16, 0.5, 0.05) < paired.paired_power(32, 0.5, 0.05)
    assert paired.paired_power(16, 0.0, 0.05) == pytest.approx(0.05, abs=1e-9)


def test_fewer_than_three_seeds_report_a_point_and_no_interval():
    """One seed per arm gives P(improvement) 1 and a bootstrap over one value: the tables
    show the point and say that no interval was computed, never "1.00 [1.00, 1.00]"."""
    from ppage_jax.analysis.family.report import interval_cell
    from ppage_jax.analysis.sweep.report import headline_stats, metric_table

    results = {"rmst": {"a": {0: 40.0}, "b": {0: 60.0}}}
    head = headline_stats(results, ["a", "b"], "b", metrics={"rmst": ("RMST", False)})
    a = head["rmst"]["a"]
    assert (a["n"], a["iqm"], a["poi_n"]["b"], a["poi"]["b"].point) == (1, 40.0, 1, 1.0)
    rows = metric_table(head, {"rmst": ("RMST", False)}, ["b"])
    assert rows[2] == (
        "| RMST (lower is better) | a | 1 | 40 (n=1: no CI under 3 seeds) | "
        "1.00 (n=1: no CI under 3 seeds) |"
    )
    assert (
        rows[3] == "| RMST (lower is better) | b | 1 | 60 (n=1: no CI under 3 seeds) | reference |"
    )
    # from three seeds on, the interval is there
    three = {"rmst": {"a": {0: 40.0, 1: 41.0, 2: 45.0}, "b": {0: 60.0, 1: 61.0, 2: 39.0}}}
    head = headline_stats(three, ["a", "b"], "b", metrics={"rmst": ("RMST", False)})
    cell = metric_table(head, {"rmst": ("RMST", False)}, ["b"])[2].split(" | ")[-1]
    assert cell == "0.67 [0.21, 0.94] (n=3) |"
    assert interval_cell(paired.wilson_ci(2, 3), 3) == "0.667 [0.208, 0.939]"
    assert interval_cell(paired.wilson_ci(2, 2), 2) == "1 (n=2: no CI under 3 seeds)"
    assert interval_cell(None, 5) == "-"
