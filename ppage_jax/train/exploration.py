"""Epsilon-greedy exploration with PPAGE's per-episode epsilon schedule."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.train.hyperparams import EpsilonGreedyHyperparams


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
