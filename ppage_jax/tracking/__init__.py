"""Experiment tracking: ``--logger csv,tensorboard,wandb`` for ``ppage-jax run`` and ``sweep``.

``csv`` is the run directory's own files (metrics.csv and summary.json for a run,
results.csv and curves.csv for a sweep): always written, so a run directory stays complete
whatever else is chosen. ``tensorboard`` writes event files with tensorboardX (no
TensorFlow); ``wandb`` logs to Weights & Biases (``pip install 'ppage_jax[track]'``; set
``WANDB_MODE=offline`` to log without a network). Every backend is a :class:`Logger`
(:mod:`.base`); :func:`open_logger` opens one run of the chosen backends.
"""

from __future__ import annotations

from ppage_jax.tracking.base import Logger, MultiLogger
from ppage_jax.tracking.loggers import LOGGERS, open_logger, parse_loggers

__all__ = ["LOGGERS", "Logger", "MultiLogger", "open_logger", "parse_loggers"]
