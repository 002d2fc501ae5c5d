"""Fault injection: `ppage-jax run` and `ppage-jax sweep` killed (SIGKILL) at named points
or interrupted (SIGINT), then resumed, end with exactly the files of an uninterrupted run.

Each scenario is a subprocess started with ``PPAGE_JAX_FAULT=<point>`` (the process signals
itself there), then ``--resume`` in a second subprocess. The scenarios the selected tests need
run a few at a time and share one compilation cache; the compile-time kills run without it
(so the kill lands in XLA) and the resume with it. Every scenario trains in subprocesses,
so the module is in the slow set (``pytest -m slow tests/cli/test_faults.py``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_testing import (
    RUN_UPDATES,
    SWEEP_CHUNKS,
    cli_env,
    run_cli,
    start_cli,
    write_run_config,
    write_sweep_file,
)

from ppage_jax.artifacts import LOCK_FILE, PARTIAL

# Every scenario kills and resumes whole CLI runs: the module is in the slow set.
pytestmark = pytest.mark.slow

KILLED = -signal.SIGKILL
INTERRUPTED = 130
RUN_POINTS = ("compile", "chunk:3", "checkpoint:2", "eval", "write:summary.json")
SWEEP_POINTS = ("compile", "chunk:2", "commit:2", "write:results.csv", "write:report.md")
CTRL_C = {"run": "chunk:3@INT", "sweep": "chunk:2@INT"}
# A full disk (an injected ENOSPC) at each writer: (kind, point, the path named).
FULL_DISK = (
    ("run", "checkpoint:2@ENOSPC", "checkpoints/4"),
    ("run", "write:metrics.csv@ENOSPC", "metrics.csv"),
    ("run", "write:checkpoint.msgpack@ENOSPC", "checkpoint.msgpack"),
    ("run", "write:episode.gif@ENOSPC", "episode.gif"),
    ("run", "write:summary.json@ENOSPC", "summary.json"),
    ("sweep", "write:report.md@ENOSPC", "report.md"),
)
# Killed right after a checkpoint or chunk commit; Ctrl-C (chunk:N@INT) stops there too.
BETWEEN = "between:1"


@dataclasses.dataclass
class Outcome:
    """A faulted process, what it left on disk, and its resume."""

    out: Path
    first: object  # CompletedProcess of the faulted run
    left: dict  # what was on disk after it
    resumed: object  # CompletedProcess of the resume


def _run_left(out: Path) -> dict:
    checkpoints = out / "checkpoints"
    entries = sorted(p.name for p in checkpoints.iterdir()) if checkpoints.is_dir() else []
    return {
        "files": sorted(p.name for p in out.iterdir()) if out.is_dir() else [],
        "steps": sorted(int(n) for n in entries if n.isdigit()),
        "partial_checkpoints": [n for n in entries if "tmp" in n],
    }


def _sweep_left(out: Path) -> dict:
    manifest = json.loads((out / "manifest.json").read_text())
    results = out / "results.csv"
    rows = list(csv.DictReader(results.open())) if results.is_file() else None
    return {
        "files": sorted(p.name for p in out.iterdir()),
        "chunk_size": manifest["chunk_size"],
        "finished": sorted(int(i) for i in manifest["chunks"]),
        "chunk_files": sorted(p.name for p in (out / "chunks").iterdir()),
        "result_runs": None if rows is None else sorted({(r["arm"], r["seed"]) for r in rows}),
    }


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """``(references, scenario, cache)``: the uninterrupted run and sweep directories and
    ``scenario(kind, point) -> Outcome``."""
    tmp = tmp_path_factory.mktemp("faults")
    cache = tmp / "jax-cache"
    config = write_run_config(tmp / "tiny")
    sweep = write_sweep_file(tmp / "sweep.yaml")

    def run_args(out):
        return ["run", str(config), "--out", str(out), "--no-progress"]

    def sweep_args(out):
        return ["sweep", str(sweep), "--output", str(out), "--no-progress"]

    def reference(kind):
        out = tmp / f"{kind}-reference"
        args = run_args(out) if kind == "run" else sweep_args(out)
        done = run_cli(args, cli_env(cache))
        assert done.returncode == 0, done.stderr
        return out

    def scenario(kind, point):
        out = tmp / f"{kind}-{point.replace(':', '-').replace('@', '-')}"
        args = run_args(out) if kind == "run" else sweep_args(out)
        first = run_cli(args, cli_env(cache, point, cache=not point.startswith("compile")))
        left = _run_left(out) if kind == "run" else _sweep_left(out)
        resume = ["run", "--resume", str(out)] if kind == "run" else ["sweep", "--resume", str(out)]
        resumed = run_cli([*resume, "--no-progress"], cli_env(cache))
        return Outcome(out, first, left, resumed)

    with ThreadPoolExecutor(max_workers=2) as pool:
        references = dict(zip(("run", "sweep"), pool.map(reference, ("run", "sweep")), strict=True))
    return references, scenario, cache


def _job(item: pytest.Item) -> tuple[str, str] | None:
    """The (kind, point) scenario a selected test of this module reads, if any."""
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    if "full_disk" in params:
        return params["full_disk"][:2]
    if "point" in params:
        return ("sweep" if "_sweep_" in item.originalname else "run", params["point"])
    if "kind" in params:
        return params["kind"], CTRL_C[params["kind"]]
    return None


@pytest.fixture(scope="module")
def matrix(faults, request):
    """The scenarios the selected tests of this module need, run three at a time:
    ``(references, outcomes, cache)``."""
    references, scenario, cache = faults
    module = request.node.module
    jobs = [
        job
        for item in request.session.items
        if getattr(item, "module", None) is module and (job := _job(item))
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = dict(zip(jobs, pool.map(lambda job: scenario(*job), jobs), strict=True))
    return references, outcomes, cache


def _assert_resumed_like(reference: Path, outcome: Outcome, names: tuple[str, ...]) -> None:
    assert outcome.resumed.returncode == 0, outcome.resumed.stderr
    assert "Traceback" not in outcome.resumed.stderr
    for name in names:
        assert (outcome.out / name).read_bytes() == (reference / name).read_bytes(), name
    assert not list(outcome.out.rglob("*.partial-*"))  # no temporary file left


@pytest.mark.parametrize("point", RUN_POINTS)
def test_killed_run_resumes_to_the_same_metrics_and_parameters(matrix, point):
    references, outcomes, _ = matrix
    outcome = outcomes["run", point]
    assert outcome.first.returncode == KILLED, outcome.first.stderr
    left = outcome.left
    # what the kill left: never a half-written file, only complete checkpoints
    expected = {
        # the lock file stays (an flock, released when the process died)
        "compile": lambda: left["files"] == [LOCK_FILE, "config.yaml"] and left["steps"] == [],
        "chunk:3": lambda: left["steps"] == [2],
        "checkpoint:2": lambda: left["steps"] == [2] and left["partial_checkpoints"],
        "eval": lambda: (
            left["steps"] == [RUN_UPDATES - 2, RUN_UPDATES]
            and "metrics.csv" in left["files"]
            and "summary.json" not in left["files"]
        ),
        "write:summary.json": lambda: (
            "summary.json" not in left["files"]
            and any(f.startswith(".summary.json.partial-") for f in left["files"])
        ),
    }[point]
    assert expected(), left
    restored = (
        0 if point == "compile" else RUN_UPDATES if point in ("eval", "write:summary.json") else 2
    )
    assert outcome.resumed.stdout.startswith(
        f"resuming {outcome.out} from " + (f"update {restored}" if restored else "the start")
    )
    _assert_resumed_like(references["run"], outcome, ("metrics.csv", "checkpoint.msgpack"))
    summary = json.loads((outcome.out / "summary.json").read_text())
    reference = json.loads((references["run"] / "summary.json").read_text())
    assert summary["evaluation"] == reference["evaluation"]
    assert summary["resumed_from_update"] == restored


@pytest.mark.parametrize("point", SWEEP_POINTS)
def test_killed_sweep_resumes_to_the_same_results(matrix, point):
    references, outcomes, _ = matrix
    outcome = outcomes["sweep", point]
    assert outcome.first.returncode == KILLED, outcome.first.stderr
    left = outcome.left
    first_chunk = [("base_only", "0")]
    expected = {
        "compile": lambda: left["chunk_size"] is None and left["result_runs"] is None,
        "chunk:2": lambda: left["finished"] == [0] and left["result_runs"] == first_chunk,
        # chunk 1's rows are on disk but not committed: results.csv does not show them
        "commit:2": lambda: (
            left["finished"] == [0]
            and "00001.results.csv" in left["chunk_files"]
            and left["result_runs"] == first_chunk
        ),
        "write:results.csv": lambda: left["finished"] == [0] and left["result_runs"] is None,
        "write:report.md": lambda: (
            left["finished"] == list(range(SWEEP_CHUNKS)) and "report.md" not in left["files"]
        ),
    }[point]
    assert expected(), left
    _assert_resumed_like(references["sweep"], outcome, ("results.csv", "curves.csv"))
    resumed_chunks = len(left["finished"])
    assert f"4 chunk(s) of 1, {resumed_chunks} resumed" in outcome.resumed.stdout
    assert (outcome.out / "report.md").is_file()


@pytest.mark.parametrize("kind", ["run", "sweep"])
def test_ctrl_c_stops_between_chunks_and_prints_the_resume_command(matrix, kind):
    references, outcomes, _ = matrix
    outcome = outcomes[kind, CTRL_C[kind]]
    first = outcome.first
    assert first.returncode == INTERRUPTED, first.stderr
    assert "Traceback" not in first.stderr
    last = first.stderr.strip().splitlines()[-1]
    assert last.endswith(f"resume with: ppage-jax {kind} --resume {outcome.out}")
    if kind == "run":  # the chunk that was running finished and was checkpointed
        assert "kept checkpoint of update 3" in last and outcome.left["steps"] == [2, 3]
        _assert_resumed_like(references["run"], outcome, ("metrics.csv", "checkpoint.msgpack"))
    else:
        assert "kept 2 finished chunk(s) (2 of 4 runs)" in last
        assert outcome.left["finished"] == [0, 1]
        _assert_resumed_like(references["sweep"], outcome, ("results.csv", "curves.csv"))


def test_ctrl_c_during_compile_exits_130_without_a_traceback(matrix, tmp_path):
    _, _, cache = matrix
    config = write_run_config(tmp_path / "tiny")
    out = tmp_path / "run"
    process = start_cli(
        ["run", str(config), "--out", str(out), "--no-progress"], cli_env(cache, cache=False)
    )
    for line in process.stdout:  # printed just before training starts
        if line.startswith("training iql"):
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == INTERRUPTED, stderr
    assert "Traceback" not in stderr and "Segmentation" not in stderr
    assert "Ctrl-C: stopping after the current chunk" in stderr
    assert stderr.strip().splitlines()[-1].endswith(f"resume with: ppage-jax run --resume {out}")


def test_killed_between_chunks_resumes(faults):
    references, scenario, _ = faults
    run = scenario("run", BETWEEN)
    assert run.first.returncode == KILLED and run.left["steps"] == [2]
    _assert_resumed_like(references["run"], run, ("metrics.csv", "checkpoint.msgpack"))
    sweep = scenario("sweep", BETWEEN)
    assert sweep.first.returncode == KILLED and sweep.left["finished"] == [0]
    _assert_resumed_like(references["sweep"], sweep, ("results.csv", "curves.csv"))


@pytest.mark.parametrize(
    "full_disk",
    FULL_DISK,
    ids=[case[1] for case in FULL_DISK],
)
def test_a_full_disk_is_one_line_and_exit_1_and_resumes(matrix, full_disk):
    kind, point, name = full_disk
    references, outcomes, _ = matrix
    outcome = outcomes[kind, point]
    first = outcome.first
    assert first.returncode == 1, first.stderr
    assert "Traceback" not in first.stderr
    lines = first.stderr.strip().splitlines()
    assert lines[-1] == f"error: I/O error {outcome.out / name}: No space left on device"
    if kind == "run":
        assert len(lines) == 1, lines
        # the checkpoints before it intact, no temporary folder or file left
        expected_steps = [2] if point.startswith("checkpoint") else [RUN_UPDATES - 2, RUN_UPDATES]
        assert outcome.left["steps"] == expected_steps, outcome.left
        assert outcome.left["partial_checkpoints"] == []
        assert name not in outcome.left["files"] and not any(
            PARTIAL in f for f in outcome.left["files"]
        )
        _assert_resumed_like(references["run"], outcome, ("metrics.csv", "checkpoint.msgpack"))
    else:
        assert "report.md" not in outcome.left["files"]
        _assert_resumed_like(references["sweep"], outcome, ("results.csv", "curves.csv"))


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_a_second_resume_of_a_running_run_is_one_line_and_exit_2(faults, tmp_path):
    """The first --resume holds the run's lock (it stops itself, SIGSTOP, after its first
    chunk); a second --resume is refused in one line naming the first one's PID, and the
    first, continued, ends with the files of an uninterrupted run."""
    references, _, cache = faults
    config = write_run_config(tmp_path / "tiny")
    out = tmp_path / "run"
    killed = run_cli(
        ["run", str(config), "--out", str(out), "--no-progress"], cli_env(cache, "chunk:3")
    )
    assert killed.returncode == KILLED, killed.stderr
    first = start_cli(
        ["run", "--resume", str(out), "--no-progress"], cli_env(cache, "chunk:1@STOP")
    )
    try:
        deadline = time.monotonic() + 240
        while not _stopped(first.pid):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        assert (out / ".lock").read_text().strip() == str(first.pid)
        second = run_cli(["run", "--resume", str(out), "--no-progress"], cli_env(cache))
    finally:
        first.send_signal(signal.SIGCONT)
    stdout, stderr = first.communicate(timeout=300)
    assert second.returncode == 2, second.stderr
    assert second.stderr.strip().splitlines() == [
        f"error: run directory {out} is in use by another ppage-jax process (PID "
        f"{first.pid}, lock {out / '.lock'}); wait for it to finish or stop it"
    ]
    assert first.returncode == 0, stderr
    for name in ("metrics.csv", "checkpoint.msgpack"):
        assert (out / name).read_bytes() == (references["run"] / name).read_bytes(), name
    assert not (out / ".lock").exists()
