"""ppage_jax.stats.bootstrap against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ppage_jax.stats import bootstrap as stats


# ------------------------------------------------------------------------------ IQM
@pytest.mark.parametrize(
    "scores, expected",
    [
        ([7.0], 7.0),  # one seed: that seed
        ([1.0, 5.0], 3.0),  # n < 4: nothing trimmed
        ([3.0, 1.0, 2.0], 2.0),
        ([4.0, 1.0, 3.0, 2.0], 2.5),  # trim 1 each end: mean(2, 3)
        ([1.0, 2.0, 3.0, 4.0, 100.0], 3.0),  # trim 1 each end: mean(2, 3, 4); outlier ignored
        ([8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0], 4.5),  # trim 2 each end: mean(3, 4, 5, 6)
        ([2.0, 2.0, 2.0, 9.0, -9.0], 2.0),  # ties
    ],
)
def test_iqm_hand_values(scores, expected):
    assert stats.iqm(scores) == pytest.approx(expected)


def test_iqm_along_axis():
    x = np.array([[1.0, 2.0, 3.0, 4.0], [10.0, 0.0, 0.0, 10.0]])
    np.testing.assert_allclose(stats.iqm(x, axis=-1), [2.5, 5.0])


# ------------------------------------------------------------------------------ bootstrap
def test_bootstrap_ci_single_seed_collapses_to_the_point():
    ci = stats.bootstrap_ci([0.42])
    assert (ci.point, ci.low, ci.high) == (0.42, 0.42, 0.42)


def test_bootstrap_ci_identical_seeds_has_zero_width():
    ci = stats.bootstrap_ci([3.0, 3.0, 3.0, 3.0, 3.0])
    assert (ci.point, ci.low, ci.high) == (3.0, 3.0, 3.0)


def test_bootstrap_ci_two_runs_spans_the_three_possible_means():
    # Resampling {0, 1} twice gives means 0, 0.5, 1 with probability 1/4, 1/2, 1/4, so the
    # 2.5 % and 97.5 % percentiles are 0 and 1.
    ci = stats.bootstrap_ci([0.0, 1.0], statistic="mean", reps=4000, seed=3)
    assert (ci.point, ci.low, ci.high) == (0.5, 0.0, 1.0)
    samples = stats.bootstrap_distribution([0.0, 1.0], "mean", reps=4000, seed=3)
    assert set(np.unique(samples)) == {0.0, 0.5, 1.0}
    assert np.mean(samples == 0.5) == pytest.approx(0.5, abs=0.03)


def test_bootstrap_is_stratified_by_task():
    # Task 0 always scores 0 and task 1 always 10 (4 runs each). A stratified resample keeps
    # four runs per task, so every replicate's mean is exactly 5; pooling the tasks before
    # resampling would not.
    scores = np.array([[0.0, 10.0]] * 4)
    ci = stats.bootstrap_ci(scores, statistic="mean", reps=500)
    assert (ci.point, ci.low, ci.high) == (5.0, 5.0, 5.0)
    ci_iqm = stats.bootstrap_ci(scores, statistic="iqm", reps=500)
    assert (ci_iqm.point, ci_iqm.low, ci_iqm.high) == (5.0, 5.0, 5.0)


def test_bootstrap_ci_brackets_the_mean_like_a_normal_interval():
    rng = np.random.default_rng(0)
    x = rng.normal(10.0, 2.0, size=400)
    ci = stats.bootstrap_ci(x, statistic="mean", reps=2000, seed=1)
    half = 1.96 * x.std() / np.sqrt(x.size)
    assert ci.point == pytest.approx(x.mean())
    assert ci.low == pytest.approx(x.mean() - half, abs=0.04)
    assert ci.high == pytest.approx(x.mean() + half, abs=0.04)


def test_bootstrap_is_deterministic_given_the_seed():
    x = [1.0, 4.0, 2.0, 8.0, 5.0, 7.0]
    assert stats.bootstrap_ci(x, seed=5) == stats.bootstrap_ci(x, seed=5)


# ------------------------------------------------------------------------------ P(improvement)
def test_probability_of_improvement_counts_ties_as_half():
    # Pairs (x, y): 1 beats only 0 -> 1; 2 ties 2 twice and beats 0 -> 0.5 + 0.5 + 1 = 2;
    # 3 beats all three -> 3. Total 6 of 9 pairs.
    assert stats.probability_of_improvement([1, 2, 3], [2, 2, 0]) == pytest.approx(6 / 9)
    assert stats.probability_of_improvement([2, 2, 0], [1, 2, 3]) == pytest.approx(3 / 9)


def test_probability_of_improvement_single_seed():
    assert stats.probability_of_improvement([5.0], [5.0]) == 0.5
    assert stats.probability_of_improvement([6.0], [5.0]) == 1.0
    assert stats.probability_of_improvement([4.0], [5.0]) == 0.0


def test_probability_of_improvement_unequal_run_counts():
    # x = {1, 3} against y = {2}: one loss, one win -> 0.5; against {0, 2, 4}: 1 beats 0;
    # 3 beats 0 and 2 -> 3 wins of 6.
    assert stats.probability_of_improvement([1, 3], [2]) == 0.5
    assert stats.probability_of_improvement([1, 3], [0, 2, 4]) == 0.5


def test_probability_of_improvement_averages_over_tasks():
    # Task 0: x always wins (1.0); task 1: all ties (0.5) -> mean 0.75.
    x = np.array([[2.0, 1.0], [3.0, 1.0]])
    y = np.array([[0.0, 1.0], [1.0, 1.0]])
    assert stats.probability_of_improvement(x, y) == pytest.approx(0.75)


def test_probability_of_improvement_ci():
    ci = stats.probability_of_improvement_ci([5.0], [5.0])
    assert (ci.point, ci.low, ci.high) == (0.5, 0.5, 0.5)
    ci = stats.probability_of_improvement_ci([10, 11, 12], [0, 1, 2])
    assert (ci.point, ci.low, ci.high) == (1.0, 1.0, 1.0)
    ci = stats.probability_of_improvement_ci([1, 2, 3, 4], [2.5, 2.5, 2.5, 2.5], reps=2000)
    assert ci.point == 0.5 and ci.low < 0.5 < ci.high


@pytest.mark.parametrize("bad", [[], [[1.0, np.nan]], np.zeros((2, 2, 2))])
def test_bad_scores_are_rejected(bad):
    with pytest.raises(ValueError):
        stats.bootstrap_ci(bad)


def test_mismatched_tasks_are_rejected():
    with pytest.raises(ValueError, match="tasks"):
        stats.probability_of_improvement(np.zeros((3, 2)), np.zeros((3, 1)))
