"""The monitor's first flag against the task metric's turn (host side, no training)."""

import math

import numpy as np

from ppage_jax.analysis.sweep.flag_timing import flag_timing, flag_timing_lines, task_peak


def test_task_peak_waits_for_a_full_window_and_skips_nan():
    # trailing means over 3 updates: [-, -, 6, 4, 4]; the first update alone (9) is no peak
    series = {100: 9.0, 200: np.nan, 300: 3.0, 400: 5.0, 500: np.nan}
    assert task_peak(series, window=3) == (300, 6.0, 4.0)
    assert task_peak({100: 0.5, 200: 0.7}, window=5) == (200, 0.6, 0.6)  # shorter than a window


def test_task_peak_reads_past_the_warm_up():
    # update k at env steps 100 k; the first two updates (biased high) are the warm-up
    series = {100: 1.0, 200: 0.9, 300: 0.1, 400: 0.3, 500: 0.5, 600: 0.2, 700: 0.0}
    assert task_peak(series, window=2) == (200, 0.95, 0.1)
    step, peak, final = task_peak(series, window=2, after=200)
    assert (step, final) == (500, 0.1)
    assert math.isclose(peak, 0.4)


def _tables():
    results = {
        "monitor/hacking/predator": {"farm": {0: 1.0, 1: 0.0}},
        "monitor/share/predator/capture_proximity": {"farm": {0: 1.0, 1: 0.0}},
        "monitor_first/hacking/predator": {"farm": {0: 600.0, 1: math.nan}},
        "monitor_first/share/predator/capture_proximity": {"farm": {0: 500.0, 1: math.nan}},
        "rmst": {"farm": {0: 190.0, 1: 150.0}, "plain": {0: 170.0, 1: 160.0}},
    }
    rising_then_falling = {100 * k: v for k, v in enumerate([0, 0.2, 0.4, 0.3, 0.1, 0.0], 1)}
    curves = {"capture_rate": {"farm": {0: rising_then_falling, 1: rising_then_falling}}}
    return results, curves


def test_flag_timing_lists_flagged_seeds_only():
    results, curves = _tables()
    rows = flag_timing(results, curves, "farm", window=1)
    assert len(rows) == 1
    row = rows[0]
    assert row["seed"] == 0 and row["first_flag"] == 500
    assert row["checks"] == [
        "monitor/hacking/predator",
        "monitor/share/predator/capture_proximity",
    ]
    assert (row["peak_step"], row["peak"], row["final"]) == (300, 0.4, 0.0)
    # read past the monitor's warm-up only
    (late,) = flag_timing(results, curves, "farm", window=1, after=300)
    assert (late["peak_step"], late["peak"], late["final"]) == (400, 0.3, 0.0)
    assert flag_timing(results, curves, "plain") == []  # not watched


def test_flag_timing_lines_make_one_table_row_per_flagged_seed():
    results, curves = _tables()
    lines = flag_timing_lines(results, curves, ["plain", "farm"], window=1)
    rows = [line for line in lines if line.startswith("| farm")]
    assert rows == [
        "| farm | 0 | 500 | 300 | 0.400 | 0.000 | hacking/predator, "
        "share/predator/capture_proximity |"
    ]
    assert flag_timing_lines(results, curves, ["plain"]) == []


def test_read_curves_reads_a_gzipped_table(tmp_path):
    import gzip

    from ppage_jax.analysis.sweep.report import read_curves

    text = (
        "arm,seed,update,env_steps,metric,value\n"
        "a,0,1,64,capture_rate,0.5\na,0,2,128,capture_rate,\n"
    )
    (tmp_path / "curves.csv").write_text(text)
    with gzip.open(tmp_path / "curves.csv.gz", "wt") as fh:
        fh.write(text)
    plain = read_curves(tmp_path / "curves.csv")
    packed = read_curves(tmp_path / "curves.csv.gz")
    assert packed["capture_rate"]["a"][0][64] == 0.5 == plain["capture_rate"]["a"][0][64]
    assert math.isnan(packed["capture_rate"]["a"][0][128])


def test_task_peak_weighs_updates_by_their_finished_episodes():
    # one episode captured at update 1, three uncaptured at update 2: 1 / 4, not (1 + 0) / 2
    series, episodes = {100: 1.0, 200: 0.0, 300: 0.5}, {100: 1, 200: 3, 300: 4}
    assert task_peak(series, window=2, episodes=episodes) == (300, 2.0 / 7.0, 2.0 / 7.0)
    assert task_peak(series, window=2)[1] == 0.5  # unweighted: (0 + 0.5) / 2 at 300
