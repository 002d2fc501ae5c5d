"""The Logger protocol and the helpers every backend shares."""

from __future__ import annotations

import importlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

# The index columns of a metrics row: logged as the step, not as scalars.
INDEX_COLUMNS = ("seed", "update", "env_steps", "active")


@runtime_checkable
class Logger(Protocol):
    """One tracked run (one seed of ``ppage-jax run``, one arm x seed of a sweep)."""

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Scalars at ``step`` env steps (non-finite values are skipped)."""

    def log_hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        """The run's hyperparameters (the flat resolved config) and its final metrics."""

    def log_gif(self, tag: str, path: Path, step: int) -> None:
        """An animated GIF file (the run's episode.gif)."""

    def close(self) -> None:
        """Flush and close the run."""


class MultiLogger:
    """Fans every call out to the chosen backends (none for csv alone) and keeps the wall
    time spent in each (:attr:`seconds`, by backend name)."""

    def __init__(
        self,
        loggers: Sequence[Logger],
        names: Sequence[str] | None = None,
        seconds: Mapping[str, float] | None = None,
    ):
        self.loggers = list(loggers)
        self.names = list(names) if names is not None else [type(x).__name__ for x in loggers]
        self.seconds = {name: 0.0 for name in self.names}
        self.seconds.update(seconds or {})

    def _each(self, method: str, *args: Any) -> None:
        for name, logger in zip(self.names, self.loggers, strict=True):
            start = time.perf_counter()
            getattr(logger, method)(*args)
            self.seconds[name] += time.perf_counter() - start

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        clean = finite_scalars(values)
        if clean:
            self._each("log_scalars", step, clean)

    def log_hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        self._each("log_hparams", hparams, finite_scalars(metrics))

    def log_gif(self, tag: str, path: Path, step: int) -> None:
        if Path(path).is_file():
            self._each("log_gif", tag, Path(path), step)

    def close(self) -> None:
        self._each("close")


def check_run_name(name: str) -> str:
    """A tracked run's name: parts joined by '/' (``arm/seed_0``), each following the rule
    of agent and arm names (:data:`ppage_jax.config.NAME_RULE`); OutputError otherwise."""
    from ppage_jax.artifacts import OutputError
    from ppage_jax.config import NAME_RULE, is_safe_name

    if not isinstance(name, str) or not all(is_safe_name(p) for p in name.split("/")):
        raise OutputError(
            f"logger run name {name!r} is refused: each '/'-separated part must be {NAME_RULE}"
        )
    return name


def finite_scalars(values: Mapping[str, Any]) -> dict[str, float]:
    """The finite real numbers of ``values`` as floats (bools as 0/1)."""
    out = {}
    for key, value in values.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[key] = number
    return out


def row_scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """A metrics.csv row without its index columns."""
    return finite_scalars({k: v for k, v in row.items() if k not in INDEX_COLUMNS})


def flat_hparams(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> dotted keys; lists as JSON text, None as ``"null"``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flat_hparams(value, dotted))
        elif isinstance(value, (bool, int, float, str)):
            out[dotted] = value
        else:
            out[dotted] = json.dumps(value, default=str) if value is not None else "null"
    return out


def evaluation_scalars(evaluation: Mapping[str, Any]) -> dict[str, float]:
    """``eval/<row>/<metric>`` of summary.json's evaluation rows (pooled over seeds)."""
    out = {}
    for row, metrics in evaluation.get("rows", {}).items():
        out.update(
            {
                f"eval/{row}/{k}": v
                for k, v in metrics.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
        )
    return finite_scalars(out)


def missing_backend(backend: str, package: str) -> ImportError:
    return ImportError(
        f"--logger {backend} needs the {package} package: "
        f"pip install 'ppage_jax[track]' (or pip install {package})"
    )


# Python package each backend imports.
PACKAGES = {"tensorboard": "tensorboardX", "wandb": "wandb"}


def import_backend(backend: str) -> Any:
    """The Python package of ``backend`` (:data:`PACKAGES`); ImportError saying how to
    install it when it is missing."""
    package = PACKAGES[backend]
    try:
        return importlib.import_module(package)
    except ImportError:
        raise missing_backend(backend, package) from None


class BackendLogger:
    """What every tracking backend shares: the arguments :func:`open_logger` builds it with
    (kept as attributes, ``hparams`` copied) and its package, imported as :attr:`module`.
    A backend names itself in :attr:`backend` and opens its run in :meth:`start`."""

    backend: str = ""

    def __init__(
        self,
        directory: Path,
        name: str,
        group: str,
        hparams: Mapping[str, Any],
        job_type: str | None = None,
    ):
        self.module = import_backend(self.backend)
        self.directory = Path(directory)
        self.name = name
        self.group = group
        self.hparams = dict(hparams)
        self.job_type = job_type
        self.start()

    def start(self) -> None:
        """Open the backend's run (called once, at the end of ``__init__``)."""
        raise NotImplementedError
