"""The prepared accelerator check runs end to end on the CPU in its reduced mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # the whole script at tiny sizes: a few minutes
def test_the_device_check_runs_in_its_cpu_smoke_mode(tmp_path):
    out = tmp_path / "check"
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PYTHON=sys.executable, PATH=f"{bin_dir}:{os.environ['PATH']}")
    done = subprocess.run(
        [str(REPO / "benchmarks" / "device_check.sh"), "--cpu-smoke", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "device.json").read_text())["platform"] == "cpu"
    bench = json.loads((out / "bench.json").read_text())
    assert bench and (out / "train_throughput.json").is_file()
    assert (out / "study" / "report.md").is_file()
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# Device check (CPU smoke)\n")
    assert "## Training throughput" in summary and "## Reduced reward-design study" in summary
