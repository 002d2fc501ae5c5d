"""A real full disk (a 300 KB tmpfs): every command stops with one line naming the path and
the OS error, exit status 1, no traceback, no ``ERROR:`` line from Orbax's background
threads and no temporary file or folder; a training checkpoint that does not fit leaves
the previous one as the newest, and the run resumes from it once there is room.

The tmpfs is mounted per test (root only: skipped where ``mount`` is refused) and
unmounted at teardown. Writing a file of zeros leaves a chosen number of bytes free."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_testing import cli_env, run_cli, write_run_config, write_sweep_file
from search_testing import write_search_file

import ppage_jax as pj
from ppage_jax.artifacts import LOCK_FILE, PARTIAL
from ppage_jax.cli.main import main
from ppage_jax.train import make_train_config
from ppage_jax.train.run.checkpoint import TrainingCheckpoints, write_error

DISK_BYTES = 300 * 1024
FULL = "No space left on device"


def _mount(where: Path, size: int) -> str | None:
    """Mount a tmpfs of ``size`` bytes at ``where``; the reason when it cannot be."""
    if shutil.which("mount") is None:
        return "no mount command"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size // 1024}k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


@pytest.fixture
def disk(tmp_path):
    """A 300 KB tmpfs at ``tmp_path / "disk"``, unmounted after the test."""
    where = tmp_path / "disk"
    where.mkdir()
    reason = _mount(where, DISK_BYTES)
    if reason is not None:
        pytest.skip(f"a tmpfs cannot be mounted here (root only): {reason}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(disk: Path, leave: int = 0) -> None:
    """Leave ``leave`` bytes of ``disk`` free (a file of zeros takes the rest)."""
    stat = os.statvfs(disk)
    (disk / "filler").write_bytes(bytes(max(0, stat.f_bavail * stat.f_frsize - leave)))


def _leftovers(disk: Path) -> list[str]:
    """Temporary files and folders left on ``disk`` (Orbax's ``*tmp*`` folders, partial
    artifact files)."""
    return sorted(str(p) for p in disk.rglob("*") if "tmp" in p.name or PARTIAL in p.name)


def _steps(out: Path) -> list[int]:
    checkpoints = out / "checkpoints"
    if not checkpoints.is_dir():
        return []
    return sorted(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit())


def _assert_one_line(result, disk: Path, path: Path | None = None) -> str:
    """``result`` failed with exit 1 in at most 3 stderr lines, the last naming ``path``
    (or a file under ``disk``) and the full disk; nothing temporary left. The last line."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) <= 3, lines
    assert "Traceback" not in result.stderr and "ERROR:" not in result.stderr, result.stderr
    assert "WARNING:absl" not in result.stderr, result.stderr
    if path is None:
        assert lines[-1].startswith(f"error: I/O error {disk}/"), lines
        assert lines[-1].endswith(f": {FULL}"), lines
    else:
        assert lines[-1] == f"error: I/O error {path}: {FULL}", lines
    assert _leftovers(disk) == []
    return lines[-1]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """The compilation cache the module's subprocesses share (on the real disk)."""
    return tmp_path_factory.mktemp("cache")


# ------------------------------------------------------------------ cheap, in-process
def test_the_os_error_a_tensorstore_message_names(tmp_path):
    message = (
        'RESOURCE_EXHAUSTED: Error writing local file "/x/6.orbax-checkpoint-tmp/a": Failed '
        "to write 374 bytes to file 19: No space left on device [os_error_code='28']"
    )
    err = write_error(ValueError(message), tmp_path / "6")
    assert (err.errno, err.strerror, err.filename) == (28, FULL, str(tmp_path / "6"))
    err = write_error(RuntimeError("no code"), tmp_path / "6")
    assert err.strerror == "cannot write this training checkpoint (RuntimeError: no code)"


def test_a_save_quiets_only_the_writes_a_failure_cancels(monkeypatch):
    """While a save runs (in the background, for the whole training between saves) the
    unraisable "Event loop is closed" of its cancelled writes is dropped; any other
    unraisable error still reaches the hook that was there."""
    import sys
    import types

    from ppage_jax.train.run.checkpoint import _quiet_save

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    closed = types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"))
    other = types.SimpleNamespace(exc_value=ValueError("a user's __del__ failed"))
    with _quiet_save():
        sys.unraisablehook(closed)
        sys.unraisablehook(other)
    assert seen == [other] and sys.unraisablehook == seen.append


@pytest.fixture(scope="module")
def tiny_tc(tmp_path_factory):
    return make_train_config(pj.load_config(write_run_config(tmp_path_factory.mktemp("t") / "t")))


def test_a_checkpoint_that_does_not_fit_is_one_quiet_error(disk, tiny_tc, capfd):
    """Orbax's threads fail on the full tmpfs and print nothing; the first checkpoint
    (64 KB of random numbers) stays the newest, the second (400 KB) is one OSError naming
    it."""
    checkpoints = TrainingCheckpoints(disk / "checkpoints", tiny_tc, every=2)
    metrics = {"active": np.ones((1, 2), bool)}
    numbers = np.random.default_rng(0).random(50_000)
    checkpoints.save(2, {"x": numbers[:8_000]}, metrics, False, 1)
    checkpoints.wait()  # a save commits in the background: complete once waited for
    assert checkpoints.last_update == 2
    with pytest.raises(OSError) as err:
        checkpoints.save(4, {"x": numbers}, metrics, False, 1)
        checkpoints.wait()  # its write error comes when it completes
    assert (err.value.errno, err.value.filename) == (28, str(disk / "checkpoints" / "4"))
    assert checkpoints.steps() == [2] and _leftovers(disk) == []
    assert capfd.readouterr() == ("", "")
    checkpoints.close()


@pytest.mark.slow  # compiles an episode
def test_render_into_a_full_disk_is_one_line(disk, capsys):
    out = disk / "episode.gif"
    _fill(disk)
    assert main(["render", "configs/1v1", "--out", str(out), "--max-steps", "3"]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: I/O error {out}: {FULL}\n"
    assert not out.exists() and _leftovers(disk) == []


# ------------------------------------------------------------------ slow: whole commands
@pytest.mark.slow  # trains the tiny run in a subprocess
def test_a_run_whose_first_checkpoint_does_not_fit(disk, cache, tmp_path):
    out = disk / "run"
    _fill(disk, leave=40 * 1024)  # config.yaml and the lock fit, no checkpoint does
    config = write_run_config(tmp_path / "tiny")
    result = run_cli(["run", str(config), "--out", str(out), "--no-progress"], cli_env(cache))
    _assert_one_line(result, disk, out / "checkpoints" / "2")
    assert _steps(out) == [] and sorted(os.listdir(out)) == ["checkpoints", "config.yaml"]


@pytest.mark.slow  # trains the tiny run in a subprocess, then resumes it
def test_a_disk_that_fills_between_checkpoints_keeps_the_previous_one(disk, cache, tmp_path):
    """The first checkpoints fit on the empty 300 KB tmpfs, a later one does not; after
    the tmpfs is grown, --resume continues from the newest one kept and finishes."""
    out = disk / "run"
    config = write_run_config(tmp_path / "tiny")
    result = run_cli(["run", str(config), "--out", str(out), "--no-progress"], cli_env(cache))
    line = _assert_one_line(result, disk)
    failed = int(line.split(f"{out / 'checkpoints'}/")[1].split(":")[0])
    kept = _steps(out)
    assert kept and kept == [s for s in (failed - 4, failed - 2) if s > 0], (line, kept)
    assert LOCK_FILE not in os.listdir(out)
    remount = ["mount", "-o", "remount,size=8m", str(disk)]
    assert subprocess.run(remount, capture_output=True).returncode == 0
    resumed = run_cli(["run", "--resume", str(out), "--no-progress"], cli_env(cache))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {out} from update {kept[-1]}" in resumed.stdout
    assert (out / "summary.json").is_file() and _leftovers(disk) == []


@pytest.mark.slow  # a sweep in a subprocess
def test_a_sweep_on_a_full_disk_is_one_line(disk, cache, tmp_path):
    out = disk / "sweep"
    _fill(disk, leave=24 * 1024)  # room for a few chunk files, not for every commit
    sweep = write_sweep_file(tmp_path / "sweep.yaml")
    result = run_cli(["sweep", str(sweep), "--output", str(out), "--no-progress"], cli_env(cache))
    _assert_one_line(result, disk)
    assert LOCK_FILE not in os.listdir(out)


@pytest.mark.slow  # a search in a subprocess
def test_a_search_on_a_full_disk_is_one_line(disk, cache, tmp_path):
    out = disk / "search"
    _fill(disk, leave=24 * 1024)  # room for the manifest, not for a generation's files
    search = write_search_file(tmp_path / "search.yaml")
    result = run_cli(["search", str(search), "--out", str(out), "--no-progress"], cli_env(cache))
    _assert_one_line(result, disk)
    assert LOCK_FILE not in os.listdir(out)


@pytest.mark.slow  # a run in a subprocess
def test_a_run_on_a_full_disk_fails_at_its_lock(disk, cache, tmp_path):
    out = disk / "run"
    out.mkdir()
    _fill(disk)
    config = write_run_config(tmp_path / "tiny")
    result = run_cli(["run", str(config), "--out", str(out), "--no-progress"], cli_env(cache))
    _assert_one_line(result, disk, out / LOCK_FILE)
    assert os.listdir(out) == []
