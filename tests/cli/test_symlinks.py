"""A symbolic link placed in an output directory never makes ppage-jax open, truncate or
delete a file outside it: the directory lock refuses a ``.lock`` that is a link (or not a
regular file of its own) in one line, every atomic writer replaces a link at its file's
name and leaves the link's target as it was, and the training checkpoint folder and the
TensorBoard folder are refused when they are links."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_testing import write_run_config, write_sweep_file
from search_testing import write_search_file

import ppage_jax as pj
from ppage_jax.artifacts import (
    LOCK_FILE,
    PARTIAL,
    DirectoryLock,
    OutputError,
    atomic_open,
    clear_output,
    save_figure,
    write_bytes,
    write_json,
    write_text,
)
from ppage_jax.cli.main import main
from ppage_jax.train import make_train_config
from ppage_jax.train.run import report
from ppage_jax.train.run.checkpoint import CheckpointError, TrainingCheckpoints

PRECIOUS = b"precious data line\n"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside the output directory ``tmp_path / "out"`` (created empty)."""
    (tmp_path / "out").mkdir()
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(PRECIOUS)
    return target


def _error(capsys) -> str:
    """The one line a refused command wrote to stderr (after any banner line)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def _link_refusal(directory: Path, what: str, problem: str = "a symbolic link") -> str:
    return (
        f"cannot lock {what} {directory}: {directory / LOCK_FILE} is {problem}, not a lock "
        f"file; remove it (a lock is a regular file ppage-jax creates)"
    )


# ------------------------------------------------------------------ the directory lock
@pytest.mark.parametrize("kind", ["link", "dangling link", "hard link", "fifo"])
def test_a_lock_that_is_not_a_regular_file_of_its_own_is_refused(tmp_path, outside, kind):
    out = tmp_path / "out"
    lock = out / LOCK_FILE
    missing = outside.with_name("not-there")
    if kind == "link":
        lock.symlink_to(outside)
    elif kind == "dangling link":
        lock.symlink_to(missing)
    elif kind == "hard link":
        os.link(outside, lock)
    else:
        os.mkfifo(lock)
    problems = {"hard link": "a hard link", "fifo": "not a regular file"}
    problem = problems.get(kind, "a symbolic link")
    with pytest.raises(OutputError) as err:
        DirectoryLock(out, "run directory").acquire()
    assert str(err.value) == _link_refusal(out, "run directory", problem)
    assert outside.read_bytes() == PRECIOUS and not missing.exists()
    assert os.path.lexists(lock)  # refused, not removed


def test_release_removes_only_the_lock_file_it_created(tmp_path, outside):
    out = tmp_path / "out"
    lock = DirectoryLock(out, "run directory").acquire()
    assert (out / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    lock.release()
    assert not os.path.lexists(out / LOCK_FILE)
    for replacement in ("file", "link"):
        lock = DirectoryLock(out, "run directory").acquire()
        os.unlink(out / LOCK_FILE)
        if replacement == "file":
            (out / LOCK_FILE).write_bytes(b"someone else's\n")
        else:
            (out / LOCK_FILE).symlink_to(outside)
        lock.release()  # the file in its place is not the one it created: left alone
        assert os.path.lexists(out / LOCK_FILE)
        assert outside.read_bytes() == PRECIOUS
        os.unlink(out / LOCK_FILE)


@pytest.mark.parametrize("command", ["run", "run --resume", "sweep", "search"])
def test_every_command_refuses_a_lock_link_in_one_line(tmp_path, outside, capsys, command):
    out = tmp_path / "out"
    (out / LOCK_FILE).symlink_to(outside)
    what = {"sweep": "sweep directory", "search": "search directory"}.get(command, "run directory")
    if command == "run":
        argv = ["run", str(write_run_config(tmp_path / "tiny")), "--out", str(out)]
    elif command == "run --resume":
        (out / report.CONFIG_FILE).write_text("# a run's config\n")
        argv = ["run", "--resume", str(out)]
    elif command == "sweep":
        argv = ["sweep", str(write_sweep_file(tmp_path / "sweep.yaml")), "--output", str(out)]
    else:
        argv = ["search", str(write_search_file(tmp_path / "search.yaml")), "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 2
    assert _error(capsys) == "error: " + _link_refusal(out, what)
    assert outside.read_bytes() == PRECIOUS
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [LOCK_FILE] + ([report.CONFIG_FILE] if command == "run --resume" else [])
    )


# ------------------------------------------------------------------ the atomic writers
@pytest.fixture(scope="module")
def tiny_tc(tmp_path_factory):
    config = pj.load_config(write_run_config(tmp_path_factory.mktemp("tiny") / "tiny"))
    return config, make_train_config(config)


def _figure(path: Path) -> None:
    from ppage_jax.viz import figures as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    save_figure(fig, path)


def _record():
    from ppage_jax.viz.inspector import EpisodeRecord

    return EpisodeRecord(
        size=2,
        agent_names=("predator_1", "prey_1"),
        is_predator=np.array([1, 0], bool),
        term_names=("base",),
        obstacle_map=np.zeros((2, 2), bool),
        positions=np.zeros((2, 2, 2), int),
        captured=np.zeros((2, 2), bool),
        reward_terms=np.zeros((1, 2, 1), np.float32),
    )


def _write(name: str, directory: Path, tiny) -> None:
    """Write the artifact ``name`` into ``directory`` with the writer the run uses."""
    from ppage_jax.train.run.checkpoint import save_checkpoint
    from ppage_jax.viz.frames import write_gif
    from ppage_jax.viz.inspector import write_record_html

    config, tc = tiny
    if name == report.CONFIG_FILE:
        report.write_config(directory, config)
    elif name == report.METRICS_FILE:
        report.write_metrics(directory, [{"seed": 0, "update": 1, "capture_rate": 0.5}])
    elif name == report.SUMMARY_FILE:
        report.write_summary(directory, {"config_hash": tc.config_hash})
    elif name == report.CHECKPOINT_FILE:
        from train_testing import untrained_policies

        save_checkpoint(directory / name, tc, untrained_policies(tc))
    elif name.endswith(".png"):
        _figure(directory / name)
    elif name == "episode.gif":
        write_gif(directory / name, np.zeros((2, 8, 8, 3), np.uint8))
    elif name == "episode.html":
        write_record_html(directory / name, _record())
    elif name == "notes.txt":
        write_text(directory / name, "text")
    elif name == "data.bin":
        write_bytes(directory / name, b"bytes")
    elif name == "data.json":
        write_json(directory / name, {"a": 1})
    else:
        with atomic_open(directory / name) as handle:
            handle.write("opened")


WRITTEN = (
    *report.ARTIFACTS,  # config.yaml, metrics.csv, checkpoint.msgpack, summary.json, figures
    "episode.gif",
    "episode.html",
    "notes.txt",  # write_text
    "data.bin",  # write_bytes
    "data.json",  # write_json
    "opened.csv",  # atomic_open
)


@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling link"])
@pytest.mark.parametrize("name", WRITTEN)
def test_a_writer_replaces_a_link_and_leaves_its_target(tmp_path, outside, tiny_tc, name, dangling):
    out = tmp_path / "out"
    missing = outside.with_name("not-there")
    (out / name).symlink_to(missing if dangling else outside)
    _write(name, out, tiny_tc)
    assert outside.read_bytes() == PRECIOUS and not missing.exists()
    assert (out / name).is_file() and not (out / name).is_symlink()
    assert os.listdir(out) == [name]  # no temporary file left
    assert os.listdir(outside.parent) == [outside.name]


def test_overwrite_removes_links_and_never_follows_them(tmp_path, outside):
    out = tmp_path / "out"
    folder = tmp_path / "elsewhere" / "folder"
    folder.mkdir()
    (folder / "kept").write_bytes(PRECIOUS)
    (out / report.METRICS_FILE).symlink_to(outside)
    (out / report.SUMMARY_FILE).symlink_to(outside.with_name("not-there"))  # dangling
    (out / report.TRAINING_CHECKPOINTS).symlink_to(folder)
    names = report.run_files(out)
    assert names == [report.METRICS_FILE, report.SUMMARY_FILE, report.TRAINING_CHECKPOINTS]
    with pytest.raises(OutputError, match=r"\(metrics.csv, summary.json, checkpoints\)"):
        clear_output(out, names, "run", False, "--resume")
    clear_output(out, names, "run", True, "--resume")
    assert os.listdir(out) == []
    assert outside.read_bytes() == PRECIOUS and (folder / "kept").read_bytes() == PRECIOUS


# ------------------------------------------------------------------ folders
@pytest.mark.parametrize("where", ["folder", "entry"])
def test_a_linked_checkpoint_folder_is_refused(tmp_path, outside, tiny_tc, where):
    out = tmp_path / "out"
    folder = outside.parent / "folder"
    folder.mkdir()
    checkpoints = out / report.TRAINING_CHECKPOINTS
    if where == "folder":
        checkpoints.symlink_to(folder)
        link = checkpoints
    else:
        checkpoints.mkdir()
        link = checkpoints / "2"
        link.symlink_to(folder)
    saved = TrainingCheckpoints(checkpoints, tiny_tc[1], every=2)
    message = (
        f"{link.absolute()} is a symbolic link; training checkpoints are written only into a "
        f"real folder of the run directory (remove the link)"
    )
    with pytest.raises(CheckpointError) as err:
        saved.steps()
    assert str(err.value) == message
    with pytest.raises(CheckpointError):
        saved.save(2, {"x": np.zeros(2)}, {"active": np.zeros((1, 1), bool)}, False, 1)
    assert os.listdir(folder) == [] and outside.read_bytes() == PRECIOUS


def test_resume_refuses_a_linked_checkpoint_folder_in_one_line(tmp_path, outside, capsys):
    out = tmp_path / "out"
    config = pj.load_config(write_run_config(tmp_path / "tiny"))
    write_text(out / report.CONFIG_FILE, config.to_yaml())
    folder = outside.parent / "folder"
    folder.mkdir()
    (out / report.TRAINING_CHECKPOINTS).symlink_to(folder)
    assert main(["run", "--resume", str(out), "--no-progress"]) == 2
    assert _error(capsys) == (
        f"error: {(out / report.TRAINING_CHECKPOINTS).absolute()} is a symbolic link; training "
        f"checkpoints are written only into a real folder of the run directory (remove the link)"
    )
    assert os.listdir(folder) == []


def test_a_linked_tensorboard_folder_is_refused(tmp_path, outside):
    pytest.importorskip("tensorboardX")
    from ppage_jax.tracking.loggers import open_logger
    from ppage_jax.tracking.tensorboard import TENSORBOARD_DIR

    out = tmp_path / "out"
    (out / TENSORBOARD_DIR).symlink_to(outside.parent)
    with pytest.raises(OutputError) as err:
        open_logger(["tensorboard"], out, "seed_0", "g", {})
    assert str(err.value) == (
        f"TensorBoard folder 'tensorboard' would write outside {out} (through '..', an "
        f"absolute path or a symbolic link); refused"
    )
    assert os.listdir(outside.parent) == [outside.name]


# ------------------------------------------------------------------ a whole run
@pytest.mark.slow  # trains the tiny run through the CLI
def test_a_resumed_run_writes_through_no_link(tmp_path, outside, capsys):
    """A run stopped after its first update, every artifact's name then a link to a file
    outside (summary.json's dangling: one that exists marks the run complete); the resume
    writes each artifact in the directory and no byte outside it."""
    out = tmp_path / "out"
    shutil.rmtree(out)
    config = write_run_config(tmp_path / "tiny")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PPAGE_JAX_FAULT", "chunk:1@INT")
        assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 130
    names = [n for n in report.RUN_FILES if n not in (report.CONFIG_FILE, "checkpoints")]
    targets = {}
    for name in names:
        targets[name] = outside.with_name(f"{name}.outside")
        if name != report.SUMMARY_FILE:
            targets[name].write_bytes(PRECIOUS)
        (out / name).symlink_to(targets[name])
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--no-progress"]) == 0
    assert not targets.pop(report.SUMMARY_FILE).exists()
    for name in names:
        assert name not in targets or targets[name].read_bytes() == PRECIOUS, name
        assert (out / name).is_file() and not (out / name).is_symlink(), name
    assert json.loads((out / report.SUMMARY_FILE).read_text())["resumed_from_update"] == 1
    assert not any(PARTIAL in p.name for p in out.iterdir())


def test_a_resumed_sweep_refuses_a_linked_chunk_folder(tmp_path, outside):
    from ppage_jax.analysis.sweep.writer import CHUNKS, SweepWriter

    out = tmp_path / "out"
    identity = {"runs": []}
    SweepWriter(out, {}, identity)
    shutil.rmtree(out / CHUNKS)
    (out / CHUNKS).symlink_to(outside.parent)
    with pytest.raises(OutputError) as err:
        SweepWriter(out, {}, identity, resume=True)
    assert str(err.value) == (
        f"chunk folder 'chunks' would write outside {out} (through '..', an absolute path or "
        f"a symbolic link); refused"
    )
    assert os.listdir(outside.parent) == [outside.name]
