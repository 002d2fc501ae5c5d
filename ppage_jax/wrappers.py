"""Auto-reset: a finished episode restarts inside `step`, keeping its final observation.

Two wrappers with the same semantics (gymnax style: the returned obs and state of a
finished environment are those of a fresh episode, the finished episode's last observation
is in ``info["final_obs"]``, and ``terminated`` / ``truncated`` are reported apart):

- :class:`AutoResetEnv` wraps one grid; vmap it. It draws a fresh layout on every step for
  every grid and keeps it only where the episode ended, like gymnax and JaxMARL.
- :class:`BatchedAutoResetEnv` steps a whole batch at once and draws fresh layouts only for
  the grids that finished, ``resets_per_step`` at a time. This is the fast path
  (``rollout_summary`` and ``ppage-jax bench`` use it).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams, State


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

    def reset(self, key: jax.Array, params: EnvParams | None = None):
        return self.env.reset(key, params)

    def step(
        self, key: jax.Array, state: State, actions: jax.Array, params: EnvParams | None = None
    ):
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


class BatchedAutoResetEnv:
    """Auto-reset for a batch of ``num_envs`` grids that draws few layouts per step.

    ``reset(key, params) -> (obs float32[B, A, F], State[B])`` and
    ``step(key, state, actions int32[B, A], params) -> (obs, state, reward float32[B, A],
    terminated bool[B], truncated bool[B], info)``, with ``info["final_obs"]`` the
    finished episodes' last observations (equal to ``obs`` for the others) and
    ``info["final_state"]`` the states after the step, before any reset.

    The grids that finished are reset in rounds of ``resets_per_step`` (R): each round
    draws R fresh start layouts, complete with their first observations, and scatters them
    into the next R finished grids in batch order. A step where no grid finished draws
    nothing; one where more than R finished runs more rounds. Each fresh layout is an
    independent uniform draw (keyed by this step's key and the round) used once, so the
    start-layout distribution is exactly that of :meth:`GridWorld.reset`; the cost is
    ceil(finished / R) * R resets per step instead of ``num_envs``. Pick R near the number
    of grids expected to finish per step (the default assumes about an eighth).

    ``params`` is one EnvParams for the whole batch, or per-grid EnvParams whose leaves
    have a leading axis of size ``num_envs``.
    """

    def __init__(self, env: GridWorld, num_envs: int, resets_per_step: int | None = None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if resets_per_step is None:
            resets_per_step = default_resets_per_step(num_envs)
        if not 1 <= resets_per_step <= num_envs:
            raise ValueError(
                f"resets_per_step must be in [1, num_envs={num_envs}], got {resets_per_step}"
            )
        self.env = env
        self.num_envs = int(num_envs)
        self.resets_per_step = int(resets_per_step)

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _params(self, params: EnvParams | None) -> tuple[EnvParams, int | None]:
        params = self.env.default_params if params is None else params
        per_env = jnp.ndim(params.capture_threshold) == 1
        return params, (0 if per_env else None)

    def _fresh(
        self,
        key: jax.Array,
        count: int,
        params: EnvParams,
        axis: int | None,
        rows: jax.Array | None = None,
    ):
        """``count`` fresh (obs, state) pairs; per-grid params are taken at ``rows``."""
        if axis is not None and rows is not None:
            params = jax.tree.map(lambda x: x[jnp.minimum(rows, self.num_envs - 1)], params)
        return jax.vmap(self.env.reset, in_axes=(0, axis))(jax.random.split(key, count), params)

    def reset(self, key: jax.Array, params: EnvParams | None = None) -> tuple[jax.Array, State]:
        """Fresh episodes for the whole batch: (obs float32[B, A, F], State[B])."""
        params, axis = self._params(params)
        return self._fresh(key, self.num_envs, params, axis)

    def step(
        self, key: jax.Array, state: State, actions: jax.Array, params: EnvParams | None = None
    ):
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
        info = dict(info, final_obs=obs, final_state=state)

        # Finished grids take fresh layouts in batch order: the j-th finished grid (its rank)
        # is reset in round j // R, from slot j % R of that round's R fresh layouts.
        rank = _prefix_count(done) - 1

        def reset_round(carry):
            round_, obs, state = carry
            slot = rank - round_ * r
            take = done & (slot >= 0) & (slot < r)
            # rows[s]: the grid that takes fresh layout s (past the end when none does).
            rows = (
                jnp.full(r, n, jnp.int32)
                .at[jnp.where(take, slot, r)]
                .set(jnp.arange(n, dtype=jnp.int32), mode="drop")
            )
            new_obs, new_state = self._fresh(
                jax.random.fold_in(k_reset, round_), r, params, axis, rows
            )

            def put(old, new):
                return old.at[rows].set(new, mode="drop", indices_are_sorted=True)

            return round_ + 1, put(obs, new_obs), jax.tree.map(put, state, new_state)

        rounds = (done.sum() + r - 1) // r
        _, obs, state = lax.while_loop(
            lambda carry: carry[0] < rounds, reset_round, (jnp.int32(0), obs, state)
        )
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
