"""Epsilon-greedy exploration with PPAGE's per-episode epsilon schedule."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from ppage_jax.config.experiment.base import EpsilonGreedyHyperparams
from ppage_jax.train.kit import loop

if TYPE_CHECKING:
    from ppage_jax.train.config import TrainConfig


def ppage_epsilon(hp: EpsilonGreedyHyperparams, episodes: jax.Array) -> jax.Array:
    """PPAGE's schedule: ``max(min_epsilon, epsilon * epsilon_decay ** episodes)``, decaying
    once per finished episode. ``episodes`` counts the episodes finished by all grids of the
    run, so the schedule is the same per episode of experience as in PPAGE's single env."""
    decayed = hp.epsilon * jnp.power(jnp.float32(hp.epsilon_decay), episodes.astype(jnp.float32))
    return jnp.maximum(jnp.float32(hp.min_epsilon), decayed)


def epsilon_greedy(key: jax.Array, q: jax.Array, epsilon: jax.Array) -> jax.Array:
    """Per row of ``q`` (float[..., nA]): a uniform action with probability epsilon, else the
    argmax (ties to the lowest index, as PPAGE's np.argmax)."""
    k_explore, k_action = jax.random.split(key)
    explore = jax.random.uniform(k_explore, q.shape[:-1]) < epsilon
    random = jax.random.randint(k_action, q.shape[:-1], 0, q.shape[-1])
    return jnp.where(explore, random, jnp.argmax(q, axis=-1)).astype(jnp.int32)


def epsilon_turns(
    tc: TrainConfig,
    runner: Any,
    learners: Any,
    one_step: Callable,
    reduce: Callable[[jax.Array], jax.Array] = jnp.mean,
) -> tuple[Any, Any, jax.Array, Any, dict]:
    """An epsilon-greedy learner's update: ``hp.num_steps`` turns of
    ``one_step((learners, env, key, episodes), _) -> (carry, (finished, losses, epsilon))``
    from ``runner``'s grids, key and episode count. Returns the new learners, env carry, key
    and progress, and the metrics row (losses reduced over the turns with ``reduce``, the
    last epsilon under ``extras``)."""
    (learners, env, key, _), (finished, losses, epsilon) = jax.lax.scan(
        one_step,
        (learners, runner.env, runner.key, runner.progress.episodes),
        None,
        length=tc.hp.num_steps,
    )
    row = loop.episode_metrics(tc, finished)
    row["losses"] = jax.tree.map(reduce, losses)
    row["extras"] = {"epsilon": epsilon[-1]}
    return learners, env, key, loop.advance(runner.progress, tc, row), row
