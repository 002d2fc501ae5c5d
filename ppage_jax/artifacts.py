"""Crash-safe output files, output-path checks and the fault-injection hook.

Every artifact (configs, metrics, checkpoints, summaries, plots, GIFs, pages, sweep results and
reports) is written through :func:`atomic_path`: the bytes go to a hidden temporary file in
the target's directory (same suffix, so writers that infer the format from it still work),
are flushed to disk, and then replace the target in one ``os.replace``. A reader, a crash or
a kill therefore sees the old file or the new one, never a half-written one; a killed writer
leaves at most a ``.NAME.partial-*`` file, which :func:`remove_partial_files` deletes.

:func:`prepare_output_dir` and :func:`check_output_file` check output paths before any long
work starts and raise :class:`OutputError` with one line naming the path and the problem.

:func:`fault` is a testing hook: when the environment variable ``PPAGE_JAX_FAULT`` names a
point (``chunk:2``, ``write:summary.json``, ...), the process sends itself SIGKILL there (or
the signal after ``@``: ``chunk:2@INT``). The command line and the training and sweep
drivers call it at the points the fault-injection tests kill.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

PARTIAL = ".partial-"
FAULT_ENV = "PPAGE_JAX_FAULT"


class OutputError(Exception):
    """An output path that cannot be used; the message is one line naming it and why."""


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_MODE = _file_mode()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix) to write to; when the block ends
    without an error it is flushed to disk and renamed over ``path``, otherwise removed."""
    path = Path(path)
    fd, name = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}{PARTIAL}", suffix=path.suffix
    )
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, _MODE)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        fault(f"write:{path.name}")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """``open(path, mode)`` through :func:`atomic_path` (the file appears when closed)."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as handle:
        yield handle


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically; returns the path."""
    with atomic_open(path, "w", encoding=encoding) as handle:
        handle.write(text)
    return Path(path)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any, **dump_kwargs: Any) -> Path:
    """``json.dump(obj)`` to ``path`` atomically, with a final newline; returns the path."""
    return write_text(path, json.dumps(obj, **dump_kwargs) + "\n")


def save_figure(fig: Any, path: str | os.PathLike, **savefig_kwargs: Any) -> Path:
    """``fig.savefig(path)`` atomically (the format follows the suffix); returns the path."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, **savefig_kwargs)
    return Path(path)


def remove_partial_files(directory: str | os.PathLike) -> list[Path]:
    """Delete the temporary files a killed writer left in ``directory``; returns them."""
    removed = []
    for stale in Path(directory).glob(f".*{PARTIAL}*"):
        with contextlib.suppress(OSError):
            stale.unlink()
            removed.append(stale)
    return removed


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


def prepare_output_dir(path: str | os.PathLike, what: str = "output directory") -> Path:
    """Create directory ``path`` (with its parents) and check that files can be created in
    it; :class:`OutputError` (one line) when it is a file or cannot be created or written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{what} {path} is an existing file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot create {what} {path}: {_reason(err)}") from None
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=f".write-test{PARTIAL}")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OutputError(f"{what} {path} is not writable: {_reason(err)}") from None
    return path


def check_output_file(path: str | os.PathLike, what: str = "output file") -> Path:
    """Check that ``path`` can be written later: not a directory, and its directory exists
    and is writable; :class:`OutputError` (one line) otherwise."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path} is a directory; give a file name")
    parent = path.parent
    if not parent.is_dir():
        kind = "is not a directory" if parent.exists() else "does not exist"
        raise OutputError(f"{what} {path}: directory {parent} {kind}")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".write-test{PARTIAL}")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OutputError(
            f"{what} {path}: directory {parent} is not writable: {_reason(err)}"
        ) from None
    return path


def _fault_signal(point: str) -> int | None:
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return None
    name, _, sig = wanted.partition("@")
    if name != point:
        return None
    return int(getattr(signal, f"SIG{sig or 'KILL'}"))


def fault(point: str) -> None:
    """Testing hook: signal this process now when ``PPAGE_JAX_FAULT`` names ``point``."""
    sig = _fault_signal(point)
    if sig is not None:
        os.kill(os.getpid(), sig)


def fault_soon(point: str, delay: float = 0.2) -> None:
    """Like :func:`fault`, but from a timer thread after ``delay`` seconds, while the main
    thread is busy in native code (compiling)."""
    sig = _fault_signal(point)
    if sig is not None:
        timer = threading.Timer(delay, os.kill, (os.getpid(), sig))
        timer.daemon = True
        timer.start()
