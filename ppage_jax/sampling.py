"""Cheap exact-uniform draws of distinct cells (the start layout of a reset)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

# Multiply-shift needs n * 2**16 to fit in uint32. Also the largest population that the
# sequential shuffle handles on CPU: above it, random access into the population array
# makes each swap cost ~1 us, and the parallel form is several times faster.
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
    partial Fisher-Yates shuffle: k bounded draws (:func:`bounded_ints`; ``randint`` above
    2**16 values), step i swapping entries i and i + offset_i, instead of the sort over all
    n entries that ``jax.random.permutation`` performs. Every ordered k-subset is equally
    likely (up to the 2**-32 granularity of the draws).

    Two exact forms of the same shuffle (same key, same result), picked per platform: on
    CPU with n <= 2**16, k in-place swaps in a loop (:func:`shuffle_in_place`, O(n)); on
    larger populations and on accelerators, the loop-free :func:`shuffle_prefix` (O(k log k),
    never touches the other n - k entries).
    """
    if isinstance(population, int):
        values, n = None, population
    else:
        values = jnp.asarray(population, jnp.int32)
        n = values.shape[0]
    if not 0 <= k <= n:
        raise ValueError(f"cannot draw {k} distinct values from a population of {n}")
    if k == 0:
        return jnp.zeros((0,), jnp.int32)
    if n > _MAX_POPULATION:
        offsets = jax.random.randint(key, (k,), 0, n - jnp.arange(k))
    else:
        offsets = bounded_ints(key, n - jnp.arange(k))
    targets = jnp.arange(k, dtype=jnp.int32) + offsets.astype(jnp.int32)
    if n > _MAX_POPULATION:
        cells = shuffle_prefix(targets)
    else:
        cells = lax.platform_dependent(
            targets, cpu=lambda t: shuffle_in_place(t, n), default=shuffle_prefix
        )
    return cells if values is None else values[cells]


def shuffle_in_place(targets: jax.Array, n: int) -> jax.Array:
    """Entries [0, k) of ``arange(n)`` after swapping entries i and ``targets[i]`` for i = 0
    ... k - 1 in turn (``targets[i] >= i``): k steps of a loop, each one two-element scatter,
    which XLA applies in place (two chained ``.at[].set`` copy the array on every swap)."""

    def swap(i, values):
        pair = jnp.stack([i, targets[i]])
        return values.at[pair].set(values[pair][::-1])

    k = targets.shape[0]
    return lax.fori_loop(0, k, swap, jnp.arange(n, dtype=jnp.int32))[:k]


def shuffle_prefix(targets: jax.Array) -> jax.Array:
    """:func:`shuffle_in_place` without the loop or the n-entry array, in O(k log k).

    Entry i ends with the value that sat at position t = ``targets[i]`` before step i. If an
    earlier step m < i also swapped with t (take the last such m), that is the value step m
    moved there: the one at position m before step m; otherwise it is t itself. The value
    at position m before step m follows the same rule one link back (the last step l < m
    that swapped with position m), so every entry is the end of a chain of decreasing steps,
    found by pointer jumping (log2 k gathers); the previous step with the same target comes
    from a stable sort of the targets.
    """
    k = targets.shape[0]
    steps = jnp.arange(k, dtype=jnp.int32)
    # prev[i]: the last step m < i with targets[m] == targets[i], else -1.
    order = jnp.argsort(targets, stable=True).astype(jnp.int32)
    ordered = targets[order]
    repeat = jnp.concatenate([jnp.zeros(1, bool), ordered[1:] == ordered[:-1]])
    before = jnp.concatenate([jnp.full(1, -1, jnp.int32), order[:-1]])
    prev = jnp.zeros(k, jnp.int32).at[order].set(jnp.where(repeat, before, -1))
    # link[m]: the last step l < m that swapped with position m (m itself if none), then
    # the first step of that chain: the value at position m before step m is that step's.
    into = jnp.where(targets != steps, targets, k)  # targets[l] != l means targets[l] > l
    link = jnp.full(k, -1, jnp.int32).at[into].max(steps, mode="drop")
    link = jnp.where(link >= 0, link, steps)
    link = lax.fori_loop(0, max(1, math.ceil(math.log2(k))), lambda _, lk: lk[lk], link)
    return jnp.where(prev >= 0, link[jnp.maximum(prev, 0)], targets)
