"""Sweeps on several processes and memory-sized chunks: a 2-process sweep (``ppage-jax launch``,
CPU, gloo) and a sweep that a small memory budget cuts into small chunks both write the
results.csv of one unchunked single-process sweep, number for number."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppage_jax.analysis.batch.output import float_value
from ppage_jax.analysis.batch.program import (
    MEMORY_FRACTION,
    device_memory_limit,
    memory_budget,
    parse_bytes,
)
from ppage_jax.analysis.sweep.run import run_sweep
from ppage_jax.analysis.sweep.spec import load_sweep
from ppage_jax.cli.main import main as cli_main

REPO = Path(__file__).resolve().parents[2]
TINY = {
    "env.size": 5,
    "env.termination.max_steps": 6,
    "agents.predators.count": 1,
    "agents.preys.count": 1,
    "agents.preys.speed": 1,
    "experiment.num_envs": 2,
    "experiment.total_timesteps": 32,
    "experiment.algorithm": {"name": "random", "params": {"num_steps": 8}},
}
SWEEP = {
    "config": str(REPO / "configs/ablation/both"),
    "set": TINY,
    "arms": {"base_only": {"disable": ["predator_distance", "survival"]}, "both": {}},
    "seeds": 2,
    "eval": {"episodes": 3},
}
PROGRAM = [sys.executable, "-c", "import sys; from ppage_jax.cli import main; sys.exit(main())"]


def read_curves(directory: Path) -> dict[tuple, float]:
    with open(directory / "curves.csv", newline="") as fh:
        return {
            (r["arm"], r["seed"], r["update"], r["env_steps"], r["metric"]): float_value(r["value"])
            for r in csv.DictReader(fh)
        }


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "tiny.yaml"
    path.write_text(yaml.safe_dump({"sweep": SWEEP}))
    return path


@pytest.fixture(scope="module")
def unchunked(sweep_file) -> tuple[dict, Path]:
    """Every run in one chunk, one process."""
    out = sweep_file.parent / "unchunked"
    spec = load_sweep(sweep_file, {"chunk_size": 4, "output_dir": str(out)})
    return run_sweep(spec, progress=False, report=False, layout="vmap"), out


def test_byte_counts_and_budget_settings():
    assert parse_bytes("512M") == 512 * 2**20
    assert parse_bytes("1.5GiB") == 3 * 2**29
    assert parse_bytes("2kb") == 2048 and parse_bytes(7) == 7
    assert memory_budget("1K", environ={"PPAGE_JAX_MEMORY_BUDGET": "5M"}) == 1024
    assert memory_budget(environ={"PPAGE_JAX_MEMORY_BUDGET": "5M"}) == 5 * 2**20
    limit = device_memory_limit()  # the device's (or the machine's memory)
    assert limit is not None and limit > 2**20
    assert memory_budget(environ={}) == int(MEMORY_FRACTION * limit)
    with pytest.raises(ValueError, match=r"PPAGE_JAX_MEMORY_BUDGET: expected a byte count"):
        memory_budget(environ={"PPAGE_JAX_MEMORY_BUDGET": "lots"})
    with pytest.raises(ValueError, match="at least 1 byte, got '0'"):
        parse_bytes("0")


def test_bad_memory_budget_flag_is_one_line(capsys, sweep_file):
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(sweep_file), "--memory-budget", "12X"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--memory-budget: expected a byte count such as 1000000, 512M or 2GiB" in err
    assert cli_main(["sweep", str(sweep_file), "--memory-budget", "1G", "--chunk-size", "2"]) == 2
    assert "--chunk-size fixes the chunk and --memory-budget sizes it" in capsys.readouterr().err


def test_bad_memory_budget_variable_is_one_line(capsys, sweep_file, monkeypatch):
    monkeypatch.setenv("PPAGE_JAX_MEMORY_BUDGET", "lots")
    assert cli_main(["sweep", str(sweep_file), "--output", "unused"]) == 2
    assert capsys.readouterr().err == (
        "ppage-jax sweep: PPAGE_JAX_MEMORY_BUDGET: expected a byte count such as 1000000, "
        "512M or 2GiB (K/M/G/T = powers of 1024), got 'lots'\n"
    )


@pytest.mark.slow  # trains the sweep twice
def test_small_memory_budget_shrinks_the_chunk_and_changes_no_number(unchunked, sweep_file):
    whole, whole_dir = unchunked
    bytes_of_four = json.loads((whole_dir / "sweep.json").read_text())["program_bytes_per_device"]
    assert whole["chunk_size"] == 4 and whole["chunks"] == 1 and bytes_of_four > 0
    out = sweep_file.parent / "budget"
    spec = load_sweep(sweep_file, {"output_dir": str(out)})
    budget = bytes_of_four // 4  # room for one run: straight to chunks of 1 (two compiles)
    summary = run_sweep(spec, progress=False, report=False, memory_budget_bytes=budget)
    description = json.loads((out / "sweep.json").read_text())
    assert summary["chunk_size"] == 1 and summary["chunks"] == 4
    assert description["memory_budget_bytes"] == budget
    assert description["program_bytes_per_device"] < bytes_of_four
    assert (out / "results.csv").read_text() == (whole_dir / "results.csv").read_text()
    assert (out / "curves.csv").read_text() == (whole_dir / "curves.csv").read_text()


@pytest.mark.slow  # two processes train the sweep
def test_two_process_sweep_equals_the_single_process_sweep(unchunked, sweep_file, tmp_path):
    _, whole_dir = unchunked
    out = tmp_path / "two"
    done = subprocess.run(
        [*PROGRAM, "launch", "-n", "2", "--", "sweep", str(sweep_file), "--output", str(out)]
        + ["--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count(" runs in ") == 1  # only process 0 reports
    description = json.loads((out / "sweep.json").read_text())
    assert description["processes"] == 2 and description["devices"] == 2
    assert description["chunk_size"] == 2 and len(list((out / "chunks").iterdir())) == 4
    assert (out / "results.csv").read_text() == (whole_dir / "results.csv").read_text()
    # Training curves: XLA fuses the program split over 2 devices a little differently, so a
    # mean return may round to the neighbouring float32 (e.g. -33.333332 for -33.333336).
    two, one = read_curves(out), read_curves(whole_dir)
    assert list(two) == list(one)
    np.testing.assert_allclose(list(two.values()), list(one.values()), rtol=1e-6)
    assert (out / "report.md").is_file()
