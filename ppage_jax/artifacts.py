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
the signal after ``@``: ``chunk:2@INT``), or raises the ``OSError`` of an errno name
(``write:metrics.csv@ENOSPC``). The command line and the training and sweep
drivers call it at the points the fault-injection tests kill.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

PARTIAL = ".partial-"
FAULT_ENV = "PPAGE_JAX_FAULT"


# A run directory's figures (drawn by ppage_jax.viz.run_figures from the run's saved files).
CURVES_FILE = "learning_curves.png"
CAPTURE_CURVES_FILE = "capture_curves.png"


class OutputError(Exception):
    """An output path that cannot be used; the message is one line naming it and why."""


def clear_output(
    directory: Path,
    names: Sequence[str],
    kind: str,
    overwrite: bool,
    resume: str,
    elsewhere: str = "choose another output directory",
) -> None:
    """Make way for a new ``kind`` (run, sweep, search) in ``directory``: refused
    (:class:`OutputError`, ``resume`` the flag that would continue it, ``elsewhere`` the
    other way out) while it holds any of the ``kind``'s files ``names``, unless
    ``overwrite``, which deletes them (nothing else)."""
    present = [name for name in names if (directory / name).exists()]
    if present and not overwrite:
        raise OutputError(
            f"{kind} directory {directory} already holds a {kind} ({', '.join(present)}); "
            f"continue it with {resume}, replace it with --overwrite, or {elsewhere}"
        )
    for name in present:
        target = directory / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()


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
        fault(f"write:{path.name}", path)
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


LOCK_FILE = ".lock"


class DirectoryLock:
    """An exclusive lock on an output directory (``fcntl.flock`` on ``DIR/.lock``, holding
    the writer's PID): one writer per run or sweep directory. The kernel drops the lock when
    the process ends, so a crashed writer leaves no stale lock; :meth:`release` (or leaving
    the ``with`` block) drops it and removes the file. A second writer gets
    :class:`OutputError` naming the holder's PID."""

    def __init__(self, directory: str | os.PathLike, what: str = "directory"):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> DirectoryLock:
        import fcntl

        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise OutputError(
                    f"cannot lock {self.what} {self.directory}: {_reason(err)}"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise OutputError(
                    f"{self.what} {self.directory} is in use by another ppage-jax process "
                    f"(PID {holder}, lock {self.path}); wait for it to finish or stop it"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # else the previous holder removed the file as we opened it: retry
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> DirectoryLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def inside(parent: str | os.PathLike, name: str, what: str = "name") -> Path:
    """``parent / name``, refused (:class:`OutputError`, one line) when ``name`` is absolute
    or climbs out of ``parent`` (``..``, a link), so that no user text writes elsewhere."""
    parent = Path(parent)
    target = parent / name
    if Path(name).is_absolute() or not target.resolve().is_relative_to(parent.resolve()):
        raise OutputError(f"{what} {name!r} would write outside {parent}; refused")
    return target


def _fault_action(point: str) -> str | None:
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return None
    name, _, action = wanted.partition("@")
    return (action or "KILL") if name == point else None


def _fault_signal(point: str) -> int | None:
    action = _fault_action(point)
    if action is None or action.startswith("E"):
        return None
    return int(getattr(signal, f"SIG{action}"))


def fault(point: str, path: str | os.PathLike | None = None) -> None:
    """Testing hook: when ``PPAGE_JAX_FAULT`` names ``point``, signal this process now
    (``point@INT``; SIGKILL by default), or raise the ``OSError`` of an errno name
    (``write:metrics.csv@ENOSPC``: a full disk) for ``path``."""
    action = _fault_action(point)
    if action is not None and action.startswith("E"):
        code = getattr(errno, action)
        raise OSError(code, os.strerror(code), None if path is None else str(path))
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
