"""Weights & Biases runs (optional: ``pip install 'ppage_jax[track]'``). ``WANDB_MODE=offline``
logs without a network; ``wandb sync`` uploads later. ``WANDB_PROJECT`` names the project
(default ``ppage-jax``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppage_jax.artifacts import inside
from ppage_jax.tracking.base import BackendLogger

DEFAULT_PROJECT = "ppage-jax"


class WandbLogger(BackendLogger):
    """One W&B run named ``<group>/<name>`` in ``group`` (``job_type``: a sweep's arm), under
    ``<directory>/wandb``: scalars against env steps (``env_steps`` is the x axis), the
    resolved config as the run's config, final metrics in its summary, the GIF as a video."""

    backend = "wandb"

    def start(self) -> None:
        wandb = self.module
        self.directory.mkdir(parents=True, exist_ok=True)
        inside(self.directory, "wandb", "W&B folder")  # wandb writes there: not a link
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT),
            name=f"{self.group}/{self.name}",
            group=self.group,
            job_type=self.job_type,
            config=dict(self.hparams),
            dir=str(self.directory),
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True),
        )
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        self.run.log({**values, "env_steps": step})

    def log_hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        self.run.config.update(dict(hparams), allow_val_change=True)
        self.run.summary.update(dict(metrics))

    def log_gif(self, tag: str, path: Path, step: int) -> None:
        self.run.log({tag: self.module.Video(str(path), format="gif"), "env_steps": step})

    def close(self) -> None:
        self.run.finish()
