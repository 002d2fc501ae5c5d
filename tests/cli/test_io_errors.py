"""I/O errors are one line, before any long work: output paths that cannot be used, a
missing directory for a report file, truncated or foreign checkpoints, and bad numeric
flags."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_testing import write_run_config, write_sweep_file
from train_testing import untrained_policies

import ppage_jax as pj
from ppage_jax.artifacts import atomic_open, write_text
from ppage_jax.cli.main import main
from ppage_jax.train import make_train_config
from ppage_jax.train.run.checkpoint import save_checkpoint


def _error(capsys) -> str:
    """The one line a failed command wrote to stderr (after any banner lines)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A run stopped (Ctrl-C) after its first update: config.yaml and one checkpoint."""
    tmp = tmp_path_factory.mktemp("io")
    config = write_run_config(tmp / "tiny")
    out = tmp / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PPAGE_JAX_FAULT", "chunk:1@INT")
        assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 130
    return out


def _copy(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    return copy


def test_an_existing_file_as_output_directory(tmp_path, capsys):
    config = write_run_config(tmp_path / "tiny")
    sweep = write_sweep_file(tmp_path / "sweep.yaml")
    target = tmp_path / "taken"
    target.write_text("keep me")
    assert main(["run", str(config), "--out", str(target)]) == 2
    assert _error(capsys) == f"error: run directory {target} is an existing file, not a directory"
    assert main(["sweep", str(sweep), "--output", str(target), "--no-progress"]) == 2
    assert _error(capsys) == f"error: sweep directory {target} is an existing file, not a directory"
    assert target.read_text() == "keep me"


def test_an_output_directory_below_a_file(tmp_path, capsys):
    config = write_run_config(tmp_path / "tiny")
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "run"
    assert main(["run", str(config), "--out", str(out)]) == 2
    assert _error(capsys) == f"error: cannot create run directory {out}: Not a directory"


def test_an_unwritable_output_directory(tmp_path, capsys):
    config = write_run_config(tmp_path / "tiny")
    if os.geteuid() == 0:  # root writes anywhere but into /proc
        out, words = "/proc/ppage-jax-test/run", "cannot create run directory"
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        out, words = str(locked), f"run directory {locked} is not writable: Permission denied"
    assert main(["run", str(config), "--out", out]) == 2
    assert _error(capsys).startswith(f"error: {words}")


@pytest.mark.parametrize(
    "command",
    [["bench", "--json"], ["bench", "--markdown"], ["audit", "configs/default", "--json"]],
)
def test_a_missing_directory_for_a_report_file(tmp_path, capsys, command):
    missing = tmp_path / "missing" / "report.json"
    with pytest.raises(SystemExit) as exit_:
        main([*command, str(missing)])
    assert exit_.value.code == 2
    flag = command[-1]
    assert _error(capsys) == (
        f"ppage-jax {command[0]}: error: argument {flag}: output file {missing}: directory "
        f"{missing.parent} does not exist (see ppage-jax {command[0]} --help)"
    )
    with pytest.raises(SystemExit):
        main([*command, str(tmp_path)])
    assert f"output file {tmp_path} is a directory; give a file name" in _error(capsys)


@pytest.mark.slow  # a run through the CLI
def test_a_truncated_training_checkpoint(stopped_run, tmp_path, capsys):
    run = _copy(stopped_run, tmp_path)
    data = sorted(
        p
        for p in (run / "checkpoints" / "1" / "state").rglob("*")
        if p.is_file() and p.parent.name == "d"
    )
    for path in data:  # the array data, cut short
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    assert main(["run", "--resume", str(run), "--no-progress"]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()[-1]
    assert err.startswith(
        f"error: {run / 'checkpoints' / '1'}: cannot read this training "
        f"checkpoint (truncated or not written by ppage-jax"
    )
    assert err.endswith("delete it to start the run again")
    assert "Traceback" not in out.err and "trained" not in out.out  # before training


def test_a_truncated_checkpoint_description(stopped_run, tmp_path, capsys):
    run = _copy(stopped_run, tmp_path)
    meta = run / "checkpoints" / "1" / "meta" / "metadata"
    meta.write_text(meta.read_text()[:40])
    assert main(["run", "--resume", str(run)]) == 2
    assert "cannot read this training checkpoint (truncated or not written by ppage-jax" in _error(
        capsys
    )


def test_a_foreign_training_checkpoint(stopped_run, tmp_path, capsys):
    run = _copy(stopped_run, tmp_path)
    config = pj.load_config(run / "config.yaml", {"experiment.seed": 9})
    write_text(run / "config.yaml", config.to_yaml())
    assert main(["run", "--resume", str(run)]) == 2
    err = _error(capsys)
    assert f"{run / 'checkpoints' / '1'}: written for config hash " in err
    assert f"this run has config hash {config.hash()} (iql)" in err


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", "truncated"])
def test_a_truncated_or_foreign_policy_checkpoint(tmp_path, capsys, content):
    config = pj.load_config(write_run_config(tmp_path / "tiny"))
    tc = make_train_config(config)
    run = tmp_path / "run"
    run.mkdir()
    write_text(run / "config.yaml", config.to_yaml())
    path = run / "checkpoint.msgpack"
    save_checkpoint(path, tc, untrained_policies(tc))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if content == "truncated" else content)
    assert main(["evaluate", str(run)]) == 2
    err = _error(capsys)
    assert err.startswith(f"cannot evaluate: {path}: not a ")
    assert "ppage_jax checkpoint" in err


def test_a_write_that_fails_leaves_the_old_file(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(path) as handle:
        handle.write("half of the new")
        raise RuntimeError("disk full")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["metrics.csv"]


@pytest.mark.parametrize(
    "argv, flag, allowed",
    [
        (["bench", "--repeats", "0"], "--repeats", "must be an integer >= 1, got '0'"),
        (["bench", "--steps", "-5"], "--steps", "must be an integer >= 1"),
        (["bench", "--seconds", "nan"], "--seconds", "must be a finite number > 0, got 'nan'"),
        (["bench", "--oracle-seconds", "inf"], "--oracle-seconds", "finite number > 0"),
        (["bench", "--peer-batch", "x"], "--peer-batch", "expected an integer, got 'x'"),
        (["bench", "--scaling-batch", "0"], "--scaling-batch", ">= 1"),
        (["render", "--fps", "nan"], "--fps", "must be a finite number > 0, got 'nan'"),
        (["render", "--fps", "0"], "--fps", "finite number > 0"),
        (["render", "--max-steps", "0"], "--max-steps", ">= 1"),
        (["render", "--cell-px", "4"], "--cell-px", "in [8, 256], got '4'"),
        (["render", "--cell-px", "100000"], "--cell-px", "in [8, 256], got '100000'"),
        (["render", "--fps", "1e-9"], "--fps", "in [0.01, 100], got '1e-9'"),
        (["render", "--fps", "1e9"], "--fps", "in [0.01, 100]"),
        (["render", "--seed", "-1"], "--seed", ">= 0"),
        (["evaluate", "RUN", "--episodes", "0"], "--episodes", ">= 1"),
        (["evaluate", "RUN", "--max-steps", "1e3"], "--max-steps", "expected an integer"),
        (["audit", "--episodes", "0"], "--episodes", ">= 1"),
        (["sweep", "--seeds", "0"], "--seeds", ">= 1"),
        (["sweep", "--chunk-size", "-1"], "--chunk-size", ">= 1"),
        (["crossplay", "RUN", "--episodes", "0"], "--episodes", ">= 1"),
        (["crossplay", "RUN", "--seed", "-1"], "--seed", ">= 0"),
        (["crossplay", "RUN", "--policy-seed", "x"], "--policy-seed", "expected an integer"),
        (["launch", "-n", "0", "--", "bench"], "-n/--num-processes", ">= 1"),
        (
            ["launch", "-n", "2", "--port", "70000", "--", "bench"],
            "--port",
            "in [1, 65535], got '70000'",
        ),
    ],
)
def test_numeric_flags_are_checked_when_parsed(capsys, argv, flag, allowed):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = _error(capsys)
    assert err.startswith(f"ppage-jax {argv[0]}: error: argument {flag}: ")
    assert allowed in err


def test_bench_names_a_missing_config_before_any_work(capsys):
    assert main(["bench", "--configs", "no/such/config"]) == 2
    err = capsys.readouterr()
    assert err.out == ""  # nothing measured or printed first
    assert "no/such/config" in err.err and "name of a shipped config" in err.err


def test_render_out_under_a_file_or_at_a_directory_fails_first(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["render", "configs/1v1", "--out", str(taken / "x.gif")]) == 2
    assert _error(capsys) == f"error: --out directory {taken} is an existing file, not a directory"
    assert main(["render", "configs/1v1", "--out", str(tmp_path)]) == 2
    assert _error(capsys) == f"error: --out {tmp_path} is a directory; give a file name"


def test_render_refuses_frames_too_large_in_one_line(tmp_path, capsys):
    out = tmp_path / "big.gif"
    argv = ["render", "configs/default", "--set", "env.size=64", "--cell-px", "128"]
    argv += ["--out", str(out)]
    assert main(argv) == 2
    assert _error(capsys) == (
        "ppage-jax render: --cell-px 128 makes 8192 px frames for a 64x64 grid; a frame "
        "side may be at most 4096 px (use --cell-px 64 or less)"
    )
    assert not os.path.lexists(out)


TOO_LONG = "x" * 300  # longer than a file name may be (255 bytes)


@pytest.mark.parametrize("where", ["name too long", "/proc"])
@pytest.mark.parametrize(
    "command", ["run", "run --resume", "evaluate", "sweep", "search", "render"]
)
def test_an_output_path_the_os_refuses_is_one_line_and_exit_2(tmp_path, capsys, command, where):
    from search_testing import write_search_file

    if where == "/proc":
        out = Path("/proc/ppage-jax-test")
        if command == "render":
            out = out.with_suffix(".gif")
    else:
        out = tmp_path / (f"{TOO_LONG}.gif" if command == "render" else TOO_LONG)
    argv = {
        "run": ["run", str(write_run_config(tmp_path / "tiny")), "--out", str(out)],
        "run --resume": ["run", "--resume", str(out)],
        "evaluate": ["evaluate", str(out)],
        "sweep": ["sweep", str(write_sweep_file(tmp_path / "sweep.yaml")), "--output", str(out)],
        "search": ["search", str(write_search_file(tmp_path / "search.yaml")), "--out", str(out)],
        "render": ["render", "configs/1v1", "--out", str(out)],
    }[command]
    assert main(argv) == 2
    err = _error(capsys)
    if where == "/proc" and command in ("run --resume", "evaluate"):
        assert err == f"error: {out} is not a run directory (no config.yaml)"
    elif where == "/proc":
        assert err.startswith("error: ") and str(out.parent) in err
        assert err.endswith(": No such file or directory")
    else:
        what = {"render": "--out", "sweep": "sweep directory", "search": "search directory"}
        what = what.get(command, "run directory")
        assert err == f"error: cannot use {what} {out}: File name too long"
    assert not os.path.lexists(out)
