"""The survival and few-seed statistics against the libraries people trust: the Kaplan-Meier
curve, median and RMST against ``lifelines``; the IQM and the stratified-bootstrap interval
against ``rliable`` (both in the ``dev`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

from ppage_jax.stats import bootstrap as stats
from ppage_jax.stats import survival

lifelines = pytest.importorskip("lifelines")
rly = pytest.importorskip("rliable.library")
rly_metrics = pytest.importorskip("rliable.metrics")

# (times, events): a tie between a capture and a censoring, all censored at the limit,
# none captured, all captured.
SURVIVAL_DATA = [
    ([3, 5, 5, 7, 9, 20, 20, 2, 11, 5], [1, 1, 0, 1, 1, 0, 0, 1, 1, 1]),
    ([1, 2, 2, 3, 4, 4, 4, 10, 10, 10, 10], [1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0]),
    ([12, 12, 12], [0, 0, 0]),
    ([1, 1, 2, 6], [1, 1, 1, 1]),
]


@pytest.mark.parametrize("times, events", SURVIVAL_DATA)
def test_kaplan_meier_median_and_rmst_match_lifelines(times, events):
    fitter = lifelines.KaplanMeierFitter().fit(times, event_observed=events)
    grid, surv = survival.kaplan_meier(times, events)
    expected = fitter.survival_function_.iloc[:, 0]
    expected = expected[expected.index > 0]  # lifelines adds S(0) = 1
    np.testing.assert_allclose(grid, expected.index.to_numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(surv, expected.to_numpy(), rtol=1e-12, atol=1e-12)
    assert survival.km_median(times, events) == fitter.median_survival_time_
    for horizon in (4, 10, 20):
        from lifelines.utils import restricted_mean_survival_time

        reference = restricted_mean_survival_time(fitter, t=horizon)
        assert survival.rmst(times, events, horizon) == pytest.approx(reference, abs=1e-9)


# Fixed datasets [runs, tasks]: one task, three tasks, a heavy tail.
SCORES = [
    np.array([[0.1], [0.4], [0.35], [0.8], [0.05], [0.6], [0.2], [0.9]]),
    np.arange(30, dtype=float).reshape(10, 3) ** 1.5 / 10,
    np.array([[1.0, 2.0], [1.5, 2.5], [0.5, 40.0], [1.2, 2.2], [1.1, 2.1]]),
]


@pytest.mark.parametrize("scores", SCORES)
def test_iqm_matches_rliable(scores):
    assert stats.iqm(scores.reshape(-1)) == pytest.approx(
        float(rly_metrics.aggregate_iqm(scores)), rel=1e-12
    )


@pytest.mark.filterwarnings("ignore:random_state is deprecated:FutureWarning")
@pytest.mark.parametrize("scores", SCORES)
def test_stratified_bootstrap_interval_matches_rliable(scores):
    """Both are percentile intervals of a stratified bootstrap (runs resampled within each
    task); with 2000 replicates each, the ends agree within 5 % of the score spread (the
    tolerance of two independent Monte Carlo estimates)."""
    ours = stats.bootstrap_ci(scores, "iqm", confidence=0.95, reps=2000, seed=0)
    points, intervals = rly.get_interval_estimates(
        {"x": scores},
        lambda s: np.array([rly_metrics.aggregate_iqm(s)]),
        reps=2000,
        confidence_interval_size=0.95,
        random_state=np.random.RandomState(0),
    )
    low, high = intervals["x"][:, 0]
    assert ours.point == pytest.approx(points["x"][0], rel=1e-12)
    spread = scores.max() - scores.min()
    assert abs(ours.low - low) <= 0.05 * spread
    assert abs(ours.high - high) <= 0.05 * spread
