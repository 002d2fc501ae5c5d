"""Layout draws scale: a partial Fisher-Yates shuffle, in place (a loop of swaps) or loop-free
(pointer jumping over k entries), the same draws as a plain NumPy shuffle either way, and a
1000x1000 reset well under a second."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.sampling import bounded_ints, distinct_sample, shuffle_in_place, shuffle_prefix


def numpy_fisher_yates(offsets: np.ndarray, n: int) -> np.ndarray:
    values = np.arange(n)
    for i, offset in enumerate(offsets):
        j = i + offset
        values[i], values[j] = values[j], values[i]
    return values[: len(offsets)]


@pytest.mark.parametrize("n, k", [(100, 26), (1000, 1000)])
def test_distinct_sample_is_the_fisher_yates_shuffle_of_its_offsets(n, k):
    key = jax.random.PRNGKey(n + k)
    offsets = np.asarray(bounded_ints(key, n - jnp.arange(k)))
    got = np.asarray(jax.jit(distinct_sample, static_argnums=(1, 2))(key, n, k))
    np.testing.assert_array_equal(got, numpy_fisher_yates(offsets, n))


def test_a_1000x1000_reset_is_fast_and_valid():
    env = pj.make(None, {"env.size": 1000, "observations.type": "local_only"})
    assert env.layout.num_obstacles == 200_000
    reset = jax.jit(env.reset)
    jax.block_until_ready(reset(jax.random.PRNGKey(0)))  # compile
    start = time.perf_counter()
    _, state = jax.block_until_ready(reset(jax.random.PRNGKey(1)))
    elapsed = time.perf_counter() - start
    # ~0.1 s on two shared CPU cores (loop-free draw; ~0.5 s with a loop of swaps, ~30 s
    # with a copy per swap).
    assert elapsed < 5.0, elapsed
    cells = np.concatenate([np.asarray(state.positions), np.asarray(state.obstacles)])
    flat = cells[:, 1] * 1000 + cells[:, 0]
    assert len(np.unique(flat)) == 6 + 200_000 and cells.min() >= 0 and cells.max() < 1000
    assert int(np.asarray(state.obstacle_map).sum()) == 200_000


def _targets(key, n, k):
    """Step i of the shuffle swaps entries i and i + offset_i, offset_i uniform on [0, n - i)."""
    return np.arange(k) + np.asarray(jax.random.randint(key, (k,), 0, n - np.arange(k)))


@pytest.mark.slow  # large shuffles
@pytest.mark.parametrize("n, k", [(1, 1), (2, 2), (5, 3), (9, 9), (100, 26), (3000, 2000)])
def test_the_loop_free_shuffle_equals_the_in_place_one(n, k):
    for seed in range(5):
        targets = _targets(jax.random.PRNGKey(seed), n, k)
        expected = numpy_fisher_yates(targets - np.arange(k), n)
        np.testing.assert_array_equal(np.asarray(shuffle_prefix(jnp.asarray(targets))), expected)
        np.testing.assert_array_equal(
            np.asarray(shuffle_in_place(jnp.asarray(targets), n)), expected
        )


def test_the_loop_free_shuffle_follows_chains_of_repeated_targets():
    # Steps 0, 1 and 2 all swap with entry 4, step 3 with entry 3 (no-op), step 4 with 4.
    targets = jnp.array([4, 4, 4, 3, 4], jnp.int32)
    assert numpy_fisher_yates(np.asarray(targets) - np.arange(5), 6).tolist() == [4, 0, 1, 3, 2]
    assert np.asarray(shuffle_prefix(targets)).tolist() == [4, 0, 1, 3, 2]


def test_large_populations_draw_the_same_shuffle_without_the_cell_array():
    n, k = 300_000, 500  # above 2**16: offsets from randint, the loop-free form
    key = jax.random.PRNGKey(7)
    offsets = np.asarray(jax.random.randint(key, (k,), 0, n - jnp.arange(k)))
    got = np.asarray(jax.jit(distinct_sample, static_argnums=(1, 2))(key, n, k))
    np.testing.assert_array_equal(got, numpy_fisher_yates(offsets, n))
    values = jnp.arange(n, dtype=jnp.int32) * 2 + 1
    np.testing.assert_array_equal(np.asarray(distinct_sample(key, values, k)), got * 2 + 1)
