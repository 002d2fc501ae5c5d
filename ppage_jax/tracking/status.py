"""Status lines: what a long phase without a progress bar is doing (the monitor's untrained
run, the audit, compiling, evaluating, drawing), printed at once so that no phase of a
command is silent. On a terminal, :func:`phase` also shows the seconds a phase has taken,
every :data:`TICK_SECONDS`, and :func:`refreshing` redraws a progress bar as often while a
compiled chunk runs (a bar redraws only when it is updated)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# How often a running phase's seconds and a waiting progress bar are redrawn on a terminal.
TICK_SECONDS = 2.0


def status(message: str, stderr: bool = False) -> None:
    """``... message`` on stdout (or stderr, where stdout carries JSON), flushed."""
    print(f"... {message}", file=sys.stderr if stderr else sys.stdout, flush=True)


@contextlib.contextmanager
def ticking(tick: Callable[[float], Any], every: float = TICK_SECONDS) -> Iterator[None]:
    """Call ``tick(seconds since the block began)`` every ``every`` seconds from a daemon
    thread while the block runs; the thread has stopped when the block ends. ``tick`` only
    draws: it reads no device value, so nothing waits on it."""
    start = time.perf_counter()
    done = threading.Event()

    def run() -> None:
        while not done.wait(every):
            try:
                tick(time.perf_counter() - start)
            except (OSError, ValueError):  # the terminal went away: stop drawing
                return

    thread = threading.Thread(target=run, name="ppage-jax status", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@contextlib.contextmanager
def phase(message: str, stderr: bool = False, every: float = TICK_SECONDS) -> Iterator[None]:
    """:func:`status` for a phase that prints nothing while it runs (a compile, an
    evaluation, the figures). On a terminal a short line under it counts the seconds, redrawn
    every ``every`` seconds, and is cleared when the block ends; in a log or a pipe there is
    the status line alone."""
    status(message, stderr)
    stream = sys.stderr if stderr else sys.stdout
    if not _is_terminal(stream):
        yield
        return
    shown = [0]

    def tick(seconds: float) -> None:
        text = f"    {seconds:.0f} s"
        stream.write("\r" + text.ljust(shown[0]))
        stream.flush()
        shown[0] = len(text)

    try:
        with ticking(tick, every):
            yield
    finally:
        if shown[0]:
            stream.write("\r" + " " * shown[0] + "\r")
            stream.flush()


@contextlib.contextmanager
def refreshing(bar: Any, every: float = TICK_SECONDS) -> Iterator[None]:
    """Redraw ``bar`` (a tqdm bar) every ``every`` seconds while the block runs, so that its
    elapsed time moves while the first compile or a long chunk runs; nothing for a disabled
    bar. End the block before closing the bar."""
    if getattr(bar, "disable", True):
        yield
        return
    with ticking(lambda _: bar.refresh(), every):
        yield
