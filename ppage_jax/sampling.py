"""Cheap exact-uniform draws of distinct cells (the start layout of a reset)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

# Multiply-shift needs n * 2**16 to fit in uint32.
_MAX_POPULATION = 2**16


def bounded_ints(key: jax.Array, bounds: jax.Array) -> jax.Array:
    """int32 r_i uniform on [0, bounds_i), one 32-bit random word each.

    Lemire's multiply-shift ``floor(word * n / 2**32)``, computed in uint32 halves: every
    value has probability floor(2**32/n)/2**32 or ceil(2**32/n)/2**32, so the bias is below
    n / 2**32 (2e-8 for a 10x10 grid). ``bounds`` must lie in [1, 2**16].
    """
    bounds = jnp.asarray(bounds, jnp.uint32)
    words = jax.random.bits(key, bounds.shape, jnp.uint32)
    high = (words >> 16) * bounds
    low = (words & 0xFFFF) * bounds
    return ((high + (low >> 16)) >> 16).astype(jnp.int32)


def distinct_sample(key: jax.Array, population: int | jax.Array, k: int) -> jax.Array:
    """The first ``k`` entries of a uniformly random permutation of ``population``.

    ``population`` is an int n (meaning ``arange(n)``) or an int32[n] array of values. A
    partial Fisher-Yates shuffle: k bounded draws and k swaps, instead of the sort over all
    n entries that ``jax.random.permutation`` performs (about 10x cheaper for 26 of 100
    cells under ``vmap``). Every ordered k-subset is equally likely (up to the 2**-32
    granularity of :func:`bounded_ints`). O(n) work: each swap is one two-element scatter,
    which XLA applies in place (two chained ``.at[].set`` copy the array on every swap).
    """
    values = (
        jnp.arange(population, dtype=jnp.int32)
        if isinstance(population, int)
        else jnp.asarray(population, jnp.int32)
    )
    n = values.shape[0]
    if not 0 <= k <= n:
        raise ValueError(f"cannot draw {k} distinct values from a population of {n}")
    if k == 0:
        return values[:0]
    if n > _MAX_POPULATION:
        offsets = jax.random.randint(key, (k,), 0, n - jnp.arange(k))
    else:
        offsets = bounded_ints(key, n - jnp.arange(k))

    def swap(i, values):
        pair = jnp.stack([i, i + offsets[i]])
        return values.at[pair].set(values[pair][::-1])

    return lax.fori_loop(0, k, swap, values)[:k]
