"""The registry of training algorithms: name -> the module implementing it.

The module is imported on first use (:func:`algorithm`). Each algorithm's hyperparameters are
declared in the config package (:data:`ppage_jax.config.experiment.algorithms.ALGORITHM_PARAMS`,
from the family modules of :mod:`ppage_jax.config.experiment`), so validating a config never
imports a learner. A shipped algorithm is named once, by its declaration: its module is
``ppage_jax.train.algorithms.<name>`` (:func:`shipped_module`; the tabular learners share one).
Adding a shipped algorithm is its declaration plus that one file; from outside the package,
:func:`register_algorithm` does both.
"""

from __future__ import annotations

import importlib

from ppage_jax.config.experiment import base as hp
from ppage_jax.config.experiment.algorithms import (
    ALGORITHM_PARAMS,
    SHIPPED,
    algorithm_params,
    declare_algorithm,
)
from ppage_jax.train.protocol import Algorithm, missing_members

# The package of the shipped algorithms' modules.
SHIPPED_PACKAGE = "ppage_jax.train.algorithms"
# The shipped algorithms whose module is not named after them: name -> module name.
MODULE_NAMES = {"iql": "tabular", "cql": "tabular", "mixed": "tabular", "jal_gt": "jalgt"}


def shipped_module(name: str) -> str:
    """The import path of shipped algorithm ``name``'s module, by convention:
    ``ppage_jax.train.algorithms.<name>`` (or the module of :data:`MODULE_NAMES`)."""
    return f"{SHIPPED_PACKAGE}.{MODULE_NAMES.get(name, name)}"


# Algorithm name -> the import path of its module (a module satisfying
# ppage_jax.train.protocol.Algorithm): every shipped algorithm, then those registered.
ALGORITHMS: dict[str, str] = {name: shipped_module(name) for name in SHIPPED}


def register_algorithm(
    name: str, module: str, hyperparams: type[hp.Hyperparams], replace: bool = False
) -> None:
    """Register algorithm ``name``: ``module`` is the import path of a module satisfying
    :class:`~ppage_jax.train.protocol.Algorithm` (imported on first use), ``hyperparams`` its
    declaration (a frozen dataclass subclassing
    :class:`~ppage_jax.config.experiment.base.Hyperparams` whose fields are made with
    :func:`~ppage_jax.config.experiment.base.param`), declared to the config package so that
    configs naming ``name`` validate."""
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
