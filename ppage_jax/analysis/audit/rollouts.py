"""The audit's episodes: every policy pair on the held-out block, one compiled program.

Each pair plays :func:`ppage_jax.episodes.play_episodes` (one episode per layout of the block,
to capture or the step limit); the pair is a traced index into the baseline policies. A
``record`` hook re-steps every turn under reward variants of ``EnvParams`` (a vmapped axis),
each isolating one component of a term, so the components' returns come from the same
episodes. Everything about the reward is traced: configs that differ only in reward numbers
reuse the compiled program.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax.analysis.audit.settings import TERM_COMPONENTS, AuditSettings, Component
from ppage_jax.env import GridWorld
from ppage_jax.episodes.play import Turn, episode_keys, play_episodes
from ppage_jax.policies import PREDATOR_POLICIES, PREY_POLICIES
from ppage_jax.rewards.registry import get_term
from ppage_jax.state import NO_TRUNCATION, EnvParams


@dataclasses.dataclass(frozen=True)
class Variant:
    """A reward variant: params with one component of ``term`` isolated."""

    term: str
    component: Component


def reward_variants(env: GridWorld, params: EnvParams) -> tuple[list[Variant], EnvParams]:
    """The component variants of the configured terms and their params stacked [V]."""
    variants, stacked = [], []
    for term in env.reward_terms:
        for comp in TERM_COMPONENTS.get(term, ()):
            others = {c.param: 0.0 for c in TERM_COMPONENTS[term] if c is not comp}
            variants.append(Variant(term, comp))
            stacked.append(env.with_term_params(params, term, **others))
    if not stacked:  # no decomposable term: one dummy row, never read
        stacked = [params]
    return variants, jax.tree.map(lambda *xs: jnp.stack(xs), *stacked)


_ROLLOUTS: dict[tuple, Any] = {}


def rollout_program(
    env: GridWorld,
    variants: tuple[Variant, ...],
    episodes: int,
    turns: int,
    names: tuple[tuple[str, ...], tuple[str, ...]],
):
    """The compiled rollout for this static structure, built once per structure (at most 8
    kept): reward numbers are traced, so new weights or params reuse it. ``names``: the
    predator and the prey baselines it can play (indices into them pick a pair)."""
    static = env.spec.digest(rewards=False)
    key = (static, env.reward_terms, variants, episodes, turns, names)
    if key not in _ROLLOUTS:
        if len(_ROLLOUTS) >= 8:
            _ROLLOUTS.pop(next(iter(_ROLLOUTS)))
        _ROLLOUTS[key] = _make_rollout(env, variants, turns, names)
    return _ROLLOUTS[key]


def _make_rollout(
    env: GridWorld,
    variants: tuple[Variant, ...],
    turns: int,
    names: tuple[tuple[str, ...], tuple[str, ...]],
):
    """A jitted ``run(pred_idx, prey_idx, keys, params, stacked) -> dict``, the indices into
    ``names``' predator and prey baselines.

    Row 0 of the variant axis is ``params`` itself, row ``1 + v`` variant ``v``."""
    is_predator = jnp.asarray(env.is_predator)
    term_index = {name: i for i, name in enumerate(env.reward_terms)}
    # (variant row, term column) of every terminal component: their sum is the capture payoff.
    terminal = [
        (1 + v, term_index[var.term])
        for v, var in enumerate(variants)
        if var.component.kind == "terminal"
    ]
    # Potential-based terms telescope: whatever the predators do, their discounted flow from a
    # state is -phi(state) (plus the potential left at the step limit), and a capture collects
    # it as well as continuing does. They are left out of the continuation stream, so they
    # never make continuing look better than capturing.
    direct = jnp.asarray([not get_term(t).potential for t in env.reward_terms], jnp.float32)
    step_variants = jax.vmap(
        jax.vmap(env.step, in_axes=(0, 0, 0, None)), in_axes=(None, None, None, 0)
    )

    def run(pred_idx, prey_idx, keys, params, stacked):
        pred_fns = [PREDATOR_POLICIES[name](env, params) for name in names[0]]
        prey_fns = [PREY_POLICIES[name](env, params) for name in names[1]]

        def policy(key, obs, state):
            k_pred, k_prey = jax.random.split(key)
            return jnp.where(
                is_predator,
                lax.switch(pred_idx, pred_fns, k_pred, obs, state),
                lax.switch(prey_idx, prey_fns, k_prey, obs, state),
            )

        def record(turn: Turn):
            paid = turn.info["reward_terms"][None]  # [1, N, A, T]
            if variants:
                info = step_variants(turn.env_keys, turn.state, turn.actions, stacked)[5]
                paid = jnp.concatenate([paid, info["reward_terms"]])  # [1 + V, ...]
            paid = paid * turn.live[None, :, None, None]
            valid = turn.live[:, None] & ~turn.state.captured  # before the turn
            return paid, valid

        out = play_episodes(env, policy, keys, params, turns, record=record)
        paid, valid = out.pop("trajectory")  # [turns, 1 + V, N, A, T], [.., N, A]
        gamma = params.reward.gamma
        discount = gamma ** jnp.arange(turns, dtype=jnp.float32)
        end_paid = sum(
            (paid[:, v, :, :, t] for v, t in terminal),
            jnp.zeros(paid.shape[:1] + paid.shape[2:4], jnp.float32),
        )
        stream = (paid[:, 0] * direct).sum(-1) - end_paid  # [turns, N, A], direct terms only
        # Discounted stream return-to-go G_t = s_t + gamma * G_{t+1}, backwards in time.
        _, to_go = lax.scan(
            lambda g, s: (s + gamma * g, s + gamma * g),
            jnp.zeros(stream.shape[1:], jnp.float32),
            stream,
            reverse=True,
        )
        big = jnp.float32(np.inf)
        return dict(
            episodes=out,
            discounted_returns=jnp.einsum("t,tvnak->vnak", discount, paid),
            fires=(paid != 0).sum(axis=(0, 2)),  # [1 + V, A, T]
            end_sum=end_paid.sum(axis=(0, 1)),
            end_count=(end_paid != 0).sum(axis=(0, 1)),
            worst_to_go=jnp.where(valid, to_go, big).min(axis=(0, 1)),
            best_to_go=jnp.where(valid, to_go, -big).max(axis=(0, 1)),
            visited=valid.sum(axis=(0, 1)),
        )

    return jax.jit(run)


def audit_rollouts(
    env: GridWorld, params: EnvParams | None = None, settings: AuditSettings | None = None
) -> dict[str, Any]:
    """Play every policy pair of ``settings``: ``{"variants", "turns", "results"}`` with
    ``results[(pred, prey)]`` the raw NumPy output of the compiled rollout."""
    params = env.default_params if params is None else params
    settings = AuditSettings() if settings is None else settings
    turns = int(params.max_steps)
    if turns >= NO_TRUNCATION:
        raise ValueError(
            "the audit needs a finite env.termination.max_steps (episodes must "
            "end); set one, e.g. --set env.termination.max_steps=500"
        )
    variants, stacked = reward_variants(env, params)
    # Only the baselines the pairs use are compiled in.
    pred_names = tuple(dict.fromkeys(pred for pred, _ in settings.policies))
    prey_names = tuple(dict.fromkeys(prey for _, prey in settings.policies))
    run = rollout_program(env, tuple(variants), settings.episodes, turns, (pred_names, prey_names))
    keys = episode_keys(settings.seed, settings.episodes)
    results = {}
    for pred, prey in settings.policies:
        out = run(
            jnp.int32(pred_names.index(pred)),
            jnp.int32(prey_names.index(prey)),
            keys,
            params,
            stacked,
        )
        results[(pred, prey)] = jax.tree.map(np.asarray, out)
    return {"variants": variants, "turns": turns, "results": results}
