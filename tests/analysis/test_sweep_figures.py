"""The sweep report's figures: headline.png's panels on a grid, with y axes floored so that
arms 0.1 % apart do not look far apart (figures.headline_figure)."""

from __future__ import annotations

import math

import pytest

from ppage_jax.analysis.family.endpoints import HEADLINE
from ppage_jax.analysis.sweep import figures

ARMS = ["base_only", "predator_distance", "survival", "both"]


def _entry(iqm: float, half: float) -> dict:
    return {"iqm": iqm, "low": iqm - half, "high": iqm + half}


def _head() -> dict:
    """Every headline metric; the prey's base return nearly equal across arms (the
    -33.60 to -33.72 of the issue), the RMST far apart."""
    head = {m: {arm: _entry(1.0 + i, 0.1) for i, arm in enumerate(ARMS)} for m in HEADLINE}
    head["base_return/prey"] = {
        arm: _entry(v, 0.01) for arm, v in zip(ARMS, [-33.60, -33.72, -33.65, -33.70], strict=True)
    }
    head["rmst"] = {arm: _entry(v, 5.0) for arm, v in zip(ARMS, [20, 80, 150, 300], strict=True)}
    head["capture_rate"] = {arm: _entry(1.0, 0.0) for arm in ARMS}  # identical arms
    return head


def _geometry(ax) -> tuple[int, int]:
    spec = ax.get_subplotspec()
    assert spec is not None
    return spec.get_gridspec().get_geometry()


def test_headline_panels_sit_on_a_grid_of_three_columns():
    fig = figures.headline_figure(_head(), ARMS)
    assert fig is not None
    assert len(HEADLINE) == 7 and len(fig.axes) == 7  # the two spare cells are removed
    assert {_geometry(ax) for ax in fig.axes} == {(3, 3)}
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [label for label, _ in HEADLINE.values()]
    width, height = fig.get_size_inches()
    assert width <= 3 * 3.4 + 1e-9 and height >= 3 * 3.0  # not one long row


def test_headline_y_axes_are_floored_not_zoomed_to_noise():
    head = _head()
    fig = figures.headline_figure(head, ARMS)
    assert fig is not None
    panels = dict(zip(HEADLINE, fig.axes, strict=True))
    low, high = panels["base_return/prey"].get_ylim()
    # at least 5 % of |-33.7| high: the 0.12 between the arms is a small part of the panel
    assert high - low >= 0.05 * 33.72 - 1e-9
    assert (0.12 + 0.02) / (high - low) < 0.1
    assert low <= -33.73 and high >= -33.59  # every point and interval end is shown
    # identical arms: a panel of at least MIN_SPAN around them, not a degenerate axis
    low, high = panels["capture_rate"].get_ylim()
    assert high - low == pytest.approx(figures.MIN_SPAN) and low < 1.0 < high
    # arms far apart keep limits fitted to their values
    low, high = panels["rmst"].get_ylim()
    assert low <= 15 and high >= 305 and high - low < 1.2 * 290


def test_panel_grid_and_floored_ylim():
    assert [figures.panel_grid(n) for n in (1, 2, 3, 4, 6, 7)] == [
        (1, 1),
        (1, 2),
        (1, 3),
        (2, 3),
        (2, 3),
        (3, 3),
    ]
    assert figures.floored_ylim([math.nan, math.inf]) is None
    low, high = figures.floored_ylim([100.0, 100.1])  # 0.1 % apart
    assert high - low == pytest.approx(0.05 * 100.1) and (low + high) / 2 == pytest.approx(100.05)
    assert figures.floored_ylim([0.0, 10.0]) == pytest.approx((-0.5, 10.5))


def test_no_headline_metric_draws_no_figure():
    assert figures.headline_figure({}, ARMS) is None
