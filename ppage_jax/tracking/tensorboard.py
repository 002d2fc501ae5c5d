"""TensorBoard event files through tensorboardX (no TensorFlow)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppage_jax.artifacts import inside
from ppage_jax.tracking.base import BackendLogger, check_run_name

# Sub-folder of the run (or sweep) directory holding the event files.
TENSORBOARD_DIR = "tensorboard"


class TensorBoardLogger(BackendLogger):
    """One run's event files in ``<directory>/tensorboard/<name>``: scalars against env
    steps, the hyperparameters (hparams plugin), the resolved config as text and the GIF
    as an animated image."""

    backend = "tensorboard"

    def start(self) -> None:
        root = inside(self.directory, TENSORBOARD_DIR, "TensorBoard folder")  # not a link
        self.logdir = inside(root, check_run_name(self.name), "logger run name")
        self.writer = self.module.SummaryWriter(logdir=str(self.logdir), flush_secs=30)
        text = "\n".join(f"    {k}: {v}" for k, v in self.hparams.items())
        self.writer.add_text("config", f"group {self.group}\n\n{text}", 0)

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)

    def log_hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        from tensorboardX.summary import hparams as hparams_summary

        # hparams and metric tags in this run's own folder, so the plugin links them to
        # its scalars; metrics under hparam/ so they do not clash with the logged scalars
        values = {f"hparam/{k}": v for k, v in metrics.items()}
        for summary in hparams_summary(dict(hparams), values):
            self.writer.file_writer.add_summary(summary)
        for tag, value in values.items():
            self.writer.add_scalar(tag, value)

    def log_gif(self, tag: str, path: Path, step: int) -> None:
        import imageio.v3 as iio

        # a generated protobuf module: pyright cannot see its classes
        from tensorboardX.proto.summary_pb2 import Summary  # pyright: ignore[reportAttributeAccessIssue]

        height, width = iio.improps(path, index=0).shape[:2]
        image = Summary.Image(
            height=height, width=width, colorspace=3, encoded_image_string=Path(path).read_bytes()
        )
        self.writer.file_writer.add_summary(
            Summary(value=[Summary.Value(tag=tag, image=image)]), step
        )

    def close(self) -> None:
        self.writer.close()
