"""What the learning benchmarks share: the evaluation fields they keep, CPU time, the
markdown cells of a censored time to capture, and the JSON they write (the scripts run as
``python benchmarks/<name>.py``, which puts this folder on ``sys.path``)."""

from __future__ import annotations

import json
import math
import resource
from pathlib import Path

from ppage_jax.train.run.report import json_safe

# The fields of an evaluation row (ppage_jax.train.run.evaluate) a benchmark keeps.
ROW_KEYS = (
    "capture_rate",
    "rmst",
    "rmst_ci",
    "km_median",
    "km_median_ci",
    "truncated_share",
    "steps_to_capture",
    "episodes",
)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all its threads) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fmt_turns(value, cap: int = 500) -> str:
    """A Kaplan-Meier median: ``>cap`` when the curve never reached one half."""
    return f">{cap}" if value is None or not math.isfinite(value) else f"{value:.0f}"


def rmst_cells(row: dict, truncated: bool = True, cap: int = 500) -> str:
    """``RMST [CI] | KM median | capture rate`` (and ``| hit the step limit``) cells."""
    low, high = row["rmst_ci"]
    out = (
        f"{row['rmst']:.1f} [{low:.1f}, {high:.1f}] | {fmt_turns(row['km_median'], cap)} | "
        f"{100 * row['capture_rate']:.1f} %"
    )
    return out + (f" | {100 * row['truncated_share']:.1f} %" if truncated else "")


def write_json(path: Path, results: dict) -> None:
    """``results`` as indented JSON (NumPy values made plain)."""
    path.write_text(json.dumps(json_safe(results), indent=2) + "\n")
