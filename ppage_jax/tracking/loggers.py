"""The backends by name: ``--logger`` parsing and opening one run of the chosen backends."""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ppage_jax.tracking.base import PACKAGES, MultiLogger, check_run_name, missing_backend

# backend name -> (module, class); csv is the run directory's own files (no class).
LOGGERS: dict[str, tuple[str, str] | None] = {
    "csv": None,
    "tensorboard": ("ppage_jax.tracking.tensorboard", "TensorBoardLogger"),
    "wandb": ("ppage_jax.tracking.wandb", "WandbLogger"),
}


def parse_loggers(text: str) -> tuple[str, ...]:
    """``"csv,tensorboard"`` -> ``("csv", "tensorboard")``; ValueError naming the bad one."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in LOGGERS]
    if unknown or not names:
        raise ValueError(
            f"unknown logger {unknown[0] if unknown else text!r}; choose any of "
            f"{list(LOGGERS)}, comma-separated (e.g. csv,tensorboard)"
        )
    return names


def open_logger(
    backends: Sequence[str],
    directory: str | Path,
    name: str,
    group: str,
    hparams: Mapping[str, Any],
    job_type: str | None = None,
) -> MultiLogger:
    """One run of each chosen backend: TensorBoard event files under ``directory``
    (``<directory>/tensorboard/<name>``), a W&B run ``name`` in ``group`` (``job_type``: a
    sweep's arm) stored under ``directory``; ``hparams`` are known from the start (W&B
    config), and written again with the final metrics by :meth:`Logger.log_hparams`."""
    check_run_name(name)
    loggers, names, seconds = [], [], {}
    for backend in backends:
        entry = LOGGERS[backend]
        if entry is None:
            continue
        module, cls = entry
        start = time.perf_counter()
        loggers.append(
            getattr(importlib.import_module(module), cls)(
                Path(directory), name, group, dict(hparams), job_type
            )
        )
        names.append(backend)
        seconds[backend] = time.perf_counter() - start
    return MultiLogger(loggers, names, seconds)


def logger_names(text: str) -> tuple[str, ...]:
    """argparse type of ``--logger``: the parsed names, each backend's package installed."""
    import argparse
    import importlib.util

    try:
        names = parse_loggers(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    for name in names:
        package = PACKAGES.get(name)
        if package and importlib.util.find_spec(package) is None:
            raise argparse.ArgumentTypeError(str(missing_backend(name, package)))
    return names


def add_logger_argument(parser: Any) -> None:
    """``--logger`` of ``ppage-jax run`` and ``ppage-jax sweep``."""
    parser.add_argument(
        "--logger",
        type=logger_names,
        default=("csv",),
        metavar="NAMES",
        help=f"experiment tracking, any of {list(LOGGERS)} comma-separated "
        f"(default csv: the run directory's own files, always written; "
        f"wandb honours WANDB_MODE=offline and WANDB_PROJECT)",
    )
