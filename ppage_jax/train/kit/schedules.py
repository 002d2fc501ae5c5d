"""Schedules inside the compiled update loop: a curriculum's schedules as traced arrays
(:class:`Curriculum`), evaluated at the env steps taken and applied to ``EnvParams`` leaves and
traced hyperparameters.

The schedules, the leaves they may target and their check are the config's
(:mod:`ppage_jax.config.experiment.curriculum`); a run builds its :class:`Curriculum` from its
config's ``experiment.curriculum``. Every number and the kind of each schedule are traced, so
changing a schedule never recompiles; only the set of scheduled leaves is static. A schedule
reads the env steps one seed has taken (``progress.env_steps``) before an update.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.config.experiment.curriculum import Target
from ppage_jax.state import EnvParams
from ppage_jax.types import Replaceable, pytree_dataclass, static_field

# Column prefix of the scheduled values in the metrics rows.
PREFIX = "curriculum/"


def set_target(target: Target, params: EnvParams, value: jax.Array) -> tuple[EnvParams, jax.Array]:
    """``params`` with ``target``'s leaf set to ``value``; also the value as applied (integer
    leaves take the rounded value)."""
    if target.integer:
        value = jnp.round(value).astype(jnp.int32)
    reward = params.reward
    if target.leaf == "weights":
        return params.replace(
            reward=reward.replace(weights=reward.weights.at[..., target.index].set(value))
        ), value
    if target.leaf == "term_param":
        old = reward.term_params[target.term][target.param_name]
        term = {**reward.term_params[target.term], target.param_name: value.astype(old.dtype)}
        return params.replace(
            reward=reward.replace(term_params={**reward.term_params, target.term: term})
        ), value
    if target.leaf == "gamma":
        return params.replace(reward=reward.replace(gamma=value)), value
    if target.leaf in ("speeds", "stamina"):
        rows = np.asarray(target.rows, np.int32)
        leaf = getattr(params, target.leaf).at[..., rows].set(value)
        return params.replace(**{target.leaf: leaf}), value
    return params.replace(**{target.leaf: value}), value


@pytree_dataclass
class Curriculum(Replaceable):
    """K schedules as traced arrays (one row each) and their static targets."""

    kind: jax.Array  # int32[K], index into KINDS
    start: jax.Array  # float32[K]: constant value, or the from value
    stop: jax.Array  # float32[K]: the to value
    begin: jax.Array  # float32[K]: env steps
    end: jax.Array  # float32[K]
    boundaries: jax.Array  # float32[K, MAX_PIECES - 1], +inf padded
    values: jax.Array  # float32[K, MAX_PIECES], last value repeated
    targets: tuple[Target, ...] = static_field()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(t.key for t in self.targets)


def schedule_values(c: Curriculum, env_steps: jax.Array) -> jax.Array:
    """float32[K]: every schedule's value after ``env_steps`` env steps."""
    t = jnp.asarray(env_steps, jnp.float32)
    frac = jnp.clip((t - c.begin) / jnp.maximum(c.end - c.begin, 1.0), 0.0, 1.0)
    linear = c.start + (c.stop - c.start) * frac
    cosine = c.stop + (c.start - c.stop) * 0.5 * (1.0 + jnp.cos(jnp.pi * frac))
    piece = (t >= c.boundaries).sum(-1)
    step = jnp.take_along_axis(c.values, piece[:, None], axis=1)[:, 0]
    table = jnp.stack([c.start, linear, cosine, step])  # KINDS order
    return jnp.take_along_axis(table, c.kind[None, :], axis=0)[0]


def apply_schedules(
    c: Curriculum | None,
    params: EnvParams,
    hyperparams: Mapping[str, jax.Array] | None,
    env_steps: jax.Array,
) -> tuple[EnvParams, Mapping[str, jax.Array] | None, dict[str, jax.Array]]:
    """The params and traced hyperparameters (:mod:`ppage_jax.train.kit.traced`) an update uses
    after ``env_steps`` env steps, and the applied values (float32, ``curriculum/<key>``) for
    the metrics row. ``None``: both unchanged."""
    if c is None or not c.targets:
        return params, hyperparams, {}
    values = schedule_values(c, env_steps)
    logged: dict[str, jax.Array] = {}
    for i, target in enumerate(c.targets):
        if target.leaf == "hyperparam":
            applied = values[i]
            hyperparams = {**(hyperparams or {}), target.param_name: applied}
        else:
            params, applied = set_target(target, params, values[i])
        logged[PREFIX + target.key] = applied.astype(jnp.float32)
    return params, hyperparams, logged


def apply_curriculum(
    c: Curriculum | None, params: EnvParams, env_steps: jax.Array
) -> tuple[EnvParams, dict[str, jax.Array]]:
    """The params an update uses after ``env_steps`` env steps, and the applied values
    (float32, ``curriculum/<key>``) for the metrics row. ``None``: params unchanged.
    Scheduled hyperparameters are applied by :func:`apply_schedules`."""
    params, _, logged = apply_schedules(c, params, None, env_steps)
    return params, logged
