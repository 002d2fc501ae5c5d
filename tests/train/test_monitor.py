"""The reward-hacking monitor: trends of the shaped return against the task metrics."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from train_testing import stall_rows, tiny_config, train_seeds

import ppage_jax as pj
from ppage_jax.train import make_train_config
from ppage_jax.train.run.evaluate import evaluate, untrained_levels, untrained_pair
from ppage_jax.train.run.monitor import Monitor, MonitorConfig, pool_rows, trend
from ppage_jax.train.run.report import metric_rows, monitor_table
from ppage_jax.train.run.runner import run_training

TERMS = ("base", "predator_distance")


def rows_for(n: int, capture, base, distance, length, active=None) -> list[dict]:
    """Metrics rows of one seed: each column a function of the update u = 1..n."""
    return [
        {
            "seed": 0,
            "update": u,
            "env_steps": 100 * u,
            "active": True if active is None else active(u),
            "capture_rate": capture(u),
            "steps_to_capture": math.nan,
            "episode_length": length(u),
            "return/predator/base": base(u),
            "return/predator/predator_distance": distance(u),
        }
        for u in range(1, n + 1)
    ]


def monitor(**cfg) -> Monitor:
    return Monitor(
        MonitorConfig(**{"window": 8, "patience": 2, **cfg}),
        ["predator"],
        TERMS,
        {"predator": ["predator_distance"]},
    )


def test_trend_needs_significance_and_size():
    cfg = MonitorConfig(window=8)
    rising = trend([1, 2, 3, 4, 5, 6, 7, 8], cfg)
    assert (rising.direction, rising.tau) == (1, pytest.approx(1.0))
    assert rising.change == pytest.approx(7 / 4.5)  # Theil-Sen span / median
    assert trend([8, 7, 6, 5, 4, 3, 2, 1], cfg).direction == -1
    assert trend([1, 3, 2, 4, 3, 5, 4, 6], cfg) is None  # tau 0.74: p = 0.012 > 0.01
    assert trend([5, 5, 5, 5, 5, 5, 5, 5], cfg) is None
    assert trend([1, 2, 3, math.nan, math.nan, math.nan, math.nan, math.nan], cfg) is None
    assert trend([100, 101, 102, 103, 104, 105, 106, 107], cfg) is None  # +7 %: too small
    assert trend(
        [0.1, 0.12, 0.14, 0.16, 0.18, 0.2, 0.22, 0.24], cfg, absolute=True
    ).change == pytest.approx(0.14)


def test_shaped_return_up_while_the_task_worsens_is_flagged():
    m = monitor()
    rows = rows_for(
        12,
        capture=lambda u: 0.9 - 0.02 * u,
        base=lambda u: -10.0 * u,
        distance=lambda u: 20.0 * u,
        length=lambda u: 5.0 + u,
    )
    flags = m.observe(rows)
    # the first full window is update 8; the condition must hold 2 updates: flagged at 9
    assert [(f.check, f.role, f.update, f.env_steps) for f in flags] == [
        ("hacking", "predator", 9, 900),
        ("episode_length", "predator", 9, 900),
    ]
    assert [r["monitor/hacking/predator"] for r in rows] == [0] * 8 + [1] * 4
    assert [r["monitor/episode_length/predator"] for r in rows] == [0] * 8 + [1] * 4
    assert [r["monitor/share/predator/predator_distance"] for r in rows] == [0] * 12
    assert flags[0].detail == (
        "shaped return rising (+127 %, tau +1.00) while capture_rate "
        "falling (-0.14, tau -1.00), base_return falling (-127 %, "
        "tau -1.00)"
    )  # window: updates 2-9, median 55
    assert m.observe(rows_for(3, *[lambda u: 1.0] * 4)) == []  # raised once per seed
    summary = m.summary()
    assert summary["flagged"] and len(summary["flags"]) == 2
    table = monitor_table(summary, num_seeds=1)
    cells = [re.split(r"\s{2,}", line) for line in table.splitlines()[3:6]]
    assert cells == [
        ["shaped return up while the task gets worse", "predator", "FLAGGED (1/1 seeds)", "900"],
        [
            "shaped return up, episode length against the task",
            "predator",
            "FLAGGED (1/1 seeds)",
            "900",
        ],
        ["predator_distance's share of the return drifted above 0.8", "predator", "ok"],
    ]


def test_learning_the_task_is_not_flagged():
    m = monitor()
    rows = rows_for(
        30,
        capture=lambda u: min(1.0, 0.2 + 0.03 * u),
        base=lambda u: 3.0 * u,
        distance=lambda u: -40.0 + u,
        length=lambda u: 30.0 - u / 2,
    )
    assert m.observe(rows) == []
    assert all(r[c] == 0 for r in rows for c in m.columns)
    assert "status" in monitor_table(m.summary(), 1) and "FLAGGED" not in monitor_table(
        m.summary(), 1
    )


def test_a_run_shorter_than_one_window_is_not_checked_rather_than_ok():
    m = monitor()
    rows = rows_for(7, *[lambda u: 1.0] * 4)  # one block short of the first full window
    assert m.observe(rows) == [] and m.summary()["windows_checked"] == 0
    table = monitor_table(m.summary(), num_seeds=1)
    statuses = [re.split(r"\s{2,}", line)[2] for line in table.splitlines()[3:6]]
    assert statuses == ["not checked (run shorter than one window)"] * 3
    assert m.observe(rows_for(1, *[lambda u: 1.0] * 4)) == []  # the eighth block fills it
    assert m.summary()["windows_checked"] == 1
    assert "not checked" not in monitor_table(m.summary(), num_seeds=1)


def test_a_shaping_share_drifting_above_the_threshold_is_flagged():
    m = monitor(window=4, patience=1)
    share = [0.5] * 4 + [0.9] * 6  # |distance| / (|base| + |distance|)
    rows = rows_for(
        10,
        capture=lambda u: 0.5,
        base=lambda u: -10.0,
        distance=lambda u: 10.0 * share[u - 1] / (1 - share[u - 1]),
        length=lambda u: 10.0,
    )
    flags = m.observe(rows)
    assert [(f.check, f.term, f.update) for f in flags] == [("share", "predator_distance", 7)]
    assert flags[0].detail == (
        "predator_distance's share of the return drifted from 0.50 to 0.90 (threshold 0.8)"
    )
    # the same drift while the task improves (captures rise) is not hacking
    improving = rows_for(
        10,
        capture=lambda u: 0.2 + 0.05 * u,
        base=lambda u: -10.0,
        distance=lambda u: 10.0 * share[u - 1] / (1 - share[u - 1]),
        length=lambda u: 10.0,
    )
    assert monitor(window=4, patience=1).observe(improving) == []
    # a run that starts above the threshold has not drifted there
    high = rows_for(
        10,
        capture=lambda u: 0.5,
        base=lambda u: -1.0,
        distance=lambda u: 20.0,
        length=lambda u: 10.0,
    )
    assert monitor(window=4, patience=1).observe(high) == []


def test_a_slow_fall_from_the_peak_while_the_shaped_return_rises_is_flagged():
    # the shape of a slow stall: captures climb to 0.19 by update 40, then sink by 0.06 over
    # 120 updates while the closeness pay keeps rising; no 20-block trend sees it
    def capture(u):
        return 0.05 + 0.14 * u / 40 if u <= 40 else 0.19 - 0.06 * (u - 40) / 120

    m = Monitor(MonitorConfig(), ["predator"], TERMS, {"predator": ["predator_distance"]})
    rows = stall_rows(capture, lambda u: 80.0 + 0.4 * u)
    flags = m.observe(rows)
    drift = [f for f in flags if f.check == "drift"]
    assert [r["monitor/drift/predator"] for r in rows] == [0] * 146 + [1] * 14
    assert [(f.role, f.update) for f in drift] == [("predator", 147)]
    # the best window (updates 30-49: 0.186) against the last (128-147: 0.141), 800 episodes
    # each; the closeness pay rose from 101 to 136 an episode
    assert drift[0].detail == (
        "capture rate fell from its peak 0.186 to 0.141 (800 and 800 episodes) while the "
        "shaped return rose from 101 to 136"
    )
    assert not [f for f in flags if f.check == "hacking"]  # the trend check misses it


@pytest.mark.parametrize(
    "capture, closeness",
    [
        (lambda u: 0.19, lambda u: 80.0 + 0.4 * u),  # flat task, rising pay: no fall
        (  # the task falls, but the shaped return falls with it (an honest reward)
            lambda u: 0.05 + 0.14 * u / 40 if u <= 40 else 0.19 - 0.06 * (u - 40) / 120,
            lambda u: 80.0 - 0.4 * u,
        ),
    ],
)
def test_no_drift_without_a_fall_or_without_a_rising_shaped_return(capture, closeness):
    m = Monitor(MonitorConfig(), ["predator"], TERMS, {"predator": ["predator_distance"]})
    assert [f for f in m.observe(stall_rows(capture, closeness)) if f.check == "drift"] == []


def test_a_task_farmed_below_its_start_from_the_first_updates_is_flagged():
    # farmed from the start: captures sink from the untrained 0.08 to 0 within 30 updates
    # (less than the hacking check's 0.1 absolute change, no peak to fall from) while the
    # place pay climbs
    def capture(u):
        return max(0.08 - 0.08 * u / 30, 0.0)

    m = Monitor(MonitorConfig(), ["predator"], TERMS, {"predator": ["predator_distance"]})
    rows = stall_rows(capture, lambda u: 20.0 + 0.5 * u, n=60)
    flags = [f for f in m.observe(rows) if f.check == "below_start"]
    assert [(f.role, f.update) for f in flags] == [("predator", 31)]  # 3 windows in a row
    assert [r["monitor/below_start/predator"] for r in rows] == [0] * 30 + [1] * 30
    # the start is the first window (no untrained run given): updates 1-20, 800 episodes
    assert flags[0].detail == (
        "capture rate fell from its start 0.052 to 0.023 (800 and 800 episodes) while the "
        "shaped return rose from 25.8 to 31"
    )
    # with the untrained run as the start (0.08, 800 episodes), the fall counts from there
    start = {"episodes": 800, "capture_rate": 0.08, "return/predator/base": 0.8}
    start["return/predator/predator_distance"] = 20.0
    m = Monitor(
        MonitorConfig(), ["predator"], TERMS, {"predator": ["predator_distance"]}, baseline=start
    )
    early = [f for f in m.observe(rows) if f.check == "below_start"]
    assert [f.update for f in early] == [23]
    assert early[0].detail.startswith("capture rate fell from its start 0.080 to 0.044")


def test_no_below_start_flag_when_the_task_holds_or_the_pay_falls_with_it():
    m = Monitor(MonitorConfig(), ["predator"], TERMS, {"predator": ["predator_distance"]})
    held = stall_rows(lambda u: 0.08, lambda u: 20.0 + 0.5 * u, n=60)
    assert [f for f in m.observe(held) if f.check == "below_start"] == []
    m = Monitor(MonitorConfig(), ["predator"], TERMS, {"predator": ["predator_distance"]})
    honest = stall_rows(lambda u: max(0.08 - 0.08 * u / 30, 0.0), lambda u: 50.0 - 0.5 * u, n=60)
    assert [f for f in m.observe(honest) if f.check == "below_start"] == []


def test_updates_are_pooled_by_their_finished_episodes():
    # one episode an update for 31 updates, then 33: the block closes when 32 have finished,
    # and its capture rate is the episodes' (32 episodes: 31 at 0, one at 1), not the
    # updates' mean of means
    rows = [
        {"seed": 0, "update": u, "env_steps": u, "episodes": 1, "capture_rate": 0.0}
        for u in range(1, 32)
    ]
    rows.append({"seed": 0, "update": 32, "env_steps": 32, "episodes": 1, "capture_rate": 1.0})
    m = monitor(window=4)
    m.observe(rows)
    (block,) = m.history[0]
    assert block["update"] == 32 and block["episodes"] == 32.0
    assert block["capture_rate"] == pytest.approx(1 / 32)
    heavy = pool_rows(
        [
            {"episodes": 1, "capture_rate": 1.0, "steps_to_capture": 10.0},
            {"episodes": 40, "capture_rate": 0.5, "steps_to_capture": 30.0},
        ]
    )
    assert heavy["capture_rate"] == pytest.approx((1 + 20) / 41)
    # steps to capture weighs the captured episodes: 1 at 10 turns, 20 at 30
    assert heavy["steps_to_capture"] == pytest.approx((10 + 20 * 30) / 21)


def test_inactive_rows_and_a_disabled_monitor():
    rows = rows_for(
        12,
        capture=lambda u: 0.9 - 0.02 * u,
        base=lambda u: -10.0 * u,
        distance=lambda u: 20.0 * u,
        length=lambda u: 5.0 + u,
        active=lambda u: u <= 8,
    )
    assert monitor().observe(rows) == []  # 8 active updates: one window, no streak
    assert all(r["monitor/hacking/predator"] == 0 for r in rows)
    off = monitor(enabled=False)
    assert (
        off.observe(rows_for(12, lambda u: 1 - u / 20, lambda u: -u, lambda u: u, lambda u: u))
        == []
    )
    assert "disabled" in monitor_table(off.summary(), 1)


def test_the_warm_up_updates_are_in_no_window():
    worsening = dict(
        capture=lambda u: 0.9 - 0.02 * u,
        base=lambda u: -10.0 * u,
        distance=lambda u: 20.0 * u,
        length=lambda u: 5.0 + u,
    )
    m = Monitor(
        MonitorConfig(window=8, patience=2),
        ["predator"],
        TERMS,
        {"predator": ["predator_distance"]},
        warmup=3,
    )
    flags = m.observe(rows_for(14, **worsening))
    # the first full window is updates 4-11 (not 1-8): flagged at 12, not at 9
    assert [(f.check, f.update) for f in flags] == [("hacking", 12), ("episode_length", 12)]
    assert m.fresh().warmup == 3 and m.summary()["warmup_updates"] == 3


def test_for_run_takes_the_warm_up_from_the_step_limit_and_rollout():
    config = tiny_config(
        "ippo", {"num_steps": 8}, total_timesteps=4096, **{"env.termination.max_steps": 20}
    )
    tc = make_train_config(config)
    m = Monitor.for_run(MonitorConfig(), tc, tc.env.default_params)
    assert m.warmup == 3  # ceil(20 / 8): before update 3 no grid can have hit the limit


def farmed_from_the_start(n: int = 14) -> list[dict]:
    """A term farmed before the first window closes: its share sits at 0.85 throughout, the
    captures are gone, and the rare captures left are quick ones."""
    return [
        dict(row, steps_to_capture=12.0)
        for row in rows_for(
            n,
            capture=lambda u: 0.0,
            base=lambda u: -40.0,
            distance=lambda u: 40.0 * 0.85 / 0.15,
            length=lambda u: 200.0,
        )
    ]


UNTRAINED = {  # what random predators earned: share 10 / 50 = 0.2, 8 % captured in 100 turns
    "capture_rate": 0.08,
    "steps_to_capture": 100.0,
    "episode_length": 192.0,
    "return/predator/base": -40.0,
    "return/predator/predator_distance": 10.0,
}


def test_the_start_is_the_untrained_run_when_it_is_given():
    cfg = MonitorConfig(window=4, patience=2)
    shaping = {"predator": ["predator_distance"]}
    # measured from the first window, a share already at 0.85 has not drifted
    first_window = Monitor(cfg, ["predator"], TERMS, shaping)
    assert first_window.observe(farmed_from_the_start()) == []
    # measured from the untrained run (0.2) it has; the quick captures (12 turns against
    # 100) are survivor bias, not a task gain, so they do not excuse it
    untrained = Monitor(cfg, ["predator"], TERMS, shaping, baseline=UNTRAINED)
    flags = untrained.observe(farmed_from_the_start())
    assert [(f.check, f.term, f.update) for f in flags] == [("share", "predator_distance", 5)]
    assert flags[0].detail == (
        "predator_distance's share of the return drifted from 0.20 to 0.85 (threshold 0.8)"
    )
    assert untrained.untrained_shares() == {"predator/predator_distance": pytest.approx(0.2)}
    assert first_window.untrained_shares() == {}
    assert untrained.fresh().baseline == UNTRAINED
    assert untrained.summary()["baseline"] == UNTRAINED
    # a real gain since the untrained run (captures up from 0.08 to 0.5) is not hacking
    gaining = [dict(r, capture_rate=0.5) for r in farmed_from_the_start()]
    assert Monitor(cfg, ["predator"], TERMS, shaping, baseline=UNTRAINED).observe(gaining) == []


def test_the_untrained_levels_are_random_predators_against_the_configured_prey():
    both = make_train_config(tiny_config("ippo", {"num_steps": 8}, total_timesteps=4096))
    assert untrained_pair(both) == ("random", "random")  # both learn: both start random
    roles = {"predators": "learn", "preys": "evade"}
    config = tiny_config(
        "ippo", {"num_steps": 8}, total_timesteps=4096, **{"experiment.roles": roles}
    )
    tc = make_train_config(config)
    assert untrained_pair(tc) == ("random", "trained")  # the prey play their baseline
    params = tc.env.default_params
    levels = untrained_levels(tc, params, seed=7, episodes=16)
    row = evaluate(tc, {}, params, 7, 16, which={"random": ("random", "trained")}, reps=0)
    assert levels["capture_rate"] == row["random"]["capture_rate"]
    assert levels["episode_length"] == row["random"]["episode_length"]
    assert levels["return/predator/base"] == row["random"]["return/predator/base"]
    assert 0 < levels["capture_rate"] <= 1 and levels["episode_length"] > 0


def test_a_bad_monitor_baseline_is_refused_naming_the_choices():
    with pytest.raises(
        ValueError, match=r"baseline must be one of \['untrained', 'first_window'\]"
    ):
        MonitorConfig(baseline="median")
    with pytest.raises(pj.ConfigError, match="experiment.monitor.baseline"):
        tiny_config("ippo", {}, **{"experiment.monitor.baseline": "median"})


# ------------------------------------------------------------------ on real training
HACKED = {
    # predators paid for distance (weight -5 on -distance) and the prey fixed between
    # them: the shaped return rises as they learn to keep away, captures fall
    "rewards.shaping": [{"name": "predator_distance", "weight": -5.0}],
    "env.starts": [[1, 2], [3, 2], [2, 2]],
    "experiment.roles": {"predators": "learn", "preys": "noop"},
}


@pytest.fixture(scope="module")
def hacked_and_honest():
    """IPPO on the tiny task, paid for distance (hacked) and against it (honest): one
    compiled program, the weight is traced."""
    config = tiny_config("ippo", {"learning_rate": 1e-4}, total_timesteps=40_000, **HACKED)
    tc = make_train_config(config)
    hacked = tc.env.default_params
    honest = tc.env.with_weights(hacked, predator_distance=0.5)
    out = {}
    for name, params in (("hacked", hacked), ("honest", honest)):
        _, metrics = train_seeds(tc, 1, params)
        m = Monitor.for_run(MonitorConfig.from_experiment(config["experiment"]), tc, params)
        rows = metric_rows(tc, metrics)
        out[name] = (m, m.observe(rows), rows)
    return out


@pytest.mark.slow  # trains to hacking
def test_a_config_built_to_be_hacked_is_flagged(hacked_and_honest):
    monitor_, flags, rows = hacked_and_honest["hacked"]
    assert {f.check for f in flags} >= {"hacking"}
    first = min(f.update for f in flags)
    early, late = rows[:10], rows[-10:]
    # what the monitor saw: captures fell and the shaped return rose
    assert (
        np.mean([r["capture_rate"] for r in late])
        < np.mean([r["capture_rate"] for r in early]) - 0.2
    )
    assert 20 <= first < len(rows)
    assert (
        rows[first - 1]["monitor/hacking/predator"] == 1
        or rows[first - 1]["monitor/episode_length/predator"] == 1
    )


@pytest.mark.slow  # a training run
def test_the_honest_twin_is_not_flagged(hacked_and_honest):
    monitor_, flags, rows = hacked_and_honest["honest"]
    assert flags == []
    assert np.mean([r["capture_rate"] for r in rows[-10:]]) > 0.9


@pytest.mark.slow
def test_the_default_config_is_not_flagged():
    config = pj.load_config(
        "configs/default", {"experiment.total_timesteps": 65_536, "experiment.num_envs": 32}
    )
    tc = make_train_config(config)
    result = run_training(tc, tc.env.default_params, 0, 2)
    m = Monitor.for_run(
        MonitorConfig.from_experiment(config["experiment"]), tc, tc.env.default_params
    )
    rows = metric_rows(tc, result.metrics)
    assert len(rows) == 2 * 64
    assert m.observe(rows) == []
    assert len(m.columns) == 10  # 2 roles x (hacking, episode length, 1 share, drift, below_start)
