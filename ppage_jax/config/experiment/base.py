"""What every algorithm's hyperparameter declaration is made of: :func:`param`, the shared
bases, and the functions that read a declaration.

A declaration is a frozen dataclass whose fields are made with :func:`param` (default, validity
check, one-line doc). The config validator (:mod:`ppage_jax.config.experiment.section`) reads
the checks and defaults from it, the learner reads its values (``tc.hp``), and
:func:`ppage_jax.config.experiment.algorithms.markdown_table` writes the documentation from it.
Each family module of this package declares its algorithms by name (its ``DECLARED``); no
module of the package imports a learner (no flax, no optax): loading a config stays light.

Shared bases: :class:`Hyperparams` (``num_steps``, every algorithm), :class:`LearnerHyperparams`
(``gamma``), :class:`NetworkHyperparams` (the network learners' ``learning_rate``,
``hidden_layers``, ``obs_scale``, ``reward_scale``) and :class:`EpsilonGreedyHyperparams`
(PPAGE's epsilon schedule). A class docstring's first paragraph describes the algorithm in the
documentation; :meth:`Hyperparams.check` holds its cross-key rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ppage_jax.config.fields import UNIT_INTERVAL, Field, positive

# fail(dotted_key, value, allowed) raises a ConfigError naming the file the key came from.
Fail = Callable[..., None]


def param(default: Any, check: Field, doc: str, traced: bool = False) -> Any:
    """A hyperparameter field: its ``default`` (a list is stored as a tuple), the
    :class:`~ppage_jax.config.Field` its configured value must pass, and a one-line ``doc``.
    ``traced``: a float the learner reads as a traced value, so it may change between runs
    of one compiled program (sweep arms, curricula)."""
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(
        default=default, metadata={"check": check, "doc": doc, "traced": traced}
    )


def redefault(cls: type, name: str, default: Any) -> Any:
    """Field ``name`` of the declaration ``cls`` with another default (same check, doc and
    tracing)."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return param(
        default,
        field.metadata["check"],
        field.metadata["doc"],
        field.metadata.get("traced", False),
    )


def same_as(cls: type, name: str) -> Any:
    """Field ``name`` declared as in the declaration ``cls`` (its default, check, doc and
    tracing), for a declaration that shares it without inheriting ``cls``'s field order."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return redefault(cls, name, field.default)


# --------------------------------------------------------------------------- shared bases
@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """The base of every declaration."""

    num_steps: int = param(32, positive(int), "turns per grid per update (one metrics row)")

    def check(self, data: dict, fail: Fail) -> None:
        """Cross-key rules over the merged config ``data``; report through ``fail``."""

    def traced_value(self, name: str) -> float:
        """The value the learner uses for traced hyperparameter ``name`` (a declaration whose
        field falls back on another, such as A2C's step sizes, resolves it here)."""
        return getattr(self, name)


@dataclasses.dataclass(frozen=True)
class LearnerHyperparams(Hyperparams):
    """What every learning algorithm has."""

    gamma: float = param(0.99, UNIT_INTERVAL, "discount factor", traced=True)


HIDDEN_LAYERS = Field(
    list,
    False,
    lambda v: (
        len(v) > 0 and all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in v)
    ),
    "of positive integers, at least one",
)


@dataclasses.dataclass(frozen=True)
class NetworkHyperparams(LearnerHyperparams):
    """What every neural-network learner has."""

    learning_rate: float = param(1e-3, positive(), "Adam step size", traced=True)
    hidden_layers: tuple[int, ...] = param((64, 64), HIDDEN_LAYERS, "widths of the MLP layers")
    obs_scale: float | None = param(
        None,
        Field(
            float,
            True,
            lambda v: v > 0,
            "> 0; null means 1 / env.size, or 1 for the spatial grid observation",
        ),
        "factor applied to observations before the network",
    )
    reward_scale: float = param(
        0.01, positive(), "factor applied to rewards before learning", traced=True
    )


@dataclasses.dataclass(frozen=True)
class EpsilonGreedyHyperparams(LearnerHyperparams):
    """PPAGE's epsilon-greedy exploration, decaying once per finished episode."""

    epsilon: float = param(1.0, UNIT_INTERVAL, "initial exploration probability", traced=True)
    epsilon_decay: float = param(
        0.995,
        UNIT_INTERVAL,
        "epsilon factor per finished episode (all grids count)",
        traced=True,
    )
    min_epsilon: float = param(0.05, UNIT_INTERVAL, "floor of the decayed epsilon", traced=True)


# --------------------------------------------------------------------------- reading
def checks(cls: type[Hyperparams]) -> dict[str, Field]:
    """key -> the Field its configured value must pass."""
    return {f.name: f.metadata["check"] for f in dataclasses.fields(cls)}


def defaults(cls: type[Hyperparams]) -> dict[str, Any]:
    """key -> default, in config form (tuples as lists)."""
    return {
        f.name: list(f.default) if isinstance(f.default, tuple) else f.default
        for f in dataclasses.fields(cls)
    }


def from_params(cls: type[Hyperparams], params: dict) -> Hyperparams:
    """The frozen declaration from validated ``params`` (lists become tuples; keys the
    declaration lacks, such as PPAGE's ``action_dim``, are dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k in names
    }
    return cls(**values)


def traced_names(cls: type[Hyperparams]) -> tuple[str, ...]:
    """The traced hyperparameters of declaration ``cls``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("traced", False))


def check_value(cls: type[Hyperparams], name: str, value: object, algorithm: str) -> float:
    """``value`` for traced hyperparameter ``name`` of ``cls``, validated (a numeric string
    such as YAML's ``3e-4`` is read as a number); ValueError with a one-line reason."""
    allowed = traced_names(cls)
    if name not in allowed:
        raise ValueError(f"is not a traced hyperparameter of {algorithm}; traced: {list(allowed)}")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    return float(checks(cls)[name].validate(value))


def undeclared_fields(cls: type) -> list[str]:
    """Fields of ``cls`` not made with :func:`param` (no check or doc)."""
    return [
        f.name
        for f in dataclasses.fields(cls)
        if "check" not in f.metadata or "doc" not in f.metadata
    ]
