"""Hyperparameter declarations of PPAGE's actor-critic family and of JAL-GT.

PPAGE's names and code defaults (its shipped 1v1 experiment files tune some of them, e.g.
``normalize_returns: true``). The keys PPAGE does not have are this package's: ``num_steps``
(how the vectorised run is cut into updates), ``obs_scale`` (1 / env.size by default, as for
every network here), ``reward_scale`` (1 by default: PPAGE's raw rewards), A3C's
``staleness``, and JAL-GT's ``table_size`` and ``max_pivots``. Like
:mod:`ppage_jax.config.hyperparams`, this module imports no learner.
"""

from __future__ import annotations

import dataclasses

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.fields import NON_NEGATIVE, Field, positive
from ppage_jax.config.hyperparams import (
    EpsilonGreedyHyperparams,
    Fail,
    Hyperparams,
    NetworkHyperparams,
    TabularHyperparams,
    param,
    redefault,
    same_as,
)
from ppage_jax.config.roles import LEARN, ROLE_KEYS

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
class ActorCriticHyperparams(NetworkHyperparams):
    """PPAGE's one-step online actor-critic (Sutton & Barto, algorithm 13.5): a shared trunk
    with policy and value heads per role, one TD(0) gradient step per turn over every grid,
    the actor's gradient weighted by ``I = gamma ** t``, a Huber critic, an entropy bonus,
    L2 weight decay on the policy head, and PPAGE's PopArt-style return normaliser."""

    num_steps: int = redefault(Hyperparams, "num_steps", 16)
    hidden_layers: tuple[int, ...] = redefault(NetworkHyperparams, "hidden_layers", (128, 128))
    reward_scale: float = redefault(NetworkHyperparams, "reward_scale", 1.0)
    value_coef: float = param(0.5, NON_NEGATIVE, "critic loss weight", traced=True)
    entropy_coef: float = param(0.0, NON_NEGATIVE, "entropy bonus weight", traced=True)
    grad_clip: float = param(5.0, positive(), "global gradient-norm clip", traced=True)
    actor_weight_decay: float = param(
        0.0, NON_NEGATIVE, "L2 penalty on the policy head (Adam weight_decay)", traced=True
    )
    normalize_returns: bool = param(
        False, Field(bool), "PopArt-style normalisation of the critic's targets"
    )
    return_norm_decay: float = param(
        0.999, DECAY, "EMA decay of the return normaliser's mean and std"
    )


@dataclasses.dataclass(frozen=True)
class A2CHyperparams(NetworkHyperparams):
    """PPAGE's A2C: separate actor and critic networks per role with their own Adam step
    sizes, ``n_steps`` rollouts on every grid with n-step bootstrapped returns, an entropy
    bonus, L2 weight decay on the actor, a Huber critic and gradient clipping."""

    num_steps: int = redefault(Hyperparams, "num_steps", 20)
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
    hidden_layers: tuple[int, ...] = redefault(NetworkHyperparams, "hidden_layers", (128, 128))
    reward_scale: float = redefault(NetworkHyperparams, "reward_scale", 1.0)
    n_steps: int = param(5, positive(int), "rollout length per gradient step")
    entropy_coef: float = param(0.01, NON_NEGATIVE, "entropy bonus weight", traced=True)
    value_loss_coef: float = param(0.5, NON_NEGATIVE, "critic loss weight", traced=True)
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
class A3CHyperparams(NetworkHyperparams):
    """PPAGE's A3C on device: ``num_workers`` groups of grids, each computing its n-step
    actor-critic gradient at parameters ``staleness`` updates old and applying it in turn to
    one shared network (shared trunk), Adam optimiser and return normaliser."""

    num_steps: int = redefault(Hyperparams, "num_steps", 20)
    hidden_layers: tuple[int, ...] = redefault(NetworkHyperparams, "hidden_layers", (128, 128))
    reward_scale: float = redefault(NetworkHyperparams, "reward_scale", 1.0)
    n_steps: int = param(5, positive(int), "rollout length per gradient step")
    # The shared-trunk actor-critic's own terms, declared as there (A3C's entropy is higher).
    entropy_coef: float = redefault(ActorCriticHyperparams, "entropy_coef", 0.05)
    value_coef: float = same_as(ActorCriticHyperparams, "value_coef")
    grad_clip: float = same_as(ActorCriticHyperparams, "grad_clip")
    actor_weight_decay: float = same_as(ActorCriticHyperparams, "actor_weight_decay")
    normalize_returns: bool = same_as(ActorCriticHyperparams, "normalize_returns")
    return_norm_decay: float = same_as(ActorCriticHyperparams, "return_norm_decay")
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


# JAL-GT solves a stage game over the joint actions of every learning agent.
MAX_JALGT_AGENTS = 2


@dataclasses.dataclass(frozen=True)
class JALGTHyperparams(EpsilonGreedyHyperparams):
    """PPAGE's JAL-GT (Albrecht, Christianos & Tuyls 2024, algorithm 7): one joint-action
    value table per learning agent over the hashed joint observation; each visited stage game
    is solved for its social-welfare-maximising correlated equilibrium by linear programming
    on device; joint actions are sampled from it (each agent exploring with epsilon) and
    targets bootstrap on the next state's equilibrium value."""

    num_steps: int = redefault(Hyperparams, "num_steps", 16)
    alpha: float = redefault(TabularHyperparams, "alpha", 0.1)
    table_size: int = redefault(TabularHyperparams, "table_size", 65_536)
    max_pivots: int = param(1000, positive(int), "simplex pivots allowed per stage-game solve")

    def check(self, data: dict, fail: Fail) -> None:
        """At most MAX_JALGT_AGENTS learning agents (the joint game grows as nA ** n)."""
        exp, spec = data["experiment"], env_spec(data)
        counts = dict(zip(ROLE_KEYS, (spec.n_predators, spec.n_prey), strict=True))
        n = sum(counts[key] for key in ROLE_KEYS if exp["roles"][key] == LEARN)
        if n > MAX_JALGT_AGENTS:
            k = len(ACTION_TABLES[spec.action_type])
            fail(
                "experiment.algorithm.name",
                exp["algorithm"]["name"],
                f"JAL-GT plays one game over the joint actions of all {n} learning agents "
                f"({k}**{n} = {k**n}); at most {MAX_JALGT_AGENTS} learning agents are "
                f"supported (e.g. 1 predator vs 1 prey, or set experiment.roles.preys to a "
                f"fixed policy)",
            )
