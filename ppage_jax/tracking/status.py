"""Status lines: what a long phase without a progress bar is doing (the monitor's untrained
run, the audit, compiling, evaluating, drawing), printed at once so that no phase of a
command is silent."""

from __future__ import annotations

import sys


def status(message: str, stderr: bool = False) -> None:
    """``... message`` on stdout (or stderr, where stdout carries JSON), flushed."""
    print(f"... {message}", file=sys.stderr if stderr else sys.stdout, flush=True)
