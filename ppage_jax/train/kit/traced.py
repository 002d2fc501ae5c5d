"""Traced training hyperparameters: the float settings a learner reads inside its compiled
program (step sizes, loss coefficients, clipping, ``gamma``, ``gae_lambda``, exploration,
``alpha``), declared with ``param(..., traced=True)`` in :mod:`ppage_jax.config.experiment.base`
(which also lists them, :func:`~ppage_jax.config.experiment.base.traced_names`, and checks a value
for one, :func:`~ppage_jax.config.experiment.base.check_value`).

A :class:`~ppage_jax.train.config.TrainConfig` is static: its ``hp`` holds Python values, so a
new value is a new program. :func:`bind` returns the TrainConfig whose ``hp`` holds traced
float32 values instead (``{name: array}``, :data:`TracedHyperparams`); the learners read
``tc.hp.<name>`` either way, and optimiser settings live in the optimiser state
(:mod:`ppage_jax.train.kit.optim`), so one compiled ``train`` serves any values: vmapped over
sweep arms, or changed by a curriculum between updates. Structural settings (layer sizes,
``num_steps``, minibatches, the network) stay static.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from ppage_jax.config.experiment.base import Hyperparams, traced_names

if TYPE_CHECKING:
    from ppage_jax.train.config import TrainConfig

# name -> float32 scalar (or a batch of them under vmap)
TracedHyperparams = dict[str, jax.Array]


def traced_values(hp: Hyperparams, names: tuple[str, ...] | None = None) -> TracedHyperparams:
    """``{name: float32}`` of ``hp``'s traced hyperparameters (``names``: a subset)."""
    names = traced_names(type(hp)) if names is None else names
    return {name: jnp.asarray(hp.traced_value(name), jnp.float32) for name in names}


def bind(tc: TrainConfig, values: Mapping[str, jax.Array] | None) -> TrainConfig:
    """``tc`` whose ``hp`` reads ``values`` (float32 scalars, traced or not) for the names
    given; ``tc`` itself when there are none. Unknown names or non-scalar values raise
    ValueError."""
    if not values:
        return tc
    allowed = traced_names(type(tc.hp))
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(
            f"{unknown} are not traced hyperparameters of {tc.algorithm}; traced: {list(allowed)}"
        )
    shaped = {name: jnp.shape(v) for name, v in values.items() if jnp.ndim(v) != 0}
    if shaped:
        raise ValueError(
            f"traced hyperparameters must be scalars (vmap train over a batch of them); "
            f"got shapes {shaped}"
        )
    values = {name: jnp.asarray(v, jnp.float32) for name, v in values.items()}
    return tc.replace(hp=dataclasses.replace(tc.hp, **values))
