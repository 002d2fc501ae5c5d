"""What ``ppage-jax sweep`` logs: one tracked run per arm x seed, grouped by the sweep
(W&B group, the sweep's TensorBoard folder) and the arm (W&B job type, a sub-folder): its
training curve, its evaluation (``eval/<metric>``) and the reward-hacking monitor's flags
(``monitor/<check>/<role>[/<term>]``, ``monitor_first/...`` when flagged, and
``monitor/flags``, the number of checks flagged)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppage_jax.tracking.base import flat_hparams
from ppage_jax.tracking.loggers import LOGGERS, open_logger
from ppage_jax.tracking.training import run_hparams


class SweepRecorder:
    """Logs each finished (arm, seed) run of a sweep to the chosen backends."""

    def __init__(self, backends: Sequence[str], output_dir: str | Path, spec: Any):
        self.backends = [b for b in backends if LOGGERS[b] is not None]
        self.dir = Path(output_dir)
        self.group = self.dir.name
        self.hparams = run_hparams(spec.config) if self.backends else {}
        self.arms = spec.describe()["arms"] if self.backends else {}

    def add(
        self,
        arm: str,
        seed: int,
        results: dict[str, float],
        curve: Sequence[tuple[int, int, str, float]],
    ) -> None:
        """One run: its training curve against env steps, then its evaluation results
        (``eval/<metric>``), its monitor flags (``monitor/...``, first-flag steps only where
        flagged) and hyperparameters (the shared config, the arm's design)."""
        if not self.backends:
            return
        hparams = {
            **self.hparams,
            **flat_hparams({"arm": self.arms[arm]}),
            "arm.name": arm,
            "seed": seed,
        }
        logger = open_logger(
            self.backends, self.dir, f"{arm}/seed_{seed}", self.group, hparams, job_type=arm
        )
        steps: dict[int, dict[str, float]] = {}
        for _, env_steps, metric, value in curve:
            steps.setdefault(env_steps, {})[metric] = value
        for env_steps in sorted(steps):
            logger.log_scalars(env_steps, steps[env_steps])
        monitor = {
            k: v
            for k, v in results.items()
            if k.startswith(("monitor/", "monitor_first/")) and math.isfinite(v)
        }
        final = {f"eval/{k}": v for k, v in results.items() if not k.startswith("monitor")}
        final.update(monitor)
        if monitor:
            final["monitor/flags"] = sum(v for k, v in monitor.items() if k.startswith("monitor/"))
        logger.log_scalars(max(steps, default=0), final)
        logger.log_hparams(hparams, final)
        logger.close()
