"""The registry of training algorithms: name -> the module implementing it.

The module is imported on first use (:func:`algorithm`). Each algorithm's hyperparameters are
declared in the config package (:data:`ppage_jax.config.algorithms.ALGORITHM_PARAMS`), so
validating a config never imports a learner. Adding an algorithm is its declaration there plus
one entry here (or one :func:`register_algorithm` call, which does both).
"""

from __future__ import annotations

import importlib

from ppage_jax.config import hyperparams as hp
from ppage_jax.config.algorithms import ALGORITHM_PARAMS, algorithm_params, declare_algorithm
from ppage_jax.train.protocol import Algorithm, missing_members

# Algorithm name -> the import path of its module (a module satisfying
# ppage_jax.train.protocol.Algorithm).
ALGORITHMS: dict[str, str] = {
    "random": "ppage_jax.train.algorithms.random",
    "ippo": "ppage_jax.train.algorithms.ippo",
    "dqn": "ppage_jax.train.algorithms.dqn",
    "iql": "ppage_jax.train.algorithms.tabular",
    "cql": "ppage_jax.train.algorithms.tabular",
    "mixed": "ppage_jax.train.algorithms.tabular",
    "mappo": "ppage_jax.train.algorithms.mappo",
    "actor_critic": "ppage_jax.train.algorithms.actor_critic",
    "a2c": "ppage_jax.train.algorithms.a2c",
    "a3c": "ppage_jax.train.algorithms.a3c",
    "jalgt": "ppage_jax.train.algorithms.jalgt",
    "jal_gt": "ppage_jax.train.algorithms.jalgt",  # PPAGE's other name of jalgt
}


def register_algorithm(
    name: str, module: str, hyperparams: type[hp.Hyperparams], replace: bool = False
) -> None:
    """Register algorithm ``name``: ``module`` is the import path of a module satisfying
    :class:`~ppage_jax.train.protocol.Algorithm` (imported on first use), ``hyperparams`` its
    declaration (a frozen dataclass subclassing :class:`~ppage_jax.config.hyperparams.Hyperparams`
    whose fields are made with :func:`~ppage_jax.config.hyperparams.param`), declared to the
    config package so that configs naming ``name`` validate."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"algorithm name must be a non-empty string, got {name!r}")
    if name in ALGORITHMS and not replace:
        raise ValueError(
            f"algorithm {name!r} is already registered "
            f"({ALGORITHMS[name]}); pass replace=True to override it"
        )
    if not isinstance(module, str):
        raise TypeError(
            f"module of algorithm {name!r} must be an import path string, got {module!r}"
        )
    declare_algorithm(name, hyperparams)
    ALGORITHMS[name] = module


def unregister_algorithm(name: str) -> None:
    """Remove algorithm ``name`` from the registry and from the config's declarations."""
    ALGORITHMS.pop(name, None)
    ALGORITHM_PARAMS.pop(name, None)


def module_path(name: str) -> str:
    """The import path of the module implementing ``name``."""
    if name not in ALGORITHMS:
        raise KeyError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]


def algorithm(name: str) -> Algorithm:
    """The module implementing algorithm ``name`` (imported now if it was not)."""
    path = module_path(name)
    module = importlib.import_module(path)
    missing = missing_members(module)
    if missing:
        raise TypeError(
            f"module {path} of algorithm {name!r} does not satisfy "
            f"ppage_jax.train.protocol.Algorithm: it lacks {missing}"
        )
    declared = hyperparams_class(name)
    if not issubclass(declared, module.Hyperparams):
        raise TypeError(
            f"module {path} of algorithm {name!r}: the registered declaration "
            f"{declared.__name__} is not its Hyperparams "
            f"{module.Hyperparams.__name__} or a subclass of it"
        )
    return module  # type: ignore[return-value]


def hyperparams_class(name: str) -> type[hp.Hyperparams]:
    """The hyperparameter declaration of algorithm ``name`` (imports no learner)."""
    module_path(name)
    return algorithm_params(name)
