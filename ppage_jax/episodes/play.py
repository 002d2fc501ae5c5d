"""Playing a policy: the one turn every rollout shares, and the two ways to repeat it.

- :func:`play_episodes` (evaluation): one episode per key from that key's start layout, each
  played to its end (capture or the step limit) with no auto-reset, returning per-episode
  arrays. Training evaluation, sweeps, the reward audit and the renderer all use it.
- :func:`rollout_episodes` (streams): a batch of auto-resetting grids for a fixed number of
  turns, returning every turn's ``finished`` dict. Its episodes are those that happened to
  end inside the window, so short ones are over-represented; use it for reward
  bookkeeping (re-scoring, ablations), not to measure how fast a policy captures.

Both step through :func:`play_turn`: the grids' policies act (vmapped over grids), the batch
steps, and :func:`~ppage_jax.episodes.stats.episode_stats_update` takes the step in.

Keys: episode ``j`` of :func:`play_episodes` resets from ``fold_in(keys[j], 0)``; on turn
``t`` (1 for the first) its policy and the environment use the two halves of
``split(fold_in(keys[j], t))``. A held-out block is :func:`episode_keys`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ppage_jax.env import GridWorld
from ppage_jax.episodes.stats import (
    RETURN_FIELDS,
    EpisodeStats,
    episode_stats_init,
    episode_stats_update,
)
from ppage_jax.policies import Policy
from ppage_jax.state import NO_TRUNCATION, EnvParams, State
from ppage_jax.wrappers import AutoResetEnv

# What one episode of play_episodes records (arrays with a leading episode axis).
EPISODE_FIELDS = (
    "captured",
    "episode_length",
    "terminated",
    "truncated",
    "captures",
    *RETURN_FIELDS,
)
# step(key(s), state, actions, params) -> env.step's 6-tuple, for a whole batch of grids.
BatchStep = Callable[..., tuple]


class TurnResult(NamedTuple):
    """What :func:`play_turn` returns for a batch of grids."""

    actions: jax.Array  # int32[N, A]
    obs: jax.Array  # float32[N, A, F] after the turn
    state: State  # [N] after the turn
    info: dict  # the step's info, batched
    stats: EpisodeStats  # updated running statistics
    finished: dict  # episode_stats_update's `finished`


class Turn(NamedTuple):
    """One turn of :func:`play_episodes`, as the ``record`` hook sees it (batched over N)."""

    t: jax.Array  # int32: the turn, 1 for the first
    env_keys: jax.Array  # [N] the environment's keys of this turn
    state: State  # [N] before the turn
    actions: jax.Array  # int32[N, A]
    next_state: State  # [N] after it (unchanged where the episode had ended)
    info: dict  # the step's info
    live: jax.Array  # bool[N]: the episode was still running before the turn
    terminated: jax.Array  # bool[N]: it ended by capture on this turn
    truncated: jax.Array  # bool[N]: it hit the step limit on this turn


def episode_keys(seed: int, episodes: int) -> jax.Array:
    """A held-out block: one key per episode, ``PRNGKey(seed + j)``."""
    return jax.vmap(jax.random.PRNGKey)(jnp.arange(seed, seed + episodes))


def with_step_limit(params: EnvParams, max_steps: int | None) -> EnvParams:
    """``params`` whose episodes are truncated after ``max_steps`` turns (None: unchanged)."""
    if max_steps is None:
        return params
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    return params.replace(max_steps=jnp.asarray(max_steps, jnp.int32))


def episode_starts(env: GridWorld, keys: jax.Array, params: EnvParams) -> tuple[jax.Array, State]:
    """The start of episode ``j``: ``env.reset(fold_in(keys[j], 0), params)``, batched."""
    return jax.vmap(env.reset, in_axes=(0, None))(
        jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys), params
    )


def play_turn(
    policy: Policy,
    step: BatchStep,
    act_keys: jax.Array,
    env_key: Any,
    obs: jax.Array,
    state: State,
    stats: EpisodeStats,
    params: EnvParams,
    live: jax.Array | None = None,
) -> TurnResult:
    """One turn of a batch of N grids: ``policy`` acts on every grid (vmapped, keys
    ``act_keys[N]``), ``step(env_key, state, actions, params)`` steps the batch and the
    running episode statistics take the step in (discounted by ``params.reward.gamma``).
    Where ``live`` (bool[N]) is False the episode had already ended: nothing is reported."""
    actions = jax.vmap(policy)(act_keys, obs, state)
    obs, new_state, _, terminated, truncated, info = step(env_key, state, actions, params)
    if live is not None:
        terminated, truncated = terminated & live, truncated & live
    stats, finished = episode_stats_update(stats, info, terminated, truncated, params.reward.gamma)
    return TurnResult(actions, obs, new_state, info, stats, finished)


def _static_turns(params: EnvParams, max_steps: int | None) -> int | None:
    """The step limit as a Python int when known outside tracing (None when traced)."""
    if max_steps is not None:
        return int(max_steps)
    try:
        return int(params.max_steps)
    except (TypeError, jax.errors.ConcretizationTypeError):
        return None


def _play_length(
    params: EnvParams, max_steps: int | None, turns: int | None, recording: bool
) -> int | None:
    """The static number of turns :func:`play_episodes` runs at most (None: traced, it runs
    until every episode has ended); raises when nothing bounds the play, or when a recording
    has no static length."""
    limit = _static_turns(params, max_steps)
    if turns is None and limit is not None and limit >= NO_TRUNCATION:
        raise ValueError(
            "play_episodes needs a bound: pass max_steps (a step limit) or turns, "
            "or set a finite env.termination.max_steps"
        )
    length = turns if turns is not None else limit
    if recording and length is None:
        raise ValueError(
            "play_episodes(record=...) needs a static number of turns: pass max_steps or turns"
        )
    return length


def _start_carry(env: GridWorld, keys: jax.Array, params: EnvParams) -> dict[str, Any]:
    """The loop carry of :func:`play_episodes` before its first turn: the episodes' starts,
    fresh running statistics and zeroed per-episode totals."""
    n = keys.shape[0]
    obs, state = episode_starts(env, keys, params)
    terms = (n, env.num_agents, len(env.reward_terms))
    totals = {
        "done": jnp.zeros(n, bool),
        "terminated": jnp.zeros(n, bool),
        "truncated": jnp.zeros(n, bool),
        "length": jnp.zeros(n, jnp.int32),
        "captures": jnp.zeros(n, jnp.int32),
        **{field: jnp.zeros(terms, jnp.float32) for field in RETURN_FIELDS},
    }
    return {
        "t": jnp.zeros((), jnp.int32),
        "obs": obs,
        "state": state,
        "stats": episode_stats_init(env, (n,)),
        "totals": totals,
    }


def _episode_results(totals: dict[str, jax.Array], stats: EpisodeStats) -> dict[str, Any]:
    """The per-episode arrays :func:`play_episodes` returns, from the final totals (episodes
    that ended) and running statistics (a cut episode reports its values so far)."""
    done = totals["done"]

    def ended_or_so_far(total, so_far):
        return jnp.where(done.reshape((-1,) + (1,) * (total.ndim - 1)), total, so_far)

    return {
        "captured": totals["terminated"],
        "episode_length": ended_or_so_far(totals["length"], stats.length),
        "terminated": totals["terminated"],
        "truncated": totals["truncated"],
        "captures": ended_or_so_far(totals["captures"], stats.captures),
        **{f: ended_or_so_far(totals[f], getattr(stats, f)) for f in RETURN_FIELDS},
    }


def play_episodes(
    env: GridWorld,
    policy: Policy,
    keys: jax.Array,
    params: EnvParams,
    max_steps: int | None = None,
    *,
    turns: int | None = None,
    record: Callable[[Turn], Any] | None = None,
) -> dict[str, Any]:
    """Play one episode per key to its end (capture or the step limit); no auto-reset.

    ``policy(key, obs float32[A, F], state) -> int32[A]`` acts on one grid (it is vmapped over
    the episodes). ``max_steps`` is the step limit: episodes are truncated after that many
    turns (it replaces ``params.max_steps``; None keeps it). ``turns`` stops the play after
    that many turns without truncating (an episode still running is *cut*: neither terminated
    nor truncated, its values so far). One of them must bound the play. Pure and jittable
    (``env``, ``policy``, ``max_steps``, ``turns`` and ``record`` static); vmappable over
    ``params`` and over anything ``policy`` closes over.

    Returns per-episode arrays with leading axis N = ``len(keys)``: ``captured`` (ended by
    capture), ``episode_length`` (turns played: the capture turn when captured), ``terminated``,
    ``truncated`` (both set when the capture came on the last allowed turn), ``captures``
    (prey captured) and the per-term, per-agent returns float32[N, A, T] ``returns``,
    ``discounted_returns`` (as paid), ``unit_returns``, ``unit_discounted_returns`` (per unit
    weight; see :mod:`ppage_jax.episodes.stats`).

    With ``record(turn: Turn) -> pytree`` the loop is a ``lax.scan`` over a static number of
    turns (``turns``, else ``max_steps``, else a concrete ``params.max_steps``) and the result
    also holds ``trajectory``: ``record``'s outputs stacked on a leading turn axis. Turns after
    every episode has ended are skipped and record zeros. Without it a ``lax.while_loop``
    stops as soon as every episode has ended.
    """
    params = with_step_limit(params, max_steps)
    length = _play_length(params, max_steps, turns, recording=record is not None)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    carry = _start_carry(env, keys, params)

    def turn(c):
        t = c["t"] + 1
        live = ~c["totals"]["done"]
        split = jax.vmap(jax.random.split)(jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, t))
        r = play_turn(
            policy, step, split[:, 0], split[:, 1], c["obs"], c["state"], c["stats"], params, live
        )

        def keep(new, old):
            return jnp.where(live.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)

        stats = jax.tree.map(keep, r.stats, c["stats"])  # frozen once the episode ended
        new = {
            "t": t,
            "obs": keep(r.obs, c["obs"]),
            "state": jax.tree.map(keep, r.state, c["state"]),
            "stats": stats,
            "totals": {
                k: (v | r.finished[k]) if v.dtype == bool else v + r.finished[k]
                for k, v in c["totals"].items()
            },
        }
        seen = Turn(
            t,
            split[:, 1],
            c["state"],
            r.actions,
            new["state"],
            r.info,
            live,
            r.finished["terminated"],
            r.finished["truncated"],
        )
        return new, seen

    def running(c):
        going = ~c["totals"]["done"].all()
        return going if turns is None else going & (c["t"] < turns)

    if record is None:
        out = lax.while_loop(running, lambda c: turn(c)[0], carry)
    else:

        def recorded(c):
            new, seen = turn(c)
            return new, record(seen)

        blank = jax.eval_shape(lambda c: recorded(c)[1], carry)

        def skip(c):
            return c, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), blank)

        def scan_turn(c, _):
            return lax.cond(c["totals"]["done"].all(), skip, recorded, c)

        out, trajectory = lax.scan(scan_turn, carry, None, length=length)
    result = _episode_results(out["totals"], out["stats"])
    if record is not None:
        result["trajectory"] = trajectory
    return result


def record_one(
    env: GridWorld, policy: Policy, key: jax.Array, params: EnvParams, turns: int, record: Callable
) -> tuple[State, Any]:
    """The episode :func:`play_episodes` plays for ``key``, recorded for ``turns`` turns:
    (its reset state, ``record``'s outputs stacked on a leading turn axis)."""
    keys = key[None]
    out = play_episodes(env, policy, keys, params, turns=turns, record=record)
    _, start = episode_starts(env, keys, params)
    return (
        jax.tree.map(lambda x: x[0], start),
        jax.tree.map(lambda x: x[:, 0], out["trajectory"]),
    )


def rollout_episodes(
    env: GridWorld, policy: Policy, key: jax.Array, params: EnvParams, num_envs: int, num_steps: int
) -> dict[str, jax.Array]:
    """Run ``num_envs`` auto-resetting grids for ``num_steps`` turns; return every turn's
    ``finished`` dict stacked to ``[num_steps, num_envs, ...]`` (discounted with
    ``params.reward.gamma``). Pure: jit it with the ints static, or vmap it over ``params``.

    ``policy(key, obs float32[A, F], state) -> int32[A]`` acts for one grid. Episodes still
    running at the end are not reported, so the reported episodes are biased towards short
    ones: measure capture speed with :func:`play_episodes`.
    """
    auto = AutoResetEnv(env)
    step = jax.vmap(auto.step, in_axes=(0, 0, 0, None))
    k_reset, k_steps = jax.random.split(key)
    obs, state = jax.vmap(auto.reset, in_axes=(0, None))(
        jax.random.split(k_reset, num_envs), params
    )

    def one_turn(carry, step_key):
        obs, state, stats = carry
        k_act, k_env = jax.random.split(step_key)
        r = play_turn(
            policy,
            step,
            jax.random.split(k_act, num_envs),
            jax.random.split(k_env, num_envs),
            obs,
            state,
            stats,
            params,
        )
        return (r.obs, r.state, r.stats), r.finished

    _, finished = lax.scan(
        one_turn,
        (obs, state, episode_stats_init(env, (num_envs,))),
        jax.random.split(k_steps, num_steps),
    )
    return finished
