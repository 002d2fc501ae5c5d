"""A run's figures drawn from the files a run directory holds: metrics.csv (metrics rows) and
summary.json (the evaluation rows)."""

import json
import math

import imageio.v3 as iio
import numpy as np
import pytest

from ppage_jax.train.run import report
from ppage_jax.viz import run_figures
from ppage_jax.viz.run_figures import (
    plot_capture_curves,
    plot_learning_curves,
    read_metrics,
    smoothed,
)

NAN = float("nan")
# seed -> per update (active, capture_rate, return/predator/base, return/predator/step)
SEEDS = {
    0: [(True, 0.0, 1.0, -0.5), (True, 0.5, 2.0, -0.5), (True, 1.0, 3.0, -1.0), (True, NAN, 0, 0)],
    1: [(True, 1.0, 5.0, 0.0), (True, 1.0, 4.0, 0.0), (True, 0.0, 3.0, 0.0), (False, 0.0, 9, 9)],
}


def metrics_rows() -> list[dict]:
    """Metrics rows as a run writes them (2 seeds x 4 updates of 10 env steps)."""
    rows = []
    for seed, updates in SEEDS.items():
        for u, (active, capture, base, step) in enumerate(updates, start=1):
            rows.append(
                {
                    "seed": seed,
                    "update": u,
                    "env_steps": 10 * u,
                    "active": active,
                    "episodes": 3,
                    "capture_rate": capture,
                    "episode_length": 7.5,
                    "steps_to_capture": NAN,
                    "return/predator/base": base,
                    "return/predator/step": step,
                    "return/prey/survival": NAN,
                    "loss/td_error/predator": 0.25,
                    "monitor/return_up_capture_flat/predator": 0,
                }
            )
    return rows


@pytest.fixture
def saved_run(tmp_path):
    """A run directory holding metrics.csv and summary.json (the random row with JSON nulls)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    report.write_metrics(run_dir, metrics_rows())
    random_row = {"capture_rate": 0.25, "steps_to_capture": NAN, "episode_length": 12.0}
    report.write_summary(
        run_dir, {"algorithm": "iql", "evaluation": {"rows": {"random": random_row}}}
    )
    return run_dir


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions save, by path (the files are written too)."""
    figures = {}
    save = run_figures.save_figure

    def keep(fig, path, **kwargs):
        figures[path.name] = fig
        return save(fig, path, **kwargs)

    monkeypatch.setattr(run_figures, "save_figure", keep)
    return figures


def test_read_metrics_parses_what_write_metrics_wrote(saved_run):
    rows = read_metrics(saved_run / report.METRICS_FILE)
    assert len(rows) == 8
    first, last = rows[0], rows[-1]
    assert (first["seed"], first["update"], first["env_steps"], first["active"]) == (0, 1, 10, True)
    assert (last["seed"], last["update"], last["active"]) == (1, 4, False)
    assert first["return/predator/step"] == -0.5 and first["episodes"] == 3
    assert math.isnan(first["steps_to_capture"]) and math.isnan(rows[3]["capture_rate"])
    assert first["monitor/return_up_capture_flat/predator"] == 0
    assert (
        json.loads((saved_run / report.SUMMARY_FILE).read_text())["evaluation"]["rows"]["random"][
            "steps_to_capture"
        ]
        is None
    )  # NaN is saved as null


def test_learning_curves_are_drawn_from_the_saved_files(saved_run, tmp_path, drawn):
    summary = json.loads((saved_run / report.SUMMARY_FILE).read_text())
    rows = read_metrics(saved_run / report.METRICS_FILE)
    path = plot_learning_curves(
        saved_run, rows, summary["algorithm"], summary["evaluation"]["rows"]["random"]
    )
    assert path == saved_run / "learning_curves.png" == saved_run / report.CURVES_FILE
    capture, steps, length, returns = drawn["learning_curves.png"].axes
    # the mean over seeds of the capture rate; the update seed 1 did not run is left out
    curve, baseline = capture.lines
    np.testing.assert_array_equal(curve.get_xdata(), [10, 20, 30, 40])
    np.testing.assert_array_equal(curve.get_ydata(), [0.5, 0.75, 0.5, NAN])
    assert curve.get_label() == "iql"
    np.testing.assert_array_equal(baseline.get_ydata(), [0.25, 0.25])
    assert len(steps.lines) == 1  # the baseline's steps to capture is null: no line
    np.testing.assert_array_equal(length.lines[0].get_ydata(), [7.5, 7.5, 7.5, 7.5])
    np.testing.assert_array_equal(length.lines[1].get_ydata(), [12.0, 12.0])
    # the total of the predators' terms; the prey's returns are all NaN: no curve
    (total,) = returns.lines
    assert total.get_label() == "predator total return"
    np.testing.assert_array_equal(total.get_ydata(), [2.75, 2.75, 2.5, 0.0])

    # drawn from the rows in memory, the picture is the same
    again = tmp_path / "in_memory"
    again.mkdir()
    nan_baseline = {"capture_rate": 0.25, "steps_to_capture": NAN, "episode_length": 12.0}
    plot_learning_curves(again, metrics_rows(), "iql", nan_baseline)
    np.testing.assert_array_equal(iio.imread(path), iio.imread(again / "learning_curves.png"))


def test_smoothed_is_a_trailing_nan_aware_mean():
    values = np.array([1.0, NAN, 3.0, 5.0, NAN, NAN])
    np.testing.assert_array_equal(smoothed(values, 2), [1.0, 1.0, 3.0, 4.0, 5.0, NAN])
    np.testing.assert_array_equal(smoothed(values, 1), values)


def test_capture_curves_from_a_saved_evaluation(tmp_path, drawn):
    """Panels of predators and of prey, labelled from summary.json's rows (a NaN or an
    infinity is saved as null, shown as n/a), each curve the Kaplan-Meier fraction captured
    by turn t."""
    played = {
        "trained": {"episode_length": np.array([[2, 4]]), "captured": np.array([[True, True]])},
        "random": {"episode_length": np.array([[4, 4]]), "captured": np.array([[True, False]])},
        "chase": {"episode_length": np.array([[1, 3]]), "captured": np.array([[True, True]])},
        "prey_evade": {"episode_length": np.array([[4, 4]]), "captured": np.array([[False] * 2])},
    }
    evaluation = {  # what summarize_rows gives; random's RMST NaN, prey_evade's median inf
        "trained": {"predators": "trained (greedy)", "prey": "trained (greedy)"},
        "random": {"predators": "random", "prey": "trained (greedy)"},
        "chase": {"predators": "greedy BFS chase", "prey": "trained (greedy)"},
        "prey_evade": {"predators": "trained (greedy)", "prey": "greedy BFS evade"},
    }
    medians_rmsts = [(3.0, 3.0), (4.0, NAN), (2.0, 2.0), (math.inf, 4.0)]
    for row, (median, rmst) in zip(evaluation.values(), medians_rmsts, strict=True):
        row.update(km_median=median, rmst=rmst)
    report.write_summary(tmp_path, {"evaluation": {"rows": evaluation}})
    saved = json.loads((tmp_path / report.SUMMARY_FILE).read_text())["evaluation"]["rows"]
    assert saved["random"]["rmst"] is None and saved["prey_evade"]["km_median"] is None
    path = plot_capture_curves(tmp_path, played, saved, horizon=4)
    assert path == tmp_path / report.CAPTURE_CURVES_FILE
    predators, prey = drawn["capture_curves.png"].axes
    assert predators.get_title() == "predators vs the same prey (trained (greedy))"
    assert [line.get_label() for line in predators.lines] == [
        "trained: trained (greedy) vs trained (greedy) (median 3, RMST 3.0)",
        "random: random vs trained (greedy) (median 4, RMST n/a)",
        "chase: greedy BFS chase vs trained (greedy) (median 2, RMST 2.0)",
    ]
    np.testing.assert_array_equal(predators.lines[1].get_ydata(), [0, 0, 0, 0, 0.5])
    np.testing.assert_array_equal(predators.lines[2].get_ydata(), [0, 0.5, 0.5, 1, 1])
    assert [line.get_label() for line in prey.lines] == [
        "trained: trained (greedy) vs trained (greedy) (median 3, RMST 3.0)",
        "prey_evade: trained (greedy) vs greedy BFS evade (median n/a, RMST 4.0)",
    ]
    np.testing.assert_array_equal(prey.lines[1].get_ydata(), [0, 0, 0, 0, 0])
