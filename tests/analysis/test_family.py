"""The declared analysis of a sweep: its reading, its statistics on a sweep directory written by
hand, the headroom refusal, the episode-weighted curves and the lead of one signal on another."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from sweep_testing import ARMS
from sweep_testing import TINY as SWEEP_TINY
from sweep_testing import write_sweep as write_tiny_sweep

from ppage_jax.analysis.family.declare import AnalysisSpec, Comparison
from ppage_jax.analysis.family.endpoints import NoHeadroom, normalised, score_scale
from ppage_jax.analysis.family.paired import family_results, seed_tables
from ppage_jax.analysis.family.report import family_lines
from ppage_jax.analysis.family.signals import lead_lag
from ppage_jax.analysis.sweep.curves import weighted_band, weighted_bins
from ppage_jax.analysis.sweep.run import check_headroom, run_scenarios, run_sweep
from ppage_jax.analysis.sweep.spec import load_sweep
from ppage_jax.config import ConfigError

# The sweep tests' tiny scenario with one learning role against greedy-evade prey, so the random
# and chase baselines exist.
TINY = {**SWEEP_TINY, "experiment.roles": {"predators": "learn", "preys": "evade"}}


def write_sweep(path: Path, **body) -> Path:
    body.setdefault("set", TINY)
    body.setdefault("arms", ARMS)
    return write_tiny_sweep(path, **body)


# ------------------------------------------------------------------ a directory by hand
RMST = {  # arm -> RMST per seed; random 100, chase 20: score = (100 - rmst) / 80
    "a": [30.0, 40.0, 50.0, 60.0],
    "b": [50.0, 60.0, 55.0, 70.0],
    "c": [40.0, 38.0, 70.0, 50.0],
}


@pytest.fixture
def by_hand(tmp_path):
    rows = [(arm, s, "rmst", v) for arm, vs in RMST.items() for s, v in enumerate(vs)]
    with open(tmp_path / "results.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("arm", "seed", "metric", "value"))
        w.writerows(rows)
    with open(tmp_path / "baselines.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("block", "baseline", "policy", "metric", "value"))
        w.writerow(("eval", "random", "random vs evade", "rmst", 100.0))
        w.writerow(("eval", "chase", "chase vs evade", "rmst", 20.0))
    (tmp_path / "sweep.json").write_text(json.dumps({"arms": list(RMST)}))
    return tmp_path


def test_the_family_from_results_and_baselines_alone(by_hand):
    analysis = AnalysisSpec(
        comparisons=(
            Comparison((("a", 1), ("b", -1)), "score"),
            Comparison((("c", 1), ("b", -1)), "score"),
        ),
        declared=True,
    )
    tables = seed_tables(by_hand, analysis.endpoints)
    assert tables["score"]["a"] == {0: 0.875, 1: 0.75, 2: 0.625, 3: 0.5}
    first, second = family_results(analysis, tables)
    # a - b: 0.25, 0.25, 0.0625, 0.125, all positive: 2 of 16 sign assignments as extreme
    assert first.n == 4 and first.p == 0.125
    assert first.difference.point == pytest.approx(0.171875)
    assert first.turns.point == pytest.approx(-13.75)  # (-20 - 20 - 5 - 10) / 4 turns
    assert first.better.point == 1.0 and first.better.low == pytest.approx(0.5101, abs=1e-4)
    # c - b: 0.125, 0.275, -0.1875, 0.25: |sum| >= 0.4625 for 6 of the 16 assignments
    assert second.p == 0.375 and second.better.point == 0.75
    # Holm: 0.125 x 2 = 0.25, then max(0.25, 0.375 x 1) = 0.375
    assert (first.p_holm, second.p_holm) == pytest.approx((0.25, 0.375))
    lines = "\n".join(family_lines(by_hand, analysis))
    assert (
        "| a - b | score | 4 | 0.172 [" in lines
        and "| 0.125 | 0.250 | 1.00 [0.51, 1.00] |" in lines
    )
    assert "Score scale: random 100, chase 20 turns of RMST" in lines
    with open(by_hand / "comparisons.csv", newline="") as fh:
        written = list(csv.DictReader(fh))
    assert [(r["comparison"], float(r["p_holm"])) for r in written] == [
        ("a - b", 0.25),
        ("c - b", 0.375),
    ]


def test_no_headroom_is_refused():
    assert score_scale({"random": {"rmst": 100.0}, "chase": {"rmst": 20.0}}) == (100.0, 20.0)
    assert normalised(60.0, (100.0, 20.0)) == 0.5
    with pytest.raises(NoHeadroom, match="RMSTs are 50 and 50 turns"):
        score_scale({"random": {"rmst": 50.0}, "chase": {"rmst": 50.0}})
    with pytest.raises(NoHeadroom, match="only when exactly one role learns"):
        score_scale({})
    # prey learning: the scripted evade must survive longer than random prey
    assert score_scale({"prey_random": {"rmst": 10.0}, "prey_evade": {"rmst": 90.0}}) == (
        10.0,
        90.0,
    )


def test_a_declared_score_without_headroom_is_refused_before_training(tmp_path):
    spec = load_sweep(
        write_sweep(tmp_path / "s.yaml", analysis={"comparisons": [["both", "base_only"]]})
    )
    baselines = tmp_path / "baselines.csv"
    baselines.write_text(
        "block,baseline,policy,metric,value\n"
        "eval,random,random,rmst,8.0\neval,chase,chase,rmst,9.0\n"
    )
    with pytest.raises(ConfigError) as err:
        check_headroom(spec, baselines)
    assert err.value.key == "sweep.analysis.endpoint"
    assert str(tmp_path / "s.yaml") in str(err.value) and "needs headroom" in str(err.value)
    # an undeclared analysis asks for nothing
    check_headroom(load_sweep(write_sweep(tmp_path / "t.yaml")), baselines)


@pytest.mark.parametrize(
    "analysis, key, message",
    [
        ({"comparisons": [["both", "nope"]]}, "sweep.analysis.comparisons[0]", "unknown arm"),
        ({"endpoint": "shaped_return"}, "sweep.analysis.endpoint", "not a metric"),
        (
            {"comparisons": [{"compare": ["both", "base_only"], "endpoint": "x"}]},
            "sweep.analysis.comparisons[0].endpoint",
            "not a metric",
        ),
        ({"comparisons": [["both", "both"]]}, "sweep.analysis.comparisons[0]", "twice"),
        ({"signals": ["captures"]}, "sweep.analysis.signals", "two or more different"),
        ({"colour": "red"}, "sweep.analysis.colour", "unknown key"),
    ],
)
def test_a_bad_declared_analysis_names_the_file_and_key(tmp_path, analysis, key, message):
    path = write_sweep(tmp_path / "s.yaml", analysis=analysis)
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert err.value.key == key and message in str(err.value)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_scenario_arms_are_named_scenario_slash_arm(tmp_path):
    path = write_sweep(
        tmp_path / "s.yaml",
        scenarios={"five": {}, "six": {"env.size": 6}},
        analysis={"comparisons": [["five/both", "six/nope"]]},
    )
    with pytest.raises(ConfigError, match=r"unknown arm; arms: \['five/base_only'"):
        load_sweep(path)


# ------------------------------------------------------------------ weighted curves
def test_curves_are_weighted_by_the_episodes_that_finished():
    values = {100: 1.0, 200: 0.0, 300: 0.5}
    episodes = {100: 1, 200: 3, 300: 0}
    edges = np.asarray([0, 200, 300])
    # bin (0, 200]: (1 * 1 + 3 * 0) / 4; bin (200, 300]: no episode finished
    np.testing.assert_allclose(weighted_bins(values, episodes, edges), [0.25, np.nan])
    steps, mean, low, high = weighted_band(
        {0: values, 1: {100: 0.0, 200: 1.0, 300: 1.0}},
        {0: episodes, 1: {100: 1, 200: 1, 300: 2}},
        bins=3,
    )
    assert steps.tolist() == [100, 200, 300]
    # per bin, the mean over the seeds that finished an episode there
    np.testing.assert_allclose(mean, [0.5, 0.5, 1.0])
    assert low[2] == high[2] == 1.0  # one seed: no spread


def test_the_episode_length_turns_before_the_captures():
    # against a control run of the same seed: captures fall from update 60 (by 0.02 an update
    # from 0.9), episodes lengthen from update 40 (by 2 turns an update from 40)
    updates = range(1, 121)
    control = {
        "episodes": {0: {u: 40 for u in updates}},
        "capture_rate": {0: {u: 0.9 for u in updates}},
        "episode_length": {0: {u: 40.0 for u in updates}},
    }
    stalled = {
        "episodes": control["episodes"],
        "capture_rate": {0: {u: 0.9 - 0.02 * max(0, u - 60) for u in updates}},
        "episode_length": {0: {u: 40.0 + 2.0 * max(0, u - 40) for u in updates}},
    }
    lag = lead_lag(stalled, control, "episode_length", "capture_rate", window=1, patience=3)
    # 10 % of the control's level: 4 turns (update 42), 0.09 (update 65); held 3 updates
    assert lag.turns[0] == (44.0, 67.0)
    assert (lag.both, lag.first_sooner, lag.second_sooner, lag.lead) == (1, 1, 0, 23.0)
    assert lag.p == 1.0  # one seed: both signs of one difference are as extreme
    same = lead_lag(control, control, "episode_length", "capture_rate")
    assert math.isnan(same.turns[0][0]) and same.both == 0 and math.isnan(same.p)


# ------------------------------------------------------------------ through run_sweep
def test_a_sweep_with_checkpoints_tests_its_declared_family(tmp_path):
    spec = load_sweep(
        write_sweep(
            tmp_path / "s.yaml",
            seeds=2,
            eval={"episodes": 6},
            checkpoints={"count": 2, "episodes": 4, "seed": 5000},
            analysis={
                "comparisons": [
                    ["both", "base_only"],
                    {"compare": ["both", "base_only"], "endpoint": "auc"},
                ],
                "prediction": "nothing: the random algorithm learns nothing",
            },
            output_dir=str(tmp_path / "out"),
            set={**TINY, "experiment.algorithm": {"name": "random", "params": {"num_steps": 4}}},
        )
    )
    summary = run_sweep(spec, progress=False)
    out = Path(summary["output_dir"])
    with open(out / "curves.csv", newline="") as fh:
        checkpoint_rows = [r for r in csv.DictReader(fh) if r["metric"].startswith("checkpoint/")]
    # 2 runs x 2 arms x 2 checkpoints (after updates 2 and 4) x 4 metrics
    assert len(checkpoint_rows) == 2 * 2 * 2 * 4
    assert sorted({int(r["update"]) for r in checkpoint_rows}) == [2, 4]
    with open(out / "baselines.csv", newline="") as fh:
        blocks = {(r["block"], r["baseline"]) for r in csv.DictReader(fh)}
    assert blocks == {(b, n) for b in ("eval", "checkpoints") for n in ("random", "chase")}
    report = (out / "report.md").read_text()
    assert "Prediction: nothing: the random algorithm learns nothing" in report
    assert "| both - base_only | auc | 2 |" in report
    with open(out / "comparisons.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 2


@pytest.mark.slow  # two scenarios: two compiled sweeps
def test_a_sweep_with_scenarios_runs_each_and_resumes(tmp_path):
    path = write_sweep(
        tmp_path / "s.yaml",
        seeds=2,
        eval={"episodes": 4},
        scenarios={"five": {}, "six": {"env.size": 6}},
        analysis={
            "comparisons": [[["six/both", "six/base_only"], ["five/both", "five/base_only"]]]
        },
        output_dir=str(tmp_path / "out"),
    )
    spec = load_sweep(path)
    first = run_scenarios(spec, progress=False, source={"sweep": str(path)})
    out = Path(first["output_dir"])
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["five", "six"]
    report = (out / "report.md").read_text()
    assert "(six/both - six/base_only) - (five/both - five/base_only)" in report
    before = (out / "six" / "results.csv").read_text()
    again = run_scenarios(spec, progress=False, resume=True)
    assert (out / "six" / "results.csv").read_text() == before
    assert all(s["chunks_run"] == 0 for s in again["scenarios"].values())
    with pytest.raises(Exception, match="already holds a sweep"):
        run_scenarios(spec, progress=False)
