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
import io
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
    ``overwrite``, which deletes them (nothing else; a symbolic link is removed, never
    followed)."""
    present = [name for name in names if os.path.lexists(directory / name)]
    if present and not overwrite:
        raise OutputError(
            f"{kind} directory {directory} already holds a {kind} ({', '.join(present)}); "
            f"continue it with {resume}, replace it with --overwrite, or {elsewhere}"
        )
    for name in present:
        target = directory / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_MODE = _file_mode()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix) to write to; when the block ends
    without an error it is flushed to disk and renamed over ``path`` (a symbolic link there
    is replaced, never followed), otherwise removed (an OS error then names ``path``)."""
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
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(err, OSError) and err.errno and err.filename in (None, str(tmp)):
            # a full disk while writing names no file, or the temporary one: name the target
            raise OSError(err.errno, err.strerror or os.strerror(err.errno), str(path)) from None
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
    """``fig.savefig(path)`` atomically (the format follows the suffix, unless ``format``
    is given): drawn in memory, then written by :func:`write_bytes`; returns the path."""
    savefig_kwargs.setdefault("format", Path(path).suffix.lstrip(".") or None)
    buffer = io.BytesIO()
    fig.savefig(buffer, **savefig_kwargs)
    return write_bytes(path, buffer.getvalue())


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


def _probe(directory: Path, name: str = "") -> None:
    """Create and remove a hidden file in ``directory`` (named like :func:`atomic_path`'s
    temporary file of ``name``, so a name the file system refuses fails here)."""
    prefix = f".{name}{PARTIAL}" if name else f".write-test{PARTIAL}"
    fd, probe = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=Path(name).suffix)
    os.close(fd)
    os.unlink(probe)


def prepare_output_dir(path: str | os.PathLike, what: str = "output directory") -> Path:
    """Create directory ``path`` (with its parents) and check that files can be created in
    it; :class:`OutputError` (one line) when it is a file, or the OS refuses to create it or
    to write in it (no permission, a name too long, ``/proc``)."""
    path = Path(path)
    try:
        is_file = path.exists() and not path.is_dir()
    except OSError as err:  # a name too long, a loop of links
        raise OutputError(f"cannot use {what} {path}: {_reason(err)}") from None
    if is_file:
        raise OutputError(f"{what} {path} is an existing file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot create {what} {path}: {_reason(err)}") from None
    try:
        _probe(path)
    except OSError as err:
        raise OutputError(f"{what} {path} is not writable: {_reason(err)}") from None
    return path


def check_output_file(path: str | os.PathLike, what: str = "output file") -> Path:
    """Check that ``path`` can be written later: not a directory, its directory exists and
    is writable, and the OS accepts its name; :class:`OutputError` (one line) otherwise."""
    path = Path(path)
    parent = path.parent
    try:
        if path.is_dir():
            raise OutputError(f"{what} {path} is a directory; give a file name")
        if not parent.is_dir():
            kind = "is not a directory" if parent.exists() else "does not exist"
            raise OutputError(f"{what} {path}: directory {parent} {kind}")
    except OSError as err:  # a name too long, a loop of links
        raise OutputError(f"cannot use {what} {path}: {_reason(err)}") from None
    try:
        _probe(parent)
    except OSError as err:
        raise OutputError(
            f"{what} {path}: directory {parent} is not writable: {_reason(err)}"
        ) from None
    try:
        _probe(parent, path.name)
    except OSError as err:
        raise OutputError(f"cannot use {what} {path}: {_reason(err)}") from None
    return path


LOCK_FILE = ".lock"


class DirectoryLock:
    """An exclusive lock on an output directory (``fcntl.flock`` on ``DIR/.lock``, holding
    the writer's PID): one writer per run or sweep directory. The kernel drops the lock when
    the process ends, so a crashed writer leaves no stale lock; :meth:`release` (or leaving
    the ``with`` block) drops it and removes the file. A second writer gets
    :class:`OutputError` naming the holder's PID; so does a ``.lock`` that is a symbolic
    link, or not a regular file of its own (a hard link, a FIFO): it is never written
    through."""

    def __init__(self, directory: str | os.PathLike, what: str = "directory"):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.what = what
        self._fd: int | None = None

    def _refuse(self, problem: str) -> OutputError:
        return OutputError(
            f"cannot lock {self.what} {self.directory}: {self.path} is {problem}, not a lock "
            f"file; remove it (a lock is a regular file ppage-jax creates)"
        )

    def _open(self) -> int | None:
        """The lock file, created or opened without following a link; None when it
        vanished between the two tries."""
        flags = os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            return os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pass
        except OSError as err:
            raise self._failure(err) from None
        try:
            return os.open(self.path, flags | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except OSError as err:
            raise self._failure(err) from None

    def _failure(self, err: OSError) -> OutputError:
        if self.path.is_symlink():  # O_NOFOLLOW: ELOOP
            return self._refuse("a symbolic link")
        return OutputError(f"cannot lock {self.what} {self.directory}: {_reason(err)}")

    def acquire(self) -> DirectoryLock:
        import fcntl
        import stat

        while True:
            fd = self._open()
            if fd is None:
                continue
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                os.close(fd)
                kind = "not a regular file" if not stat.S_ISREG(info.st_mode) else "a hard link"
                raise self._refuse(kind)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise OutputError(
                    f"{self.what} {self.directory} is in use by another ppage-jax process "
                    f"(PID {holder}, lock {self.path}); wait for it to finish or stop it"
                ) from None
            if self._is_mine(info):
                break  # else the previous holder removed the file as we opened it: retry
            os.close(fd)
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as err:  # a full disk: an I/O error naming the lock
            self.release()
            raise OSError(err.errno, err.strerror, str(self.path)) from None
        return self

    def _is_mine(self, info: os.stat_result) -> bool:
        """Whether ``DIR/.lock`` (not followed) is still the file ``info`` describes."""
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            return False
        return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if self._is_mine(os.fstat(self._fd)):  # never a file or link put in its place
                self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> DirectoryLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def inside(parent: str | os.PathLike, name: str, what: str = "name") -> Path:
    """``parent / name``, refused (:class:`OutputError`, one line) when ``name`` is absolute
    or climbs out of ``parent`` (``..``, or a symbolic link inside ``parent``), so that no
    user text or link placed there writes elsewhere."""
    parent = Path(parent)
    target = parent / name
    if Path(name).is_absolute() or not target.resolve().is_relative_to(parent.resolve()):
        raise OutputError(
            f"{what} {name!r} would write outside {parent} (through '..', an absolute path "
            f"or a symbolic link); refused"
        )
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


def fault_armed(point: str) -> bool:
    """Whether ``PPAGE_JAX_FAULT`` names ``point`` (a hook that must first let the state it
    names settle, such as a checkpoint written in the background)."""
    return _fault_action(point) is not None


def fault_soon(point: str, delay: float = 0.2) -> None:
    """Like :func:`fault`, but from a timer thread after ``delay`` seconds, while the main
    thread is busy in native code (compiling)."""
    sig = _fault_signal(point)
    if sig is not None:
        timer = threading.Timer(delay, os.kill, (os.getpid(), sig))
        timer.daemon = True
        timer.start()
