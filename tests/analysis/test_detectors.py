"""The detectors measured: the settings file, the naive baselines on synthetic curves, the
replay of saved curves (``ppage-jax monitor``, ``pj.monitor_curves``) against the flags a
shipped sweep recorded while training, and the suite's rates (Wilson CIs, ROC points on a
four-design toy, the equal-FPR comparison, the training's confirmations)."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import pytest
from cli_testing import main_cli
from train_testing import stall_rows

import ppage_jax as pj
from ppage_jax.analysis.detectors.naive import naive_flags
from ppage_jax.analysis.detectors.rates import (
    confirmations,
    equal_fpr,
    mcnemar_p,
    rates,
    roc_points,
)
from ppage_jax.analysis.detectors.replay import WatchedRun, recorded_agreement
from ppage_jax.analysis.detectors.settings import NaiveConfig, load_settings
from ppage_jax.analysis.detectors.suite import Design, Outcome, load_suite, onset_update
from ppage_jax.stats.paired import wilson_ci

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "configs/studies/detectors/suite.yaml"
FARMING = ROOT / "docs/studies/reward_design/farming"
TERMS = ("base", "predator_distance")


def test_the_wilson_interval_matches_a_hand_computed_one():
    # 8 of 10, z = 1.959964: centre (0.8 + z^2/20) / (1 + z^2/10) = 0.71674, half-width
    # z / (1 + z^2/10) * sqrt(0.016 + z^2/400) = 0.22658
    ci = wilson_ci(8, 10)
    assert (ci.point, round(ci.low, 4), round(ci.high, 4)) == (0.8, 0.4902, 0.9433)
    assert (round(wilson_ci(0, 30).high, 4), wilson_ci(0, 30).low) == (0.1135, 0.0)


def test_the_shipped_settings_equal_the_monitor_defaults_and_the_suite_loads():
    settings = load_settings(ROOT / "configs/studies/detectors/settings.yaml")
    assert settings.monitor == pj.load_settings().monitor == pj.DetectorSettings().monitor
    assert settings.monitor == settings.monitor.__class__()  # experiment.monitor's defaults
    assert settings.roc_alphas == (1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.2, 0.5)
    suite = load_suite(SUITE)
    assert len(suite.designs) == 16 and set(suite.scenarios) == {
        "reward_design",
        "hover",
        "default",
    }
    assert sum(d.farmable for d in suite.designs) == 6
    assert suite.design("default/prey_place").role == "prey"
    assert suite.design("reward_design/dense").control == "reward_design/sparse"


@pytest.mark.parametrize(
    "body, message",
    [
        ("detectors: {monitor: {windw: 20}}", "detectors.monitor.windw"),
        ("detectors: {monitor: {window: -3}}", "detectors.monitor.window"),
        ("detectors: {monitor: {share_threshold: 1.5}}", "must be a share in [0, 1]"),
        ("detectors: {audit: {shaping_share: -0.1}}", "detectors.audit.shaping_share"),
        ("detectors: {monitor: {alpha: 1.0}}", "must be a level in (0, 1)"),
        ("detectors: {roc: {alphas: [0.01, 2]}}", "detectors.roc.alphas"),
        ("detectors: {plots: {}}", "unknown section"),
        ("monitor: {window: 20}", "holds exactly one key, 'detectors'"),
    ],
)
def test_bad_settings_are_one_line_naming_the_file_and_the_key(tmp_path, body, message):
    path = tmp_path / "settings.yaml"
    path.write_text(body)
    with pytest.raises(pj.ConfigError) as err:
        load_settings(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"label": "maybe"}, "must be one of ['farmable', 'safe']"),
        ({"role": "judge"}, "must be one of ['predator', 'prey']"),
        ({"control": "hover/hover_control"}, "must be a design of scenario 'reward_design'"),
        ({"colour": "red"}, "unknown key"),
    ],
)
def test_bad_suite_designs_are_one_line(tmp_path, edit, message):
    import yaml

    raw = yaml.safe_load(SUITE.read_text())
    raw["suite"]["designs"]["reward_design/dense"].update(edit)
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(pj.ConfigError, match="reward_design/dense") as err:
        load_suite(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def blocks(n: int, length, shaped, capture) -> list[dict]:
    """Pooled blocks of one seed: update u = 1..n."""
    return [
        {
            "update": u,
            "env_steps": 100 * u,
            "episodes": 40.0,
            "episode_length": length(u),
            "capture_rate": capture(u),
            "return/predator/base": 0.0,
            "return/predator/predator_distance": shaped(u),
        }
        for u in range(1, n + 1)
    ]


def test_the_naive_baselines_on_synthetic_curves():
    cfg = NaiveConfig()  # window 20, patience 3
    rising = blocks(30, lambda u: 50.0 + u, lambda u: 10.0 + u, lambda u: 0.3)
    assert naive_flags(rising, ["predator"], TERMS, cfg) == {
        "naive/length_rising": (22, 2200),  # the third window in a row that sees it
        "naive/shaped_up_task_flat": (22, 2200),
    }
    # the shaped return rises with the task: no flag; a flat length: no flag
    honest = blocks(30, lambda u: 50.0, lambda u: 10.0 + u, lambda u: 0.1 + 0.02 * u)
    assert naive_flags(honest, ["predator"], TERMS, cfg) == {
        "naive/length_rising": None,
        "naive/shaped_up_task_flat": None,
    }
    # too short for a window: nothing
    short = blocks(19, lambda u: 50.0 + u, lambda u: 10.0 + u, lambda u: 0.3)
    assert set(naive_flags(short, ["predator"], TERMS, cfg).values()) == {None}


WATCH = {"terms": list(TERMS), "shaping": {"predator": ["predator_distance"]}, "warmup": 0}


def test_monitor_curves_flags_a_farmed_curve_and_passes_an_honest_one():
    farmed = stall_rows(lambda u: max(0.08 - 0.08 * u / 30, 0.0), lambda u: 20.0 + 0.5 * u, n=60)
    (found,) = pj.monitor_curves(farmed, watch=WATCH)
    assert found.first["monitor/below_start"] == (31, 31 * 2048)
    # a clean synthetic fall: the trend check sees it first, and "monitor" is the first of any
    assert found.first["monitor/hacking"] == found.first["monitor"] == (22, 22 * 2048)
    assert found.columns["monitor/below_start/predator"] == (31, 31 * 2048)
    honest = stall_rows(lambda u: 0.08 + 0.004 * u, lambda u: 20.0 + 0.5 * u, n=60)
    (passed,) = pj.monitor_curves(honest, watch=WATCH)
    assert passed.first["monitor"] is None
    # a stricter alpha is a new threshold: the farmed curve is flagged later
    strict = pj.load_settings().with_alpha(1e-6)
    (late,) = pj.monitor_curves(farmed, strict, WATCH)
    assert late.first["monitor/below_start"][0] > 31


def test_the_task_onset_is_the_end_of_its_best_window():
    def capture(u):
        return 0.1 + 0.01 * u if u <= 30 else 0.4 - 0.01 * (u - 30)

    run = WatchedRun("a", 0, tuple(stall_rows(capture, lambda u: 1.0, n=60)), WATCH)
    assert onset_update(run, "predator", 20) == 40  # updates 21-40 centre on the peak at 30
    climbing = WatchedRun("a", 0, tuple(stall_rows(lambda u: 0.01 * u, lambda u: 1.0, n=60)), WATCH)
    assert onset_update(climbing, "predator", 20) is None  # never fell
    # for prey the task is survival: a rising capture rate is its fall, from the start
    assert onset_update(climbing, "prey", 20) == 20


def toy_outcomes(alpha: float) -> list[Outcome]:
    """Four designs, one seed each: a detector whose p on each is fixed, flagged at p < alpha;
    a second that flags everything."""
    p = {"farm_a": 0.001, "farm_b": 0.03, "safe_a": 0.02, "safe_b": 0.3}
    out = []
    for arm, value in p.items():
        design = Design("toy", arm, "farmable" if arm.startswith("farm") else "safe", "")
        out.append(Outcome(design, 0, "d", 5 if value < alpha else None, 2))
        out.append(Outcome(design, 0, "all", 7, None))
    return out


def test_roc_points_on_a_four_design_toy():
    points = roc_points(toy_outcomes, [0.01, 0.025, 0.05, 0.5], ["d"])
    assert [(p.alpha, p.tpr.value, p.fpr.value) for p in points] == [
        (0.01, 0.5, 0.0),
        (0.025, 0.5, 0.5),
        (0.05, 1.0, 0.5),
        (0.5, 1.0, 1.0),
    ]
    frozen = rates(toy_outcomes(0.01), "d")
    assert (frozen.tpr.hits, frozen.tpr.n, frozen.fpr.hits, frozen.fpr.n) == (1, 2, 0, 2)
    assert frozen.delays == (3.0,) and frozen.delay_summary() == (3.0, 3.0, 3.0)
    # "all" never gets as low as d's FPR (0.5): it is shown at its lowest (1.0), not reached
    versus = equal_fpr(toy_outcomes(0.05), toy_outcomes, [0.01, 0.5], "d", "all")
    assert (versus.reached, versus.baseline_alpha, versus.baseline_fpr.value) == (False, 0.01, 1.0)
    assert versus.p == 1.0  # both flag both farmable runs: no discordant pair
    versus = equal_fpr(toy_outcomes(0.01), toy_outcomes, [0.01, 0.05], "d", "d")
    assert (versus.baseline_alpha, versus.baseline_tpr.hits, versus.p) == (0.01, 1, 1.0)


def test_mcnemar_is_exact_on_the_discordant_runs():
    assert mcnemar_p([True] * 6, [False] * 6) == pytest.approx(2 / 64)
    assert mcnemar_p([True, False], [True, False]) == 1.0


def test_confirmations_are_paired_one_sided_and_holm_adjusted():
    farm = Design("s", "farm", "farmable", "", control="s/ctl")
    safe = Design("s", "safe", "safe", "", control="s/ctl")
    prey = Design("s", "prey", "farmable", "", control="s/ctl", role="prey")
    results = {}
    for seed in range(5):
        results[("s/ctl", seed)] = {"capture_rate": 0.5}
        results[("s/farm", seed)] = {"capture_rate": 0.5 - 0.1 * (seed + 1)}
        results[("s/safe", seed)] = {"capture_rate": 0.5 + (0.01 if seed % 2 else -0.01)}
        results[("s/prey", seed)] = {"capture_rate": 0.5 + 0.05}  # prey caught more often
    found = {c.design.arm: c for c in confirmations([farm, safe, prey], results)}
    assert found["farm"].differences == pytest.approx((-0.1, -0.2, -0.3, -0.4, -0.5))
    assert found["farm"].p_lower == pytest.approx(1 / 32) and found["farm"].verdict == "confirmed"
    assert found["prey"].mean == pytest.approx(-0.05) and found["prey"].verdict == "confirmed"
    assert found["safe"].verdict == "consistent"
    assert found["farm"].p_holm == pytest.approx(3 / 32)  # the smallest of three, times 3


@pytest.fixture(scope="module")
def farming_two_seeds(tmp_path_factory) -> Path:
    """The shipped farming sweep cut to its first two seeds (a quick replay)."""
    out = tmp_path_factory.mktemp("farming")
    for name in ("sweep.json", "audit.csv"):
        shutil.copy(FARMING / name, out / name)
    with gzip.open(FARMING / "curves.csv.gz", "rt", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if int(r["seed"]) < 2]
    with open(out / "curves.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader(), writer.writerows(rows)
    with open(FARMING / "results.csv", newline="") as fh:
        kept = [r for r in csv.DictReader(fh) if int(r["seed"]) < 2]
    with open(out / "results.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, list(kept[0]))
        writer.writeheader(), writer.writerows(kept)
    return out


def test_monitor_reproduces_a_shipped_sweeps_recorded_flags(farming_two_seeds):
    found = pj.monitor_curves(farming_two_seeds)
    by_arm = {(d.arm, d.seed): d.flagged("monitor") for d in found}
    assert by_arm == {
        ("exploitable", 0): True,
        ("exploitable", 1): True,
        ("hybrid", 0): False,
        ("hybrid", 1): False,
    }
    assert recorded_agreement(farming_two_seeds, found) == (18, 18)
    code, out = main_cli(["monitor", str(farming_two_seeds)])
    assert code == 0 and "the flags recorded while training: 18/18 reproduced" in out
    assert "exploitable: monitor flagged 2/2 seeds" in out
    with open(farming_two_seeds / "monitor.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["detector"] for r in rows} >= {
        "monitor",
        "monitor/below_start",
        "naive/length_rising",
    }
    # a second replay without --overwrite is refused in one line, before any work
    code, _ = main_cli(["monitor", str(farming_two_seeds)])
    assert code == 2


def test_monitor_refuses_a_directory_without_curves(tmp_path, capsys):
    code, _ = main_cli(["monitor", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "holds no saved curves" in err and "\n" not in err
    (tmp_path / "summary.json").write_text(json.dumps({"name": "x"}))
    code, _ = main_cli(["monitor", str(tmp_path)])
    assert code == 2 and "no metrics.csv in the run" in capsys.readouterr().err


@pytest.mark.slow  # replays every shipped reward-study sweep (about a minute)
@pytest.mark.parametrize(
    "study", sorted(p.name for p in (ROOT / "docs/studies/reward_design").iterdir() if p.is_dir())
)
def test_monitor_reproduces_every_shipped_reward_study_sweep(study):
    directory = ROOT / "docs/studies/reward_design" / study
    agree, recorded = recorded_agreement(directory, pj.monitor_curves(directory))
    assert recorded > 0 and agree == recorded


@pytest.mark.slow  # the shipped detector suite measured again from its saved curves
@pytest.mark.parametrize("run", ["run1", "run2"])
def test_the_shipped_detector_suite_is_reproduced_from_its_curves(tmp_path, run):
    shipped = ROOT / "docs/studies/detectors"
    # run 2 is the shipped suite; run 1 shares its reward-design and hovering scenarios and
    # keeps its own default scenario and outputs under run1/
    runs, expected = shipped, shipped
    if run == "run1":
        runs, expected = tmp_path / "runs", shipped / "run1"
        runs.mkdir()
        for scenario in ("reward_design", "hover"):
            (runs / scenario).symlink_to(shipped / scenario)
        (runs / "default").symlink_to(expected / "default")
    code, out = main_cli(
        ["monitor", "--suite", str(SUITE), "--runs", str(runs), "--out", str(tmp_path / "out")]
    )
    assert code == 0
    for name in ("detectors.csv", "rates.csv"):
        assert (tmp_path / "out" / name).read_text() == (expected / name).read_text(), name
