"""Optimisers whose settings are traced: built with ``optax.inject_hyperparams``, so a step
size or a clipping norm lives in the optimiser state and :func:`refresh` sets it before each
step from the (possibly traced) hyperparameters of the update (:mod:`ppage_jax.train.kit.traced`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState


def injected(
    factory: Callable[..., optax.GradientTransformation], **values: Any
) -> optax.GradientTransformation:
    """``factory(**values)`` with every value held in the optimiser state (float32)."""
    return optax.inject_hyperparams(factory, hyperparam_dtype=jnp.float32)(**values)


def refresh(state: TrainState, values: Mapping[str, jax.Array | float] | None) -> TrainState:
    """``state`` whose injected optimiser settings read ``values`` (the names given; the
    others kept). ``None``, or an optimiser built without :func:`injected` (whose settings
    are fixed), leaves the state as it is."""
    opt: Any = state.opt_state  # inject_hyperparams' state (a NamedTuple) when injected
    if not values or not hasattr(opt, "hyperparams"):
        return state
    settings = dict(opt.hyperparams)
    for name, value in values.items():
        settings[name] = jnp.asarray(value, settings[name].dtype)
    return state.replace(opt_state=opt._replace(hyperparams=settings))


def adam_clipped(
    learning_rate: Any, max_norm: Any, eps: float = 1e-8
) -> optax.GradientTransformation:
    """Global-norm clipping, then Adam."""
    return optax.chain(optax.clip_by_global_norm(max_norm), optax.adam(learning_rate, eps=eps))
