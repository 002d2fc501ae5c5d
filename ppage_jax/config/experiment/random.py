"""The random baseline's declaration: no learning, only the update length."""

from __future__ import annotations

import dataclasses

from ppage_jax.config.experiment.base import Hyperparams


@dataclasses.dataclass(frozen=True)
class RandomHyperparams(Hyperparams):
    """No learning: the learning roles act uniformly at random (the baseline; same outputs
    as a trained run)."""


DECLARED: dict[str, type[Hyperparams]] = {"random": RandomHyperparams}
