"""The contract every registered reward term and potential must meet, checked term by term
through the user-facing kit ``ppage_jax.testing.check_reward_term``.

A term ``fn(ctx) -> float32[A]`` (a potential ``phi(state, ctx) -> float32[A]``) must:
return float32[A]; be deterministic and finite; give the same values under ``jit`` and
``vmap`` as eagerly; leave its inputs untouched; pay zero once no uncaptured prey remains
(``base`` is the one exception, pinned below); accept its declared params; and document
itself. Also here: no weight, term param or env param ever recompiles the step.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reward_testing import TERMS, env_a, with_terms

import ppage_jax as pj
from ppage_jax.rewards.registry import Choice, get_term
from ppage_jax.testing import REWARD_RULES, ContractReport, check_reward_term, sample_substeps

SAMPLES = 16


@functools.cache
def report(name: str) -> ContractReport:
    """The kit's check of one term on shape A (base keeps paying without prey: pinned below)."""
    skip = ("zero_without_prey",) if name == "base" else ()
    return check_reward_term(name, env_a(), samples=SAMPLES, skip=skip)


def expected_without_prey(state) -> np.ndarray:
    """float[B, A] ``base`` pays when no uncaptured prey is left (batched ``state``): the
    predators' step cost, and the obstacle penalty to anyone on an obstacle."""
    positions = np.asarray(state.positions)
    rows = np.arange(len(positions))[:, None]
    on_obstacle = np.asarray(state.obstacle_map)[rows, positions[..., 1], positions[..., 0]]
    return np.where(env_a().is_predator, -5.0, 0.0) - 200.0 * on_obstacle


@pytest.mark.parametrize("name", pj.reward_terms())
def test_term_contract(name):
    if name not in pj.reward_terms():
        pytest.skip(f"{name} was unregistered by another test")
    checked = report(name)
    assert checked.values.shape == (SAMPLES, env_a().num_agents)
    assert checked.values_without_prey.shape == (SAMPLES, env_a().num_agents)
    if name == "base":
        assert checked.rules == tuple(r for r in REWARD_RULES if r != "zero_without_prey")
        np.testing.assert_allclose(
            checked.values_without_prey,
            expected_without_prey(checked.samples_without_prey.state),
            atol=1e-6,
        )
    else:
        assert checked.rules == REWARD_RULES


def test_sampled_substeps_exercise_the_terms():
    """The contract above runs on sub-steps with captures, moves, agents standing on
    obstacles, captured prey, and every shipped term paying something."""
    some, none_left = sample_substeps(env_a(), SAMPLES, 0)
    assert np.asarray(some.events.num_captured).sum() > 0
    assert (np.asarray(some.prev.positions) != np.asarray(some.state.positions)).any()
    assert np.asarray(some.prev.captured).any() and not np.asarray(some.prev.captured).all()
    assert np.asarray(none_left.prev.captured).sum() == SAMPLES * env_a().layout.n_prey
    assert (expected_without_prey(none_left.state) < -100).any()  # someone on an obstacle
    for name in TERMS:
        assert np.abs(report(name).values).sum() > 0, name


def test_no_weight_or_param_change_ever_recompiles():
    env = env_a()

    @chex.assert_max_traces(n=1)
    def step(key, state, actions, params):
        return env.step(key, state, actions, params)

    step = jax.jit(step)
    _, state = env.reset(jax.random.PRNGKey(0))
    actions = jnp.zeros(env.num_agents, jnp.int32)
    # The place under predator 0, so that every term pays something at this state.
    x, y = (float(v) for v in np.asarray(state.positions)[0])
    params = with_terms(env, env.default_params, term_params={"place_bonus": {"x": x, "y": y}})
    variants = [
        params,
        with_terms(env, params, gamma=0.5),
        with_terms(env, params, capture_threshold=2, max_steps=3),
        params.replace(speeds=params.speeds * 0 + 1, stamina=params.stamina * 0 + 4),
    ]
    rng = np.random.default_rng(0)
    by_term = {}  # term -> (its reweighted params, its param variants)
    for name in env.reward_terms:
        reweighted = with_terms(env, params, weights={name: float(rng.normal())})
        changed = [
            with_terms(env, params, term_params={name: {key: v}})
            for key, declared in get_term(name).params.items()
            for v in (declared.options if isinstance(declared, Choice) else [3.5, 0.0])
        ]
        by_term[name] = (reweighted, changed)
        variants += [reweighted, *changed]
    variants.append(
        params.replace(
            reward=params.reward.replace(role_masks=jnp.ones_like(params.reward.role_masks))
        )
    )

    def rewards(p) -> np.ndarray:
        return np.asarray(step(jax.random.PRNGKey(1), state, actions, p)[2])

    for p in variants:
        rewards(p)  # each one through the one trace
    unchanged = rewards(params)
    for name, (reweighted, changed) in by_term.items():
        assert (rewards(reweighted) != unchanged).any(), name  # the weight reaches the reward
        if changed:  # and so does some value of its params
            assert any((rewards(p) != unchanged).any() for p in changed), name
    chex.clear_trace_counter()
