"""The declarations of PPAGE's actor-critic family: the one-step actor-critic, A2C and A3C,
over the fields they share (:class:`ActorCriticBase`).

PPAGE's names and code defaults (its shipped 1v1 experiment files tune some of them, e.g.
``normalize_returns: true``). The keys PPAGE does not have are this package's: ``num_steps``
(how the vectorised run is cut into updates), ``obs_scale`` (1 / env.size by default, as for
every network here), ``reward_scale`` (1 by default: PPAGE's raw rewards) and A3C's
``staleness``.
"""

from __future__ import annotations

import dataclasses

from ppage_jax.config.experiment.base import (
    Fail,
    Hyperparams,
    NetworkHyperparams,
    param,
    redefault,
    same_as,
)
from ppage_jax.config.fields import NON_NEGATIVE, Field, positive

DECAY = Field(float, False, lambda v: 0 < v < 1, "in (0, 1)")


def _multiple_of_n_steps(hp: A2CHyperparams | A3CHyperparams, fail: Fail) -> None:
    if hp.num_steps % hp.n_steps:
        fail(
            "experiment.algorithm.params.num_steps",
            hp.num_steps,
            f"must be a multiple of n_steps ({hp.n_steps}): each update runs "
            f"num_steps / n_steps rollouts of n_steps turns",
        )


@dataclasses.dataclass(frozen=True)
class ActorCriticBase(NetworkHyperparams):
    """What PPAGE's actor-critics share: wider MLP layers, raw rewards, an entropy bonus,
    gradient clipping and L2 weight decay on the policy."""

    num_steps: int = redefault(Hyperparams, "num_steps", 20)
    hidden_layers: tuple[int, ...] = redefault(NetworkHyperparams, "hidden_layers", (128, 128))
    reward_scale: float = redefault(NetworkHyperparams, "reward_scale", 1.0)
    entropy_coef: float = param(0.0, NON_NEGATIVE, "entropy bonus weight", traced=True)
    grad_clip: float = param(5.0, positive(), "global gradient-norm clip", traced=True)
    actor_weight_decay: float = param(
        0.0, NON_NEGATIVE, "L2 penalty on the policy head (Adam weight_decay)", traced=True
    )


@dataclasses.dataclass(frozen=True)
class ActorCriticHyperparams(ActorCriticBase):
    """PPAGE's one-step online actor-critic (Sutton & Barto, algorithm 13.5): a shared trunk
    with policy and value heads per role, one TD(0) gradient step per turn over every grid,
    the actor's gradient weighted by ``I = gamma ** t``, a Huber critic, an entropy bonus,
    L2 weight decay on the policy head, and PPAGE's PopArt-style return normaliser."""

    num_steps: int = redefault(ActorCriticBase, "num_steps", 16)
    value_coef: float = param(0.5, NON_NEGATIVE, "critic loss weight", traced=True)
    normalize_returns: bool = param(
        False, Field(bool), "PopArt-style normalisation of the critic's targets"
    )
    return_norm_decay: float = param(
        0.999, DECAY, "EMA decay of the return normaliser's mean and std"
    )


@dataclasses.dataclass(frozen=True)
class A2CHyperparams(ActorCriticBase):
    """PPAGE's A2C: separate actor and critic networks per role with their own Adam step
    sizes, ``n_steps`` rollouts on every grid with n-step bootstrapped returns, an entropy
    bonus, L2 weight decay on the actor, a Huber critic and gradient clipping."""

    learning_rate: float | None = param(
        None,
        Field(float, True, lambda v: v > 0, "> 0"),
        "fallback of both step sizes below (PPAGE's learning_rate)",
    )
    actor_learning_rate: float | None = param(
        None,
        Field(float, True, lambda v: v > 0, "> 0"),
        "the actor's Adam step size (null: learning_rate, else 3e-4)",
        traced=True,
    )
    critic_learning_rate: float | None = param(
        None,
        Field(float, True, lambda v: v > 0, "> 0"),
        "the critic's Adam step size (null: learning_rate, else 1e-3)",
        traced=True,
    )
    n_steps: int = param(5, positive(int), "rollout length per gradient step")
    entropy_coef: float = redefault(ActorCriticBase, "entropy_coef", 0.01)
    value_loss_coef: float = param(0.5, NON_NEGATIVE, "critic loss weight", traced=True)
    # Separate networks: the clip applies to each apart, the decay to the actor.
    grad_clip: float = param(
        5.0, positive(), "gradient-norm clip (actor and critic apart)", traced=True
    )
    actor_weight_decay: float = param(
        0.0, NON_NEGATIVE, "L2 penalty on the actor (Adam weight_decay)", traced=True
    )

    @property
    def actor_lr(self) -> float:
        return _first(self.actor_learning_rate, self.learning_rate, 3e-4)

    @property
    def critic_lr(self) -> float:
        return _first(self.critic_learning_rate, self.learning_rate, 1e-3)

    def traced_value(self, name: str) -> float:
        resolved = {"actor_learning_rate": self.actor_lr, "critic_learning_rate": self.critic_lr}
        return resolved[name] if name in resolved else getattr(self, name)

    def check(self, data: dict, fail: Fail) -> None:
        _multiple_of_n_steps(self, fail)


def _first(*values: float | None) -> float:
    return next(v for v in values if v is not None)


@dataclasses.dataclass(frozen=True)
class A3CHyperparams(ActorCriticHyperparams):
    """PPAGE's A3C on device: ``num_workers`` groups of grids, each computing its n-step
    actor-critic gradient at parameters ``staleness`` updates old and applying it in turn to
    one shared network (shared trunk), Adam optimiser and return normaliser."""

    num_steps: int = same_as(ActorCriticBase, "num_steps")
    entropy_coef: float = redefault(ActorCriticBase, "entropy_coef", 0.05)
    n_steps: int = same_as(A2CHyperparams, "n_steps")
    num_workers: int = param(4, positive(int), "workers: groups of num_envs / num_workers grids")
    staleness: int | None = param(
        None,
        Field(int, True, lambda v: v >= 0, ">= 0"),
        "updates between a worker's parameter copy and its gradient's application "
        "(null: num_workers - 1)",
    )

    @property
    def lag(self) -> int:
        """The staleness in updates (``num_workers - 1`` when not set)."""
        return self.num_workers - 1 if self.staleness is None else self.staleness

    def check(self, data: dict, fail: Fail) -> None:
        _multiple_of_n_steps(self, fail)
        num_envs = data["experiment"]["num_envs"]
        if num_envs % self.num_workers:
            fail(
                "experiment.algorithm.params.num_workers",
                self.num_workers,
                f"must divide num_envs ({num_envs}): each worker steps an equal group of grids",
            )


DECLARED: dict[str, type[Hyperparams]] = {
    "actor_critic": ActorCriticHyperparams,
    "a2c": A2CHyperparams,
    "a3c": A3CHyperparams,
}
