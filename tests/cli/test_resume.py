"""Run and sweep directories are never destroyed: a second run into one is refused (every
byte stays), --overwrite replaces only the run's own files, and --resume is checked before
any work. (Killing and resuming: test_faults.py.)"""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest
from cli_testing import tree_bytes, write_run_config, write_sweep_file
from train_testing import make_train_config, tiny_config

import ppage_jax as pj
from ppage_jax.cli.main import main
from ppage_jax.train.registry import ALGORITHMS
from ppage_jax.train.run import report
from ppage_jax.train.run.checkpoint import TrainingCheckpoints
from ppage_jax.train.run.runner import run_training


def _fill(directory, names):
    rng = np.random.default_rng(0)
    for name in names:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.bytes(64))


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_rerun_into_a_run_directory_leaves_every_byte(tmp_path, capsys):
    config = write_run_config(tmp_path / "tiny")
    out = tmp_path / "run"
    _fill(out, ["config.yaml", "metrics.csv", "summary.json", "checkpoints/4/state/x", "notes.txt"])
    before = tree_bytes(out)
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 2
    err = _one_line_error(capsys)
    assert (
        f"run directory {out} already holds a run (config.yaml, metrics.csv, "
        f"summary.json, checkpoints)" in err
    )
    assert f"--resume {out}" in err and "--overwrite" in err
    assert tree_bytes(out) == before


def test_rerun_into_a_sweep_directory_leaves_every_byte(tmp_path, capsys):
    sweep = write_sweep_file(tmp_path / "sweep.yaml")
    out = tmp_path / "sweep"
    _fill(out, ["results.csv", "curves.csv", "manifest.json", "chunks/00000.results.csv"])
    before = tree_bytes(out)
    assert main(["sweep", str(sweep), "--output", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the sweep's banner
    assert err.startswith(
        f"error: sweep directory {out} already holds a sweep (manifest.json, "
        f"results.csv, curves.csv, chunks)"
    )
    assert tree_bytes(out) == before


def test_overwrite_replaces_only_the_runs_own_files(tmp_path, capsys, monkeypatch):
    config = write_run_config(tmp_path / "tiny")
    out = tmp_path / "run"
    _fill(out, ["metrics.csv", "summary.json", "checkpoints/8/state/x", "notes.txt"])
    notes = (out / "notes.txt").read_bytes()
    monkeypatch.setenv("PPAGE_JAX_FAULT", "chunk:1@INT")  # stop after the first chunk
    assert main(["run", str(config), "--out", str(out), "--overwrite", "--no-progress"]) == 130
    assert (out / "notes.txt").read_bytes() == notes  # not a run file: kept
    assert not (out / "metrics.csv").exists() and not (out / "summary.json").exists()
    assert sorted(os.listdir(out / "checkpoints")) == ["1"]  # the new run's checkpoint
    assert pj.load_config(out / "config.yaml").hash() == pj.load_config(config).hash()
    err = capsys.readouterr().err
    assert err.strip().endswith(f"resume with: ppage-jax run --resume {out}")


@pytest.mark.parametrize(
    "extra, words",
    [
        (["CONFIG"], "drop CONFIG_DIR"),
        (["--set", "env.size=6"], "drop --set"),
        (["--overwrite"], "drop --overwrite"),
    ],
)
def test_resume_takes_the_runs_own_config(tmp_path, capsys, extra, words):
    config = write_run_config(tmp_path / "tiny")
    extra = [str(config) if e == "CONFIG" else e for e in extra]
    assert main(["run", "--resume", str(tmp_path), *extra]) == 2
    err = _one_line_error(capsys)
    assert err == f"error: --resume continues {tmp_path} with its own config.yaml; {words}"


def test_resume_needs_a_run_directory(tmp_path, capsys):
    assert main(["run", "--resume", str(tmp_path)]) == 2
    assert _one_line_error(capsys) == f"error: {tmp_path} is not a run directory (no config.yaml)"
    assert main(["run"]) == 2
    assert "give CONFIG_DIR to start a run, or --resume RUN_DIR" in _one_line_error(capsys)


def test_resuming_a_finished_run_changes_nothing(tmp_path, capsys):
    config = pj.load_config(write_run_config(tmp_path / "tiny"))
    out = tmp_path / "run"
    out.mkdir()
    report.write_config(out, config)
    _fill(out, ["summary.json", "metrics.csv"])
    before = tree_bytes(out)
    assert main(["run", "--resume", str(out)]) == 0
    assert f"{out} is already complete (summary.json); nothing to resume" in capsys.readouterr().out
    assert tree_bytes(out) == before


def test_sweep_resume_refuses_another_sweep_and_extra_flags(tmp_path, capsys):
    sweep = write_sweep_file(tmp_path / "sweep.yaml")
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "manifest.json").write_text(
        '{"format": "ppage_jax sweep manifest 1", "identity": "0123456789abcdef", '
        f'"source": {{"sweep": "{sweep}", "overrides": {{}}, "arms": null}}, '
        '"runs": 4, "chunk_size": 1, "chunks": {}}'
    )
    before = tree_bytes(out)
    assert main(["sweep", "--resume", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(
        f"error: {out} holds another sweep (identity 0123456789abcdef, this one is "
    )
    assert main(["sweep", "--resume", str(out), "--seeds", "3"]) == 2
    assert (
        _one_line_error(capsys)
        == f"error: --resume continues the sweep recorded in {out}; drop --seeds"
    )
    assert main(["sweep", "--resume", str(tmp_path)]) == 2
    assert (
        _one_line_error(capsys) == f"error: {tmp_path} holds no sweep to resume (no manifest.json)"
    )
    assert tree_bytes(out) == before


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_resumes_bit_for_bit(tmp_path, name):
    """Stopped after two chunks and resumed from the checkpoint, every algorithm ends with
    the metrics and runner state (parameters, optimiser states, target networks, replay
    buffers, tables, env states, keys, counters) of an uninterrupted run."""
    joint = {"experiment.roles.preys": "random"} if name.startswith("jal") else {}  # 2 agents
    tc = make_train_config(tiny_config(name, total_timesteps=16 * 128 * 6, **joint))
    params = tc.env.default_params
    reference = run_training(tc, params, 0, 2)
    asked = iter(range(100))
    stopped = run_training(
        tc,
        params,
        0,
        2,
        checkpoints=TrainingCheckpoints(tmp_path, tc, 2),
        should_stop=lambda: next(asked) >= 3,
    )
    assert stopped.stopped and stopped.updates < tc.num_updates
    resumed = run_training(tc, params, 0, 2, checkpoints=TrainingCheckpoints(tmp_path, tc, 2))
    assert resumed.resumed_from == stopped.updates and resumed.updates == reference.updates
    for got, want in ((resumed.metrics, reference.metrics), (resumed.runner, reference.runner)):
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
