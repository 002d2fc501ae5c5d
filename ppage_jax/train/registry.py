"""The registry of training algorithms: name -> (module path, hyperparameter declaration).

The module is imported on first use (:func:`algorithm`); the declaration is light, so
validating a config never imports a learner. Adding an algorithm is one entry here (or one
:func:`register_algorithm` call) plus its declaration in :mod:`ppage_jax.config.hyperparams`.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from ppage_jax.config import hyperparams as hp
from ppage_jax.config import hyperparams_ppage as hpp
from ppage_jax.train.protocol import Algorithm, missing_members


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """Where an algorithm lives: ``module`` (an import path; the module satisfies
    :class:`~ppage_jax.train.protocol.Algorithm`) and its ``hyperparams`` declaration."""

    module: str
    hyperparams: type[hp.Hyperparams]


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "random": AlgorithmSpec("ppage_jax.train.algorithms.random", hp.RandomHyperparams),
    "ippo": AlgorithmSpec("ppage_jax.train.algorithms.ippo", hp.IPPOHyperparams),
    "dqn": AlgorithmSpec("ppage_jax.train.algorithms.dqn", hp.DQNHyperparams),
    "iql": AlgorithmSpec("ppage_jax.train.algorithms.tabular", hp.IQLHyperparams),
    "cql": AlgorithmSpec("ppage_jax.train.algorithms.tabular", hp.CQLHyperparams),
    "mixed": AlgorithmSpec("ppage_jax.train.algorithms.tabular", hp.MixedHyperparams),
    "mappo": AlgorithmSpec("ppage_jax.train.algorithms.mappo", hp.MAPPOHyperparams),
    "actor_critic": AlgorithmSpec(
        "ppage_jax.train.algorithms.actor_critic", hpp.ActorCriticHyperparams
    ),
    "a2c": AlgorithmSpec("ppage_jax.train.algorithms.a2c", hpp.A2CHyperparams),
    "a3c": AlgorithmSpec("ppage_jax.train.algorithms.a3c", hpp.A3CHyperparams),
    "jalgt": AlgorithmSpec("ppage_jax.train.algorithms.jalgt", hpp.JALGTHyperparams),
    "jal_gt": AlgorithmSpec("ppage_jax.train.algorithms.jalgt", hpp.JALGTHyperparams),  # alias
}


def register_algorithm(
    name: str, module: str, hyperparams: type[hp.Hyperparams], replace: bool = False
) -> None:
    """Register algorithm ``name``: ``module`` is the import path of a module satisfying
    :class:`~ppage_jax.train.protocol.Algorithm` (imported on first use), ``hyperparams`` its
    declaration (a frozen dataclass subclassing :class:`~ppage_jax.config.hyperparams.Hyperparams`
    whose fields are made with :func:`~ppage_jax.config.hyperparams.param`)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"algorithm name must be a non-empty string, got {name!r}")
    if name in ALGORITHMS and not replace:
        raise ValueError(
            f"algorithm {name!r} is already registered "
            f"({ALGORITHMS[name].module}); pass replace=True to override it"
        )
    if not isinstance(module, str):
        raise TypeError(
            f"module of algorithm {name!r} must be an import path string, got {module!r}"
        )
    if not (
        isinstance(hyperparams, type)
        and issubclass(hyperparams, hp.Hyperparams)
        and dataclasses.is_dataclass(hyperparams)
    ):
        raise TypeError(
            f"hyperparams of algorithm {name!r} must be a dataclass subclassing "
            f"ppage_jax.config.hyperparams.Hyperparams, got {hyperparams!r}"
        )
    undeclared = hp.undeclared_fields(hyperparams)
    if undeclared:
        raise TypeError(
            f"hyperparams of algorithm {name!r}: fields {undeclared} need a check "
            f"and a doc; declare them with ppage_jax.config.hyperparams.param"
        )
    ALGORITHMS[name] = AlgorithmSpec(module, hyperparams)


def spec(name: str) -> AlgorithmSpec:
    """The registry entry of ``name``."""
    if name not in ALGORITHMS:
        raise KeyError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]


def algorithm(name: str) -> Algorithm:
    """The module implementing algorithm ``name`` (imported now if it was not)."""
    entry = spec(name)
    module = importlib.import_module(entry.module)
    missing = missing_members(module)
    if missing:
        raise TypeError(
            f"module {entry.module} of algorithm {name!r} does not satisfy "
            f"ppage_jax.train.protocol.Algorithm: it lacks {missing}"
        )
    if not issubclass(entry.hyperparams, module.Hyperparams):
        raise TypeError(
            f"module {entry.module} of algorithm {name!r}: the registered declaration "
            f"{entry.hyperparams.__name__} is not its Hyperparams "
            f"{module.Hyperparams.__name__} or a subclass of it"
        )
    return module  # type: ignore[return-value]


def hyperparams_class(name: str) -> type[hp.Hyperparams]:
    """The hyperparameter declaration of algorithm ``name`` (imports no learner)."""
    return spec(name).hyperparams


def make_hyperparams(name: str, params: dict[str, Any]) -> hp.Hyperparams:
    """Algorithm ``name``'s frozen hyperparameters from validated ``params``."""
    return hp.from_params(hyperparams_class(name), params)
