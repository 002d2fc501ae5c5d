"""Episode statistics: per-term, per-role episode returns, length, captures and how it ended.

The accumulator is a pytree updated once per env step from the step's ``info``; it is pure,
so it runs under ``jit``, ``vmap`` (over grids, over stacked EnvParams) and ``lax.scan``::

    stats = episode_stats_init(env)                        # one grid; vmap or batch_shape
    obs, state, reward, term, trunc, info = auto_env.step(key, state, actions, params)
    stats, finished = episode_stats_update(stats, info, term, trunc, params.reward.gamma)
    # finished["done"] marks the grids whose episode ended on this step; the other entries
    # of `finished` hold that episode's totals there and zeros elsewhere.
    summary = summarize_episodes(finished_over_steps, env)  # host side (episodes.summary)

Returns come in two units. ``returns``/``discounted_returns`` are what the agents were paid
(``info["reward_terms"]``: weighted, role-masked). ``unit_returns``/``unit_discounted_returns``
are the same per unit weight (``info["reward_terms_unit"]``), so that
``returns == unit_returns * weights`` for every term, even one with weight 0. Because the
reward is linear in the weights, :func:`rescore` turns unit returns into the return under any
other weight vector without re-simulating (the dynamics never depend on the reward).

Discounting: ``discounted_returns = sum_t gamma**t * r_t`` with ``t = 0`` on the first step of
the episode. Pass the learner's gamma; for potential terms it should equal ``rewards.gamma``,
and then the discounted potential return telescopes to
``-phi(s_0) + gamma**T * phi(s_T) * (1 - terminated)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

from ppage_jax.env import GridWorld
from ppage_jax.state import State
from ppage_jax.types import Replaceable, pytree_dataclass

RETURN_FIELDS = ("returns", "discounted_returns", "unit_returns", "unit_discounted_returns")


@pytree_dataclass
class EpisodeStats(Replaceable):
    """Running totals of the current episode of one grid (or a batch: leading axes).

    Per-term arrays are float32[..., A, T] in ``env.reward_terms`` order, agents in
    ``env.agent_names`` order.
    """

    returns: jax.Array  # float32[..., A, T] undiscounted, as paid (weighted)
    discounted_returns: jax.Array  # float32[..., A, T] sum_t gamma^t r_t, as paid
    unit_returns: jax.Array  # float32[..., A, T] undiscounted, per unit weight
    unit_discounted_returns: jax.Array  # float32[..., A, T] discounted, per unit weight
    discount: jax.Array  # float32[...]: gamma^length, the next step's factor
    length: jax.Array  # int32[...]: turns taken in this episode
    captures: jax.Array  # int32[...]: prey captured in this episode
    hover: jax.Array  # int32[...]: turns that ended with a predator near uncaptured prey,
    # no capture in them (:func:`hovering`)


def episode_stats_init(env: GridWorld, batch_shape: tuple[int, ...] = ()) -> EpisodeStats:
    """Zeroed statistics for one grid, or for ``batch_shape`` grids (e.g. ``(num_envs,)``)."""
    terms = (*batch_shape, env.num_agents, len(env.reward_terms))
    zeros = jnp.zeros(terms, jnp.float32)
    return EpisodeStats(
        returns=zeros,
        discounted_returns=zeros,
        unit_returns=zeros,
        unit_discounted_returns=zeros,
        discount=jnp.ones(batch_shape, jnp.float32),
        length=jnp.zeros(batch_shape, jnp.int32),
        captures=jnp.zeros(batch_shape, jnp.int32),
        hover=jnp.zeros(batch_shape, jnp.int32),
    )


# A turn "hovers" when it ends with a predator this close (Manhattan) to an uncaptured prey
# and captured nobody: a predator paid for closeness that keeps the episode going does this.
HOVER_RADIUS = 2


def hovering(env: GridWorld, state: State, captures: jax.Array) -> jax.Array:
    """bool[...]: the turn that ended in ``state`` (one grid, or a batch) left a predator
    within :data:`HOVER_RADIUS` cells of an uncaptured prey and captured no prey
    (``captures``, the turn's count)."""
    is_predator = jnp.asarray(env.is_predator)
    free_prey = ~is_predator & ~state.captured
    gap = jnp.abs(state.positions[..., :, None, :] - state.positions[..., None, :, :]).sum(-1)
    near = (gap <= HOVER_RADIUS) & is_predator[:, None] & free_prey[..., None, :]
    return near.any(axis=(-2, -1)) & (jnp.asarray(captures) == 0)


def episode_stats_update(
    stats: EpisodeStats,
    info: Mapping[str, jax.Array],
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: jax.Array | float,
    hover: jax.Array | None = None,
) -> tuple[EpisodeStats, dict[str, jax.Array]]:
    """Add one step's ``info`` to ``stats``; report and restart the episodes that ended.

    ``info`` is the step's info dict (``reward_terms``, ``reward_terms_unit``, ``captures``);
    ``terminated``/``truncated`` the step's flags; ``gamma`` a (traced) scalar; ``hover``
    whether the turn hovered (:func:`hovering`; None counts no turn). Works on one grid or a
    batch with matching leading axes (and under ``vmap``).

    Returns ``(new_stats, finished)``. ``finished`` holds ``done`` (bool[...]: an episode
    ended on this step), ``returns``, ``discounted_returns``, ``unit_returns``,
    ``unit_discounted_returns`` (float32[..., A, T]), ``length``, ``captures``, ``hover``
    (int32[...]),
    ``terminated`` and ``truncated`` (bool[...]): the ended episode's values where ``done``,
    zeros (False) elsewhere, so summing ``finished`` over steps sums over finished episodes.
    Where ``done``, ``new_stats`` restarts from zero (as after an auto-reset).
    """
    if "reward_terms_unit" not in info:
        raise KeyError(
            "episode_stats_update needs info['reward_terms_unit'] (per-unit-weight "
            "terms, from GridWorld.step); keep it when a wrapper rebuilds info"
        )
    weighted = jnp.asarray(info["reward_terms"], jnp.float32)
    unit = jnp.asarray(info["reward_terms_unit"], jnp.float32)
    factor = stats.discount[..., None, None]
    running = stats.replace(
        returns=stats.returns + weighted,
        discounted_returns=stats.discounted_returns + factor * weighted,
        unit_returns=stats.unit_returns + unit,
        unit_discounted_returns=stats.unit_discounted_returns + factor * unit,
        discount=stats.discount * jnp.asarray(gamma, jnp.float32),
        length=stats.length + 1,
        captures=stats.captures + jnp.asarray(info["captures"], jnp.int32),
        hover=stats.hover + (0 if hover is None else jnp.asarray(hover, jnp.int32)),
    )
    terminated = jnp.asarray(terminated, bool)
    truncated = jnp.asarray(truncated, bool)
    done = terminated | truncated
    per_term = done[..., None, None]
    finished = {"done": done}
    for field in RETURN_FIELDS:
        finished[field] = jnp.where(per_term, getattr(running, field), 0.0)
    finished["length"] = jnp.where(done, running.length, 0)
    finished["captures"] = jnp.where(done, running.captures, 0)
    finished["hover"] = jnp.where(done, running.hover, 0)
    finished["terminated"] = terminated & done
    finished["truncated"] = truncated & done
    fresh = EpisodeStats(
        returns=jnp.zeros_like(running.returns),
        discounted_returns=jnp.zeros_like(running.returns),
        unit_returns=jnp.zeros_like(running.returns),
        unit_discounted_returns=jnp.zeros_like(running.returns),
        discount=jnp.ones_like(running.discount),
        length=jnp.zeros_like(running.length),
        captures=jnp.zeros_like(running.captures),
        hover=jnp.zeros_like(running.hover),
    )
    new_stats = jax.tree.map(
        lambda f, r: jnp.where(done.reshape(done.shape + (1,) * (r.ndim - done.ndim)), f, r),
        fresh,
        running,
    )
    return new_stats, finished


def rescore(
    term_returns: jax.Array, weights: jax.Array, old_weights: jax.Array | None = None
) -> jax.Array:
    """Per-agent return under ``weights``, from recorded per-term returns: float32[..., A].

    ``term_returns`` float[..., A, T] are per unit weight (``finished["unit_returns"]`` or
    ``unit_discounted_returns``): the result is ``sum_t weights[t] * term_returns[..., t]``.
    ``weights`` is float[T] or float[..., T]; its leading axes broadcast against those of
    ``term_returns`` before the agent axis (score W weight vectors on E episodes with
    ``weights[:, None, :]`` of shape [W, 1, T] -> result [W, E, A]).

    With ``old_weights`` given, ``term_returns`` are taken as paid with those weights
    (``finished["returns"]``) and divided by them first. A term paid with weight 0 left no
    trace: its contribution is 0 if its new weight is 0 too, and NaN otherwise (use unit
    returns instead). Pure jnp: works under ``jit`` and ``vmap``.
    """
    term_returns = jnp.asarray(term_returns, jnp.float32)
    new = jnp.asarray(weights, jnp.float32)[..., None, :]
    if old_weights is None:
        return (term_returns * new).sum(-1)
    old = jnp.asarray(old_weights, jnp.float32)[..., None, :]
    lost = old == 0
    unit = term_returns / jnp.where(lost, 1.0, old)
    contribution = jnp.where(lost, jnp.where(new == 0, 0.0, jnp.nan), unit * new)
    return contribution.sum(-1)
