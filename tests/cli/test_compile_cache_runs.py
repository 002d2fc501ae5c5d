"""A run (and a sweep) in a new process with a warm compile cache: the same bytes as the cold
run, the training programs loaded whole from the program store, and most of the compile time
gone."""

from __future__ import annotations

import json

import pytest
from cli_testing import cli_env, run_cli, write_run_config, write_sweep_file

RESULT_FILES = ("metrics.csv", "checkpoint.msgpack", "config.yaml")


@pytest.mark.slow  # two runs in new processes
def test_a_warm_cache_run_is_byte_identical_and_compiles_less(tmp_path):
    config = write_run_config(tmp_path / "tiny")
    env = dict(cli_env(tmp_path / "unused"), PPAGE_JAX_COMPILE_CACHE=str(tmp_path / "cache"))
    summaries, files = [], []
    for name in ("cold", "warm"):
        out = tmp_path / name
        done = run_cli(["run", str(config), "--out", str(out), "--no-progress"], env)
        assert done.returncode == 0, done.stderr
        summaries.append(json.loads((out / "summary.json").read_text()))
        files.append({f: (out / f).read_bytes() for f in RESULT_FILES})
    assert files[0] == files[1]
    assert summaries[0]["evaluation"] == summaries[1]["evaluation"]
    cold, warm = (s["compile_seconds"] for s in summaries)
    assert warm < 0.5 * cold, (cold, warm)
    programs = summaries[0]["compile_seconds_by_program"]
    assert programs and all(seconds >= 0 for seconds in programs.values())
    assert summaries[0]["programs_loaded"] == []
    assert summaries[1]["programs_loaded"] == ["train_init", "train_chunk", "finite_params"]
    stored = sorted(p.name.split("-")[0] for p in (tmp_path / "cache" / "programs").iterdir())
    assert stored == ["finite_params", "train_chunk", "train_init"]


@pytest.mark.slow  # two sweeps in new processes
def test_a_warm_sweep_is_byte_identical_and_loads_its_program_whole(tmp_path):
    sweep = write_sweep_file(tmp_path / "sweep.yaml")
    env = dict(cli_env(tmp_path / "unused"), PPAGE_JAX_COMPILE_CACHE=str(tmp_path / "cache"))
    results, seconds = [], []
    for name in ("cold", "warm"):
        out = tmp_path / name
        done = run_cli(["sweep", str(sweep), "--output", str(out), "--no-progress"], env)
        assert done.returncode == 0, done.stderr
        results.append([(out / f).read_bytes() for f in ("results.csv", "curves.csv")])
        seconds.append(json.loads((out / "sweep.json").read_text())["compile_seconds"])
    assert results[0] == results[1]
    (entry,) = (tmp_path / "cache" / "programs").iterdir()
    assert entry.name.startswith("sweep_chunk-")
    assert seconds[1] < 0.5 * seconds[0], seconds
