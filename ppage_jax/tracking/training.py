"""What ``ppage-jax run`` records while it trains: the metrics rows of every compiled chunk
(reward-hacking monitor columns added), streamed to one tracked run per seed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.config import Config
from ppage_jax.state import EnvParams
from ppage_jax.tracking.base import MultiLogger, evaluation_scalars, flat_hparams, row_scalars
from ppage_jax.tracking.loggers import open_logger
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.run.monitor import Flag, MonitorConfig, watch_run
from ppage_jax.train.run.report import metric_rows

GIF_TAG = "episode"


def run_hparams(config: Config) -> dict[str, Any]:
    """The resolved config as flat hyperparameters, with its hash."""
    return {**flat_hparams(config.to_dict()), "config_hash": config.hash()}


class TrainingRecorder:
    """Rows, monitor and loggers of one run (all its seeds)."""

    def __init__(
        self,
        tc: TrainConfig,
        config: Config,
        params: EnvParams,
        run_dir: Path,
        backends: Sequence[str] = ("csv",),
    ):
        exp = config["experiment"]
        self.tc = tc
        monitoring = MonitorConfig.from_experiment(exp)
        self.monitor = watch_run(monitoring, tc, params, exp["eval"]["seed"])
        self.hparams = run_hparams(config)
        self.rows: list[dict] = []
        self.closed: list[MultiLogger] = []
        self.monitor_seconds = 0.0
        group = Path(run_dir).name
        self.loggers: list[MultiLogger] = [
            open_logger(
                backends, run_dir, f"seed_{s}", group, dict(self.hparams, seed=exp["seed"] + s)
            )
            for s in range(exp["num_seeds"])
        ]

    def add_chunk(self, metrics: dict, env_steps: int) -> list[Flag]:
        """Log a compiled chunk's active rows (metrics [num_seeds, chunk, ...], ending at
        ``env_steps`` per seed) with the monitor's columns; return the flags it raised for
        the first time (for the live view)."""
        rows = self._rows(metrics, env_steps // self.tc.env_steps_per_update)
        start = time.perf_counter()
        flags = self.monitor.observe(rows)
        self.monitor_seconds += time.perf_counter() - start
        for row in rows:
            if row["active"]:
                self.loggers[row["seed"]].log_scalars(row["env_steps"], row_scalars(row))
        self.rows += rows
        return flags

    def final_rows(self, metrics: dict) -> list[dict]:
        """metrics.csv of the whole run (``metrics`` [num_seeds, updates, ...]): the rows of
        :func:`metric_rows` with the monitor's columns, seed-major. When the run was resumed
        (updates restored from a checkpoint were never seen here), one pass of a fresh
        monitor over every row replaces the live one."""
        num_seeds, updates = np.asarray(metrics["active"]).shape
        if len(self.rows) != num_seeds * updates:
            start = time.perf_counter()
            self.monitor = self.monitor.fresh()
            self.rows = self._rows(metrics, updates)
            self.monitor.observe(self.rows)
            self.monitor_seconds += time.perf_counter() - start
        self.rows.sort(key=lambda r: (r["seed"], r["update"]))
        return self.rows

    def _rows(self, metrics: dict, last_update: int) -> list[dict]:
        """Rows seed-major, numbered so the last one is update ``last_update``."""
        rows = metric_rows(self.tc, metrics)
        offset = last_update - int(np.asarray(metrics["active"]).shape[1])
        for row in rows:
            row["update"] += offset
            row["env_steps"] = row["update"] * self.tc.env_steps_per_update
        return rows

    def finish(self, evaluation: dict | None = None, gif: Path | None = None) -> None:
        """Log the evaluation (pooled over seeds), the GIF and the hyperparameters with the
        final metrics (the last rows recorded), then close every run."""
        scalars = evaluation_scalars(evaluation or {})
        for seed, logger in enumerate(self.loggers):
            active = [r for r in self.rows if r["seed"] == seed and r["active"]]
            step = max((r["env_steps"] for r in active), default=0)
            final = {f"final/{k}": v for k, v in row_scalars(active[-1]).items()} if active else {}
            logger.log_scalars(step, scalars)
            if gif is not None:
                logger.log_gif(GIF_TAG, gif, step)
            flags = sum(f.seed == seed for f in self.monitor.flags)
            logger.log_hparams(
                dict(self.hparams, seed=self.hparams_seed(seed)),
                {**scalars, **final, "monitor/flags": flags},
            )
        self.close()

    def hparams_seed(self, index: int) -> int:
        return int(self.hparams.get("experiment.seed", 0)) + index

    def seconds(self) -> dict[str, float]:
        """Wall time spent in each backend (all seeds) and in the monitor."""
        out: dict[str, float] = {}
        for logger in self.loggers + self.closed:
            for name, value in logger.seconds.items():
                out[name] = out.get(name, 0.0) + value
        return dict(out, monitor=self.monitor_seconds)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
        self.closed += self.loggers
        self.loggers = []
