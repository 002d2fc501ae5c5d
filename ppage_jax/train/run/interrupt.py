"""Ctrl-C as a request to stop at the next safe point (between compiled chunks).

Inside :class:`StopRequest` a SIGINT never raises ``KeyboardInterrupt`` (which, delivered
while XLA compiles or runs, can crash the process): it only sets a flag that the training and
sweep drivers read between chunks, and a message says so at once (a watcher thread reads the
signal from a wake-up pipe, so it prints even while the main thread is inside a compile). A
second Ctrl-C ends the process at once with status 130; what was already written stays
valid because every artifact and checkpoint is written atomically.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import TracebackType

EXIT_INTERRUPTED = 130


class StopRequest:
    """A context manager; call the instance to ask whether a stop was requested."""

    def __init__(
        self, first_message: str = "stopping after the current step (Ctrl-C again to quit at once)"
    ):
        self.first_message = first_message
        self.requested = False
        self._count = 0
        self._previous = None
        self._pipe: tuple[int, int] | None = None
        self._old_wakeup = -1

    def __call__(self) -> bool:
        return self.requested

    def _flag(self, signum: int, frame: object) -> None:
        """The Python-level handler: only the flag (the watcher thread counts and prints)."""
        self.requested = True

    def _on_signal(self) -> None:
        self._count += 1
        self.requested = True
        if self._count == 1:
            os.write(2, f"\nCtrl-C: {self.first_message}\n".encode())
        else:
            os.write(2, b"\nCtrl-C again: quitting now\n")
            os._exit(EXIT_INTERRUPTED)

    def _watch(self, read_fd: int) -> None:
        try:
            while data := os.read(read_fd, 64):
                for byte in data:
                    if byte == signal.SIGINT:
                        self._on_signal()
        except OSError:
            pass
        finally:
            os.close(read_fd)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is not threading.main_thread():
            return self  # signals reach the main thread only: nothing to install
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        self._pipe = (read_fd, write_fd)
        self._previous = signal.signal(signal.SIGINT, self._flag)
        self._old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        threading.Thread(
            target=self._watch, args=(read_fd,), daemon=True, name="ppage-jax-sigint"
        ).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._pipe is None:
            return
        signal.set_wakeup_fd(self._old_wakeup)
        signal.signal(signal.SIGINT, self._previous)
        os.close(self._pipe[1])  # the watcher's read returns b"" and it ends
        self._pipe = None
        sys.stderr.flush()
