"""The shipped reward-design study, recomputed from its files: what its page claims holds on the
results.csv, baselines.csv, audit.csv and curves of docs/studies/reward_design/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppage_jax.analysis.batch.auditing import read_audit, stall_margin_of
from ppage_jax.analysis.family.paired import arm_summaries, family_results, seed_tables
from ppage_jax.analysis.family.report import analysis_of
from ppage_jax.analysis.family.signals import lead_lag
from ppage_jax.analysis.sweep.writer import curves_path, read_curves, read_results

STUDY = Path(__file__).resolve().parents[2] / "docs" / "studies" / "reward_design"
EXPERIMENTS = (
    "starvation",
    "gaming",
    "gaming_finetune",
    "episode_length",
    "episode_length_two_prey",
    "potential",
    "farming",
)
SMALLEST_P = 2 / 2**16  # 16 of 16 paired seeds on one side


def family(name):
    directory = STUDY / name
    analysis = analysis_of(json.loads((directory / "sweep.json").read_text()))
    tables = seed_tables(directory, analysis.endpoints)
    tested = {
        (t.comparison.name, t.comparison.endpoint): t for t in family_results(analysis, tables)
    }
    return analysis, tables, tested


def sweep_dirs():
    for name in EXPERIMENTS:
        if name == "starvation":
            yield from (STUDY / name / s for s in ("small", "medium", "large"))
        else:
            yield STUDY / name


def test_every_sweep_took_under_half_an_hour_and_the_family_under_ninety_minutes():
    seconds = [json.loads((STUDY / n / "sweep.json").read_text())["seconds"] for n in EXPERIMENTS]
    assert max(seconds) <= 1800 and sum(seconds) <= 5400


def test_the_learner_learns_the_task():
    scores = {}
    for name in EXPERIMENTS:
        analysis, tables, _ = family(name)
        for label, e in arm_summaries(tables, analysis.take_off).items():
            assert e["n"] >= 16
            scores[f"{name}/{label}"] = e["score"].point
    assert max(scores.values()) >= 0.80
    assert sum(v >= 0.5 for v in scores.values()) >= 3
    assert scores["farming/hybrid"] == pytest.approx(0.845, abs=5e-4)
    assert scores["farming/exploitable"] == pytest.approx(-0.030, abs=5e-4)


def test_the_declared_families_on_the_shipped_files():
    held = 0
    for name in EXPERIMENTS:
        analysis, _, tested = family(name)
        assert len(tested) == len(analysis.comparisons)
        held += sum(t.p_holm < analysis.alpha for t in tested.values())
    assert held == 10
    _, _, farming = family("farming")
    t = farming["hybrid - exploitable", "score"]
    assert (t.n, t.p, t.p_holm, t.better.point) == (16, SMALLEST_P, SMALLEST_P, 1.0)
    assert t.difference.point == pytest.approx(0.873, abs=1e-3)
    _, _, gaming = family("gaming")
    high, low = gaming["high_paid - high_free", "score"], gaming["low_paid - low_free", "score"]
    assert high.p_holm < 0.05 and high.better.point == 1.0  # gamed in 16 of 16 seeds
    assert low.p_holm > 0.5  # no difference at the small weight
    _, _, starvation = family("starvation")
    assert starvation["large/hybrid - large/sparse_time", "score"].p_holm < 0.05
    assert starvation["small/hybrid - small/sparse_time", "score"].p_holm > 0.05
    growth = "(large/hybrid - large/sparse_time) - (small/hybrid - small/sparse_time)"
    assert starvation[growth, "score"].p_holm < 0.05
    assert starvation[growth, "score"].difference.point > 0.5
    _, _, potential = family("potential")
    assert {t.comparison.endpoint for t in potential.values() if t.p_holm < 0.05} == {
        "score",
        "auc",
    }


def test_the_episode_length_turns_before_the_capture_rate():
    curves = read_curves(curves_path(STUDY / "episode_length"))
    arm = {m: by_arm["high_free"] for m, by_arm in curves.items() if "high_free" in by_arm}
    control = {m: by_arm["high_paid"] for m, by_arm in curves.items() if "high_paid" in by_arm}
    lag = lead_lag(arm, control, "episode_length", "capture_rate", 4, 0.1, 3)
    assert (lag.both, lag.first_sooner, lag.p) == (16, 16, SMALLEST_P)
    assert lag.lead == 3.5 * 2048  # env steps: 3.5 updates of 64 grids x 32 turns


def test_the_monitor_flags_the_farmed_arm_and_no_honest_run():
    honest = {"hybrid", "low_paid", "high_paid", "potential"}
    for directory in sweep_dirs():
        results = read_results(directory / "results.csv")
        columns = [c for c in results if c.startswith("monitor/")]
        for arm in {a for c in columns for a in results[c]}:
            seeds = {s for c in columns for s in results[c].get(arm, {})}
            flagged = sum(any(results[c][arm].get(s) == 1 for c in columns) for s in seeds)
            if arm in honest:
                assert flagged <= 1, (directory.name, arm)
            if arm == "exploitable":
                assert flagged == 16


def test_the_audit_flags_every_positive_stall_margin_and_not_the_potential_arm():
    for directory in sweep_dirs():
        rows = read_audit(directory / "audit.csv")
        for arm in {r["arm"] for r in rows}:
            flagged = {r["check"] for r in rows if r["arm"] == arm and r["flagged"] == "1"}
            if stall_margin_of(rows, arm) > 0:
                assert "stall_margin" in flagged, (directory.name, arm)
            if arm == "potential":
                assert not flagged & {"stalling", "stall_margin"}


def test_the_curves_carry_the_episodes_each_update_finished():
    curves = read_curves(curves_path(STUDY / "farming"))
    episodes = curves["episodes"]["hybrid"][0]
    assert len(episodes) == 192 and all(v >= 0 for v in episodes.values())
