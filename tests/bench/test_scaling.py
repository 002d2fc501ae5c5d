"""`ppage-jax bench --scaling` and `--report` on tiny settings, `launch -n 2 -- bench`, and
the pieces they are made of (figures are never asserted, only plumbing and byte counts)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

import ppage_jax as pj
from ppage_jax.bench import report as bench_report
from ppage_jax.bench import scaling
from ppage_jax.cli.main import main
from ppage_jax.observations import observation_builders

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # times every grid size
def test_scaling_command_prints_writes_and_plots(tmp_path, capsys):
    out_json, out_png, out_md = tmp_path / "s.json", tmp_path / "s.png", tmp_path / "s.md"
    code = main(
        [
            "bench",
            "--scaling",
            "--sizes",
            "5,12",
            "--agents",
            "4",
            "--batch-sizes",
            "1",
            "--builders",
            "grid",
            "--scaling-batch",
            "4",
            "--no-showcases",
            "--repeats",
            "1",
            "--seconds",
            "0.01",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
            "--markdown",
            str(out_md),
        ]
    )
    assert code == 0
    rows = json.loads(out_json.read_text())["scaling"]
    assert [
        (r["axis"], r["builder"], r["size"], r["num_agents"], r["batch"], r["mode"]) for r in rows
    ] == [
        ("grid size", "grid", 5, 6, 4, "no reset"),
        ("grid size", "grid", 12, 6, 4, "no reset"),
        ("grid size", "grid", 5, 6, 4, "auto-reset"),  # timed in turns with the no-reset line
        ("grid size", "grid", 12, 6, 4, "auto-reset"),
        ("agents", "grid", 50, 4, 4, "no reset"),
        ("batch", "grid", 10, 6, 1, "no reset"),
    ]
    for r in rows:
        assert r["env_steps_per_s"] > 0 and r["steps"] >= 4 and r["compile_s"] > 0
        assert r["bytes_per_env"] == r["state_bytes"] + r["obs_bytes"]
    # 3v3 on 12x12 (28 obstacles): grid r=3 is 6 agents x 7x7x5 floats
    grid12 = rows[1]
    assert grid12["obs_bytes"] == 6 * 245 * 4 and grid12["num_obstacles"] == 28
    assert out_png.read_bytes()[:8] == PNG
    text = capsys.readouterr().out
    assert "env-steps/s against grid size (no reset" in text and "| grid | " in text
    assert "| grid, auto-reset / no reset | " in text
    assert "| state only |" in out_md.read_text()


def test_bench_rejects_an_unknown_builder_or_axis_in_one_line(capsys):
    assert main(["bench", "--scaling", "--builders", "grid,nope"]) == 2
    assert capsys.readouterr().err.startswith(
        "ppage-jax bench: unknown --builders ['nope']; known: ["
    )
    assert main(["bench", "--axes", "size,colour"]) == 2
    assert capsys.readouterr().err == (
        "ppage-jax bench: unknown --axes ['colour']; known: "
        "['size', 'agents', 'batch', 'showcase']\n"
    )


def test_state_bytes_grow_with_the_grid_and_fit_batch_cuts_to_a_power_of_two():
    small = scaling.env_bytes(pj.make("default", {"env.size": 10}))
    big = scaling.env_bytes(pj.make("default", {"env.size": 100}))
    # 3v3: positions 48, captured 6, stamina 24, 8 bytes per obstacle, one per cell, turn 4,
    # captures 4, two flags 2
    assert small["state_bytes"] == 48 + 6 + 24 + 8 * 20 + 100 + 10
    assert big["state_bytes"] == 48 + 6 + 24 + 8 * 2000 + 10_000 + 10
    assert small["obs_bytes"] == big["obs_bytes"] - 6 * 4 * 4 * 1980  # local_radius slots
    assert scaling.fit_batch(256, 1000, budget=1 << 20) == 256
    assert scaling.fit_batch(256, 10_000, budget=1 << 20) == 64
    assert scaling.fit_batch(256, 10 << 20, budget=1 << 20) == 1


def test_format_scaling_gives_the_auto_reset_over_no_reset_ratio():
    def row(mode, size, rate):
        return {
            "axis": "grid size",
            "builder": "grid",
            "mode": mode,
            "size": size,
            "batch": 256,
            "batch_requested": 256,
            "env_steps_per_s": rate,
            "state_bytes": 1,
            "bytes_per_env": 2,
        }

    rows = [row("no reset", 10, 400.0), row("no reset", 100, 300.0)]
    rows += [row("auto-reset", 10, 200.0), row("auto-reset", 100, 240.0)]
    text = scaling.format_scaling(rows)
    assert "| grid | 200 | 240 |\n| grid, auto-reset / no reset | 0.50 | 0.80 |" in text
    assert text.count("auto-reset / no reset") == 1


def test_sweep_points_cover_every_builder_and_the_showcases():
    points = scaling.sweep_points(sizes=(10,), agents=(2, 256), batches=(1,))
    builders = observation_builders()
    assert {p.builder for p in points} == set(builders)
    shows = [
        (p.label, p.size, p.n_predators, p.n_prey)
        for p in points
        if p.axis == "showcase" and p.builder == "grid"
    ]
    assert shows == [("showcase 3v10 50x50", 50, 3, 10), ("showcase 5v20 100x100", 100, 5, 20)]
    assert [
        (p.n_predators, p.n_prey) for p in points if p.axis == "agents" and p.builder == "grid"
    ] == [(1, 1), (128, 128)]
    assert [p for p in points if p.resets] == [
        scaling.Point("grid size", "grid", 10, 3, 3, 256, resets=True)
    ]


@pytest.mark.slow  # times every grid size
def test_report_writes_json_markdown_and_plot(tmp_path, monkeypatch, capsys):
    tiny = functools.partial(
        bench_report.run_report,
        configs=("configs/1v1",),
        batches=(2,),
        points=[scaling.Point("grid size", "grid", 6, 1, 1, 2)],
        algorithms=["random", "nope"],
        training_updates=1,
        seconds=0.01,
        repeats=1,
    )
    monkeypatch.setattr(bench_report, "run_report", tiny)
    assert main(["bench", "--report", str(tmp_path / "rep")]) == 0
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert set(report) == {
        "device",
        "throughput",
        "first_step",
        "scaling",
        "training",
        "peak_memory_bytes",
        "seconds",
    }
    assert [(r["name"], r["batch"], r["mode"]) for r in report["throughput"]] == [
        ("configs/1v1", 2, "auto-reset")
    ]
    assert report["first_step"][0]["wall"] > 0
    assert report["peak_memory_bytes"] is None  # the CPU backend reports none
    random_row, unknown = report["training"]
    assert random_row["algorithm"] == "random" and random_row["env_steps_per_s"] > 0
    assert unknown["algorithm"] == "nope" and "nope" in unknown["skipped"]
    md = (tmp_path / "rep" / "report.md").read_text()
    for heading in (
        "## Throughput by config and batch",
        "## Compile times",
        "## Scaling",
        "## Training throughput",
        "## Peak device memory",
    ):
        assert heading in md
    assert "Not reported by this backend" in md
    assert (tmp_path / "rep" / "scaling.png").read_bytes()[:8] == PNG
    assert "wrote " in capsys.readouterr().out


@pytest.mark.slow  # two processes
def test_launch_runs_bench_on_two_processes(tmp_path):
    out = tmp_path / "two.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from ppage_jax.cli import main; sys.exit(main())",
            "launch",
            "-n",
            "2",
            "--",
            "bench",
            "--configs",
            "configs/1v1",
            "--batch-sizes",
            "2",
            "--steps",
            "2",
            "--repeats",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["device"]["device_count"] == 2
    assert [(r["name"], r["batch"]) for r in report["scaling"]] == [("configs/1v1", 2)]
    assert report["oracle"] == [] and report["peers"] == [] and report["first_step"] == []
    assert proc.stdout.count('"processes": 2') == 1  # process 0 prints, alone
