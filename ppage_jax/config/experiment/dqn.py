"""The value-based network learner's declaration: DQN (with PPAGE's double and dueling
variants)."""

from __future__ import annotations

import dataclasses

from ppage_jax.config.experiment.base import (
    EpsilonGreedyHyperparams,
    Fail,
    Hyperparams,
    NetworkHyperparams,
    param,
    redefault,
)
from ppage_jax.config.fields import Field, positive


@dataclasses.dataclass(frozen=True)
class DQNHyperparams(NetworkHyperparams, EpsilonGreedyHyperparams):
    """Independent DQN per role (network shared within the role), on-device ring replay,
    hard target syncs, Huber loss; ``double_dqn`` and ``dueling`` as PPAGE (D3QN = both)."""

    num_steps: int = redefault(Hyperparams, "num_steps", 16)
    hidden_layers: tuple[int, ...] = redefault(NetworkHyperparams, "hidden_layers", (128, 128))
    double_dqn: bool = param(
        False, Field(bool), "the online network picks the next action, the target values it"
    )
    dueling: bool = param(False, Field(bool), "Q = V + A - mean(A) heads")
    batch_size: int = param(256, positive(int), "grid-transitions per gradient step")
    buffer_size: int = param(50_000, positive(int), "grid-transitions kept per role (>= num_envs)")
    min_replay_size: int = param(
        1_000, positive(int), "transitions stored before learning starts (<= buffer_size)"
    )
    target_update_interval: int = param(
        100, positive(int), "gradient steps between hard target syncs"
    )
    grad_clip: float = param(5.0, positive(), "global gradient-norm clip", traced=True)
    gradient_steps: int = param(1, positive(int), "gradient steps per turn")

    def check(self, data: dict, fail: Fail) -> None:
        num_envs = data["experiment"]["num_envs"]
        if self.buffer_size < num_envs:
            fail(
                "experiment.algorithm.params.buffer_size",
                self.buffer_size,
                f"must hold at least one turn of every grid (>= num_envs = {num_envs})",
            )
        if self.min_replay_size > self.buffer_size:
            fail(
                "experiment.algorithm.params.min_replay_size",
                self.min_replay_size,
                f"must be <= buffer_size ({self.buffer_size})",
            )


DECLARED: dict[str, type[Hyperparams]] = {"dqn": DQNHyperparams}
