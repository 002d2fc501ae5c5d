"""No silent phase: a run of the default config (made tiny), its output read from a
pseudo-terminal as a user sees it, never goes more than :data:`MAX_SILENCE` seconds without a
new line, a redrawn bar or a status line's ticking seconds (a carriage return counts), from
the start of the process to its end, the first compile included (no compile cache)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

import pytest
from cli_testing import CLI, REPO

MAX_SILENCE = 10.0
# The default config, small: one IPPO seed on 16 grids, 6 updates of 32 turns in chunks,
# 32 held-out episodes; the reward-hacking monitor on (its untrained run is a phase too).
SETS = [
    "experiment.num_envs=16",
    f"experiment.total_timesteps={16 * 32 * 6}",
    "experiment.eval.episodes=32",
]


def _read_all(fd: int, process: subprocess.Popen, timeout: float) -> list[tuple[float, bytes]]:
    """(seconds since the start, bytes) for every read of the terminal's output."""
    start = time.perf_counter()
    reads = []
    while time.perf_counter() - start < timeout:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            reads.append((time.perf_counter() - start, data))
        elif process.poll() is not None:
            break
    return reads


@pytest.mark.slow  # a training run from a cold start
def test_a_run_in_a_terminal_is_never_silent_for_long(tmp_path):
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PPAGE_JAX_COMPILE_CACHE="0")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    args = ["run", "configs/default", "--out", str(tmp_path / "run")]
    args += [flag for value in SETS for flag in ("--set", value)]
    process = subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=REPO,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    try:
        reads = _read_all(leader, process, timeout=900)
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    assert process.wait(timeout=60) == 0, b"".join(d for _, d in reads)[-3000:].decode()
    text = b"".join(d for _, d in reads).decode(errors="replace")
    assert "summary" in text or "run directory:" in text
    # an update: any output holding a new line or a carriage return (a bar redraw)
    times = [0.0] + [t for t, d in reads if b"\n" in d or b"\r" in d]
    gaps = [(b - a, a) for a, b in zip(times, times[1:], strict=False)]
    longest, at = max(gaps)
    assert longest <= MAX_SILENCE, (
        f"{longest:.1f} s without output from {at:.1f} s on; the output:\n{text[-3000:]}"
    )
