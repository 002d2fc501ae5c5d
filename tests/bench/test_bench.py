"""`ppage-jax bench` plumbing on a tiny run (figures are never asserted: speed is measured by
the benchmark, not by tests)."""

from __future__ import annotations

import json
import sys

import jax
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.bench import peers, throughput
from ppage_jax.cli.main import main


@pytest.mark.slow  # a benchmark
def test_bench_command_writes_report_table_and_plot(tmp_path, capsys):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    code = main(
        [
            "bench",
            "--configs",
            "configs/1v1",
            "--batch-sizes",
            "2,4",
            "--steps",
            "3",
            "--repeats",
            "1",
            "--oracle-seconds",
            "0.2",
            "--no-peers",
            "--no-first-step",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
        ]
    )
    assert code == 0
    report = json.loads(out_json.read_text())
    assert [(r["name"], r["batch"], r["steps"], r["mode"]) for r in report["scaling"]] == [
        ("configs/1v1", 2, 3, "auto-reset"),
        ("configs/1v1", 4, 3, "auto-reset"),
    ]
    for row in report["scaling"] + report["oracle"]:
        assert row["env_steps_per_s"] > 0
        assert row["agent_steps_per_s"] == pytest.approx(2 * row["env_steps_per_s"])
    assert report["oracle"][0]["name"] == "oracle configs/1v1" and report["peers"] == []
    assert report["device"]["platform"] == jax.devices()[0].platform
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "| configs/1v1 | 4 |" in text and "NumPy oracle" in text


def test_state_bytes_counts_every_leaf_of_one_grid():
    env = pj.make("configs/1v1")
    _, state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    expected = sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(state))
    assert throughput.state_bytes(env) == expected
    # 1v1 on 10x10 with 20 obstacles: positions 16 + captured 2 + stamina 8 + obstacles 160
    # + obstacle map 100 + turn 4 + captures 4 + two flags 2.
    assert expected == 16 + 2 + 8 + 160 + 100 + 4 + 4 + 2 == 296


def test_shipped_configs_finds_nested_config_dirs(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "env.yaml").write_text("env: {size: 5}\n")
    (tmp_path / "group" / "b").mkdir(parents=True)
    (tmp_path / "group" / "b" / "agents.yaml").write_text("agents: {}\n")
    (tmp_path / "notes").mkdir()
    assert throughput.shipped_configs(tmp_path) == [
        str(tmp_path / "a"),
        str(tmp_path / "group" / "b"),
    ]


def test_oracle_for_env_matches_the_env_on_one_step():
    env = pj.make("configs/default")
    oracle = throughput.oracle_for_env(env)
    obs, state = jax.jit(env.reset)(jax.random.PRNGKey(4))
    actions = np.array([0, 1, 2, 3, 0, 1], np.int32)
    _, after, reward, terminated, truncated, _ = jax.jit(env.step)(
        jax.random.PRNGKey(0), state, actions
    )
    ref = oracle.reset_to(np.asarray(state.positions), np.asarray(state.obstacles))
    ref_after, ref_reward, _, ref_term, ref_trunc, _ = oracle.step(ref, actions)
    np.testing.assert_array_equal(np.asarray(after.positions), ref_after.positions)
    np.testing.assert_allclose(np.asarray(reward), ref_reward, rtol=1e-6)
    assert bool(terminated) == ref_term and bool(truncated) == ref_trunc


def test_first_step_timing_reports_wall_and_cpu_seconds():
    seconds = throughput.first_step_here("configs/1v1", 4, {})
    assert set(seconds) == {"wall", "cpu"} and seconds["wall"] > 0 and seconds["cpu"] > 0


def test_missing_peers_are_skipped(monkeypatch):
    monkeypatch.setitem(sys.modules, "jumanji", None)  # import jumanji -> ImportError
    monkeypatch.setitem(sys.modules, "jaxmarl", None)
    assert peers.prepare_jumanji_lbf(4, 2) is None
    assert peers.prepare_jaxmarl_simple_tag(4, 2) is None


def _peer_row(name: str, mode: str, rate: float) -> dict:
    return throughput.Result(name, mode, 4096, 6, 10, 4096 * 10 / rate, 1.0).as_dict()


def test_the_peer_rows_say_what_they_are(monkeypatch):
    """`configs/default` (per-config table) and `ppage configs/default` (peer comparison)
    are the same loop measured twice: the printed run and the Markdown say so."""
    from ppage_jax.bench import report

    class Stub:
        def __init__(self, name):
            self.result = throughput.Result(name, "auto-reset", 4096, 6, 10, 1.0, 1.0)

    monkeypatch.setattr(peers, "prepare_env", lambda env, b, s, resets=True, name="": Stub(name))
    monkeypatch.setattr(peers, "prepare_jumanji_lbf", lambda b, s: None)
    monkeypatch.setattr(peers, "prepare_jaxmarl_simple_tag", lambda b, s: None)
    monkeypatch.setattr(peers, "interleaved", lambda timers, repeats: [t.result for t in timers])
    printed: list[str] = []
    peers.run_peers(["configs/default"], 4096, 10, 1, log=printed.append)
    assert printed[0] == (
        "peers at batch 4096, timed in turns (the machine's load drifts over all alike):"
    )
    assert printed[1].startswith("  ppage configs/default = configs/default again (random ")
    assert "the same loop as its per-config row at batch 4096" in printed[1]
    assert printed[2].startswith("  ppage 2v2 speed 1 local_only = configs/default with 2 ")
    assert printed[3].startswith("ppage configs/default ") and "(2 peer(s)" in printed[-1]

    text = report.format_report(
        {
            "device": throughput.device_info(),
            "scaling": [_peer_row("configs/default", "auto-reset", 7e5)],
            "oracle": [],
            "first_step": [],
            "peers": [
                _peer_row("ppage configs/default", "auto-reset", 8e5),
                _peer_row("ppage 2v2 speed 1 local_only", "no reset", 8e6),
            ],
        }
    )
    assert "Each config with random actions and the batched auto-reset" in text
    assert "\nPeers at batch 4096, timed in turns" in text
    assert "- `ppage configs/default`: configs/default again (random actions" in text
    assert "- `ppage 2v2 speed 1 local_only`: configs/default with 2 predators" in text
