"""The contract every registered reward term and potential must meet, checked term by term.

A term ``fn(ctx) -> float32[A]`` (a potential ``phi(state, ctx) -> float32[A]``) must:
return float32[A]; be deterministic and finite; give the same values under ``jit`` and
``vmap`` as eagerly; leave its inputs untouched; pay zero once no uncaptured prey remains
(``base`` is the one exception, pinned below); and document itself. Also here: no weight,
term param or env param ever recompiles the step.
"""
from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax import stages
from ppage_jax.rewards.compose import _call_potential
from ppage_jax.rewards.registry import Choice, PotentialContext, RewardContext, get_term
from reward_testing import TERMS, env_a, with_terms

BATCH = 16


def expected_without_prey(name: str, state) -> np.ndarray:
    """float[B, A] a term pays when no uncaptured prey is left (batched ``state``): 0, except
    for ``base`` (predators' step cost, and the obstacle penalty to anyone on an obstacle)."""
    positions = np.asarray(state.positions)
    if name != "base":
        return np.zeros(positions.shape[:2], np.float32)
    rows = np.arange(len(positions))[:, None]
    on_obstacle = np.asarray(state.obstacle_map)[rows, positions[..., 1], positions[..., 0]]
    return np.where(env_a().is_predator, -5.0, 0.0) - 200.0 * on_obstacle


def default_params(name: str) -> dict:
    return {key: jnp.asarray(v.index(v.default), jnp.int32) if isinstance(v, Choice)
            else jnp.asarray(v, jnp.float32) for key, v in get_term(name).params.items()}


def random_contexts(all_captured: bool, seed: int):
    """BATCH random (prev, state, events) sub-steps of shape A: obstacles do not block, so
    agents may stand on them; some prey start captured (all of them when all_captured)."""
    env = env_a()
    rng = np.random.default_rng(seed)
    n, size = env.num_agents, env.layout.size
    positions = rng.integers(0, size, (BATCH, n, 2)).astype(np.int32)
    captured = ~env.is_predator & (all_captured | (rng.random((BATCH, n)) < 0.3))
    obstacles = rng.integers(0, size, (BATCH, env.layout.num_obstacles, 2)).astype(np.int32)
    directions = env.action_table[rng.integers(0, env.num_actions, (BATCH, n))]
    is_predator = jnp.asarray(env.is_predator)

    def one(positions, captured, obstacles, directions):
        _, prev = env.reset_to(positions, obstacles)
        prev = prev.replace(captured=captured)
        moved = stages.move(prev.positions, jnp.ones(n, bool), directions, prev.captured,
                            prev.obstacle_map, is_predator, size=size,
                            block_by_obstacles=False, allow_cell_sharing=True)
        now_captured, events = stages.capture(moved, prev.captured, is_predator)
        return prev, prev.replace(positions=moved, captured=now_captured), events

    return jax.jit(jax.vmap(one))(positions, captured, obstacles, directions)


def term_function(name: str):
    """f(prev, state, events) -> float32[A] calling the registered function as the env does."""
    spec = get_term(name)
    is_predator = jnp.asarray(env_a().is_predator)
    params = default_params(name)
    if spec.potential:
        ctx = PotentialContext(is_predator=is_predator, params=params, grid_size=5)
        return lambda prev, state, events: _call_potential(spec.fn, state, ctx)
    return lambda prev, state, events: spec.fn(RewardContext(
        prev=prev, state=state, events=events, is_predator=is_predator, params=params,
        grid_size=5))


def snapshot(tree) -> list[np.ndarray]:
    return [np.array(leaf, copy=True) for leaf in jax.tree.leaves(tree)]


@pytest.fixture(scope="module")
def contexts():
    return random_contexts(False, 0), random_contexts(True, 1)


@pytest.mark.parametrize("name", pj.reward_terms())
def test_term_contract(name, contexts):
    if name not in pj.reward_terms():
        pytest.skip(f"{name} was unregistered by another test")
    some_captured, all_captured = contexts
    fn = term_function(name)
    batched = jax.jit(jax.vmap(fn))
    before = snapshot(some_captured)

    out = batched(*some_captured)
    assert out.shape == (BATCH, env_a().num_agents) and out.dtype == jnp.float32
    assert np.isfinite(np.asarray(out)).all()
    np.testing.assert_array_equal(np.asarray(batched(*some_captured)), np.asarray(out))
    for leaf, old in zip(jax.tree.leaves(some_captured), before):
        np.testing.assert_array_equal(np.asarray(leaf), old)  # inputs untouched
    eager = fn(*jax.tree.map(lambda x: x[3], some_captured))  # no jit, no vmap
    np.testing.assert_allclose(np.asarray(eager), np.asarray(out[3]), rtol=1e-6)

    no_prey = np.asarray(batched(*all_captured))
    np.testing.assert_allclose(no_prey, expected_without_prey(name, all_captured[1]), atol=1e-6)
    assert get_term(name).doc, f"reward term {name!r} has no docstring"


def test_random_contexts_exercise_the_terms(contexts):
    """The contract above runs on sub-steps with captures, moves and obstacle cells."""
    (prev, state, events), _ = contexts
    assert np.asarray(events.num_captured).sum() > 0
    assert (np.asarray(prev.positions) != np.asarray(state.positions)).any()
    for name in TERMS:
        values = jax.jit(jax.vmap(term_function(name)))(prev, state, events)
        assert np.abs(np.asarray(values)).sum() > 0, name


def test_no_weight_or_param_change_ever_recompiles():
    env = env_a()

    @chex.assert_max_traces(n=1)
    def step(key, state, actions, params):
        return env.step(key, state, actions, params)

    step = jax.jit(step)
    _, state = env.reset(jax.random.PRNGKey(0))
    actions = jnp.zeros(env.num_agents, jnp.int32)
    params = env.default_params
    variants = [params, with_terms(env, params, gamma=0.5),
                with_terms(env, params, capture_threshold=2, max_steps=3),
                params.replace(speeds=params.speeds * 0 + 1, stamina=params.stamina * 0 + 4)]
    rng = np.random.default_rng(0)
    for name in env.reward_terms:
        variants.append(with_terms(env, params, weights={name: float(rng.normal())}))
        for key, declared in get_term(name).params.items():
            values = declared.options if isinstance(declared, Choice) else [3.5, 0.0]
            variants += [with_terms(env, params, term_params={name: {key: v}}) for v in values]
    variants.append(params.replace(reward=params.reward.replace(
        role_masks=jnp.ones_like(params.reward.role_masks))))
    rewards = [np.asarray(step(jax.random.PRNGKey(1), state, actions, p)[2]) for p in variants]
    assert len({r.tobytes() for r in rewards}) > len(variants) // 2  # the values did change
    chex.clear_trace_counter()
