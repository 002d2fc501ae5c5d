"""The static TrainConfig of a run and its update count."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import numpy as np

from ppage_jax.config.experiment.base import Hyperparams
from ppage_jax.config.experiment.roles import LEARN
from ppage_jax.defaults import ROLES
from ppage_jax.env import GridWorld
from ppage_jax.types import Replaceable, pytree_dataclass, static_field

H = TypeVar("H", bound=Hyperparams)


@pytree_dataclass
class TrainConfig(Replaceable, Generic[H]):
    """Everything static about a training run. It has no array leaves, so ``jit`` and
    ``vmap`` treat it as a constant (``in_axes=None``) and a new one recompiles.

    Build it with :func:`ppage_jax.train.make_train_config` from a validated Config.
    ``TrainConfig[A2CHyperparams]`` says which declaration ``hp`` is.
    """

    env: GridWorld = static_field()
    algorithm: str = static_field()
    hp: H = static_field()  # the algorithm's declaration, filled in
    num_envs: int = static_field()
    num_updates: int = static_field()
    episodes: int | None = static_field()  # stop after this many episodes
    # per ROLES: "learn", a baseline name or a FrozenPolicy (experiment.roles.<role>.policy)
    roles: tuple[Any, Any] = static_field()
    config_hash: str = static_field()  # Config.hash(): every section
    policy_hash: str = static_field()  # what the trained policy depends on
    # experiment.start_from: the trained policy the learners start from (a StartPolicy)
    start: Any = static_field(default=None)
    # experiment.stagger_starts: each grid's first episode starts at a random turn
    stagger_starts: bool = static_field(default=False)

    @property
    def steps_per_update(self) -> int:
        """Turns each grid takes per update (the rollout length)."""
        return self.hp.num_steps

    @property
    def env_steps_per_update(self) -> int:
        return self.num_envs * self.hp.num_steps

    def agents_of(self, role: str) -> np.ndarray:
        """int indices of the agent rows of ``role``."""
        is_pred = np.asarray(self.env.is_predator, bool)
        return np.flatnonzero(is_pred if role == "predator" else ~is_pred)

    def learns(self, role: str) -> bool:
        """True when the algorithm trains ``role`` (and the role has agents)."""
        return self.roles[ROLES.index(role)] == LEARN and len(self.agents_of(role)) > 0

    @property
    def learning_roles(self) -> tuple[str, ...]:
        return tuple(r for r in ROLES if self.learns(r))
