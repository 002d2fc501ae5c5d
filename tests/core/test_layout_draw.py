"""Layout draws scale: a partial Fisher-Yates shuffle with in-place swaps, O(cells) work, the
same draws as a plain NumPy shuffle, and a 1000x1000 reset well under a second."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.sampling import bounded_ints, distinct_sample


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
    # ~0.3 s on two shared CPU cores (it took ~30 s with a copy per swap).
    assert elapsed < 5.0, elapsed
    cells = np.concatenate([np.asarray(state.positions), np.asarray(state.obstacles)])
    flat = cells[:, 1] * 1000 + cells[:, 0]
    assert len(np.unique(flat)) == 6 + 200_000 and cells.min() >= 0 and cells.max() < 1000
    assert int(np.asarray(state.obstacle_map).sum()) == 200_000
