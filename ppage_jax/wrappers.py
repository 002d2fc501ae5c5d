"""Auto-reset: a finished episode restarts inside `step`, keeping its final observation.

Two wrappers with the same semantics (gymnax style: the returned obs and state of a
finished environment are those of a fresh episode, the finished episode's last observation
is in ``info["final_obs"]``, and ``terminated`` / ``truncated`` are reported apart):

- :class:`AutoResetEnv` wraps one grid; vmap it. It draws a fresh layout on every step for
  every grid and keeps it only where the episode ended, like gymnax and JaxMARL.
- :class:`BatchedAutoResetEnv` steps a whole batch at once and draws fresh layouts only for
  the grids that finished, in rounds of ``resets_per_step`` or one by one. This is the fast path
  (``rollout_summary`` and ``ppage-jax bench`` use it).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ppage_jax.env import GridWorld, StepResult
from ppage_jax.state import EnvParams, State
from ppage_jax.types import (
    Actions,
    BatchActions,
    BatchFlags,
    BatchObservations,
    BatchRewards,
    Info,
    Key,
    Observations,
)


class AutoResetEnv:
    """gymnax-style auto-reset around a GridWorld (one grid; vmap it for a batch).

    When a step ends the episode (terminated or truncated), the returned obs and state are
    those of a fresh episode; the last observation of the finished one is kept in
    ``info["final_obs"]`` and ``terminated``/``truncated`` are reported as they were.
    Every call draws a fresh layout (one reset per grid per step); for large batches use
    :class:`BatchedAutoResetEnv`, which draws a few per step.
    """

    def __init__(self, env: GridWorld):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, key: Key, params: EnvParams | None = None) -> tuple[Observations, State]:
        """A fresh episode: (obs float32[A, F], state), as :meth:`GridWorld.reset`."""
        return self.env.reset(key, params)

    def step(
        self, key: Key, state: State, actions: Actions, params: EnvParams | None = None
    ) -> StepResult:
        """:meth:`GridWorld.step`, restarting a finished episode (``info["final_obs"]``)."""
        obs, state, reward, terminated, truncated, info = self.env.step(key, state, actions, params)
        reset_obs, reset_state = self.env.reset(key, params)
        done = terminated | truncated
        info = dict(info, final_obs=obs)
        state = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, state)
        obs = jnp.where(done, reset_obs, obs)
        return obs, state, reward, terminated, truncated, info


def default_resets_per_step(num_envs: int) -> int:
    """Fresh layouts drawn per step by default: an eighth of the batch plus three standard
    deviations of a binomial with that rate (a 3v3 random-policy episode lasts ~10 turns,
    so ~10 % of the grids finish each step), capped at the batch."""
    expected = num_envs / 8
    return max(1, min(num_envs, math.ceil(expected + 3 * math.sqrt(expected))))


def _count(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as an int if it is an integer in [low, high] (``high`` is num_envs);
    TypeError for a non-integer (2.5, True), ValueError outside the range, naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    count = int(value)
    if count < low or (high is not None and count > high):
        rule = f">= {low}" if high is None else f"in [{low}, num_envs={high}]"
        raise ValueError(f"{name} must be {rule}, got {value}")
    return count


class BatchedAutoResetEnv:
    """Auto-reset for a batch of ``num_envs`` grids (E) that draws few layouts per step.

    ``reset(key, params) -> (obs float32[E, A, F], State[E])`` and
    ``step(key, state, actions int32[E, A], params) -> (obs, state, reward float32[E, A],
    terminated bool[E], truncated bool[E], info)``, with ``info["final_obs"]`` the
    finished episodes' last observations (equal to ``obs`` for the others) and
    ``info["final_state"]`` the states after the step, before any reset.

    The j-th grid that finished this step (in batch order) restarts from fresh layout j,
    drawn from key ``split(fold_in(k, j // R), R)[j % R]`` (R = ``resets_per_step``, k this
    step's reset key): each fresh layout is an independent uniform draw used once, so the
    start-layout distribution is exactly that of :meth:`GridWorld.reset`. The draws run in
    rounds: while more than ``one_by_one`` grids wait, a round of R draws (complete with
    their first observations) for the next R of them, then one draw per remaining grid. A
    step where no grid finished draws nothing. Rounds of R pay off where many grids finish
    per step (small grids: a 3v3 random-policy episode on 10x10 lasts ~10 turns); on large
    grids few finish, a draw costs O(obstacles), and drawing R layouts for one or two
    finished grids would cost more than the step. The rounds do not change which layout a
    grid gets. Pick R near the number of grids expected to finish per step (the default
    assumes about an eighth); ``one_by_one`` defaults to R // 4 (0: rounds of R only).

    ``params`` is one EnvParams for the whole batch, or per-grid EnvParams whose leaves
    have a leading axis of size ``num_envs``.
    """

    def __init__(
        self,
        env: GridWorld,
        num_envs: int,
        resets_per_step: int | None = None,
        one_by_one: int | None = None,
    ):
        num_envs = _count("num_envs", num_envs, 1)
        if resets_per_step is None:
            resets_per_step = default_resets_per_step(num_envs)
        resets_per_step = _count("resets_per_step", resets_per_step, 1, num_envs)
        if one_by_one is None:
            one_by_one = resets_per_step // 4
        one_by_one = _count("one_by_one", one_by_one, 0, num_envs)
        self.env = env
        self.num_envs = int(num_envs)
        self.resets_per_step = int(resets_per_step)
        self.one_by_one = int(one_by_one)

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _params(self, params: EnvParams | None) -> tuple[EnvParams, int | None]:
        params = self.env.default_params if params is None else params
        per_env = jnp.ndim(params.capture_threshold) == 1
        return params, (0 if per_env else None)

    def _fresh(
        self,
        keys: jax.Array,
        params: EnvParams,
        axis: int | None,
        rows: jax.Array | None = None,
    ):
        """One fresh (obs, state) per key; per-grid params are taken at ``rows``."""
        if axis is not None and rows is not None:
            params = jax.tree.map(lambda x: x[jnp.minimum(rows, self.num_envs - 1)], params)
        return jax.vmap(self.env.reset, in_axes=(0, axis))(keys, params)

    def _reset_keys(self, key: jax.Array) -> jax.Array:
        """Keys of fresh layouts 0 ... n + R - 1: ``split(fold_in(key, j // R), R)[j % R]``."""
        r = self.resets_per_step
        groups = -(-self.num_envs // r) + 1
        keys = jax.vmap(lambda g: jax.random.split(jax.random.fold_in(key, g), r))(
            jnp.arange(groups)
        )
        return keys.reshape((groups * r, *keys.shape[2:]))

    def reset(self, key: Key, params: EnvParams | None = None) -> tuple[BatchObservations, State]:
        """Fresh episodes for the whole batch: (obs float32[E, A, F], State[E])."""
        params, axis = self._params(params)
        return self._fresh(jax.random.split(key, self.num_envs), params, axis)

    def step(
        self, key: Key, state: State, actions: BatchActions, params: EnvParams | None = None
    ) -> tuple[BatchObservations, State, BatchRewards, BatchFlags, BatchFlags, Info]:
        """Step every grid; grids whose episode ended restart from a fresh layout."""
        params, axis = self._params(params)
        n, r = self.num_envs, self.resets_per_step
        if jnp.shape(actions)[:1] != (n,) or jnp.shape(state.turn) != (n,):
            raise ValueError(
                f"BatchedAutoResetEnv(num_envs={n}) got actions of shape "
                f"{jnp.shape(actions)} and a state batch of "
                f"{jnp.shape(state.turn)}; both need a leading axis of {n}"
            )
        k_step, k_reset = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = jax.vmap(
            self.env.step, in_axes=(0, 0, 0, axis)
        )(jax.random.split(k_step, n), state, actions, params)
        done = terminated | truncated
        final_state = state

        # finished[j]: the row of the j-th finished grid (n past the last one).
        finished = (
            jnp.full(n + r, n, jnp.int32)
            .at[jnp.where(done, _prefix_count(done) - 1, n + r)]
            .set(jnp.arange(n, dtype=jnp.int32), mode="drop")
        )
        count = done.sum(dtype=jnp.int32)
        keys = self._reset_keys(k_reset)

        def reset_round(size):
            def body(carry):
                j, obs, state, outputs = carry
                rows = lax.dynamic_slice_in_dim(finished, j, size)
                new_obs, new_state = self._fresh(
                    lax.dynamic_slice_in_dim(keys, j, size), params, axis, rows
                )

                def put(old, new):
                    return old.at[rows].set(new, mode="drop", indices_are_sorted=True)

                # The step's other outputs ride along unchanged (the barrier keeps XLA from
                # dropping them from the loop): everything that read the obstacle maps is
                # then computed before the loop rewrites them, so XLA updates the maps in
                # place instead of copying the batch's maps twice per step.
                outputs = lax.optimization_barrier(outputs)
                return j + size, put(obs, new_obs), jax.tree.map(put, state, new_state), outputs

            return body

        carry = (jnp.int32(0), obs, state, (obs, reward, terminated, truncated, info))
        carry = lax.while_loop(lambda c: count - c[0] > self.one_by_one, reset_round(r), carry)
        if self.one_by_one:
            carry = lax.while_loop(lambda c: c[0] < count, reset_round(1), carry)
        _, obs, state, (final_obs, reward, terminated, truncated, info) = carry
        info = dict(info, final_obs=final_obs, final_state=final_state)
        return obs, state, reward, terminated, truncated, info


def _prefix_count(mask: jax.Array) -> jax.Array:
    """int32[n]: inclusive running count of True in a bool[n] (``cumsum``), as two small
    float32 matmuls over blocks of 64 (exact below 2**24). XLA lowers ``cumsum`` on CPU to a
    reduce-window that takes twice as long to compile, for the same run time."""
    n, block = mask.shape[0], 64
    if n > 2**16:
        return jnp.cumsum(mask, dtype=jnp.int32)
    padded = jnp.pad(mask, (0, -n % block)).astype(jnp.float32).reshape(-1, block)
    within = padded @ jnp.triu(jnp.ones((block, block), jnp.float32))
    before = jnp.tril(jnp.ones((padded.shape[0],) * 2, jnp.float32), -1) @ padded.sum(1)
    return (within + before[:, None]).reshape(-1)[:n].astype(jnp.int32)
