"""Exact values of every shipped reward term on hand-built layouts, and JAX vs the NumPy oracle.

Conventions: positions [x, y], y grows downward; discrete_5 actions RIGHT [1,0], YPLUS [0,1],
LEFT [-1,0], YMINUS [0,-1], NOOP. Agents: predator_1..3, then prey_1..2 (shape A).
Every test in this file reuses one compiled step per shape (values vary as traced params).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reward_testing import (
    LEFT,
    NOOP,
    RIGHT,
    TERMS,
    YMINUS,
    env_a,
    env_b,
    jit_reset_to,
    jit_step,
    random_params,
    run_turn,
    with_terms,
)

from ppage_jax.oracle.translate import oracle_for

GAMMA = 0.99
CORNERS = [[0, 0], [4, 0]]  # two obstacles no agent touches


def assert_term(terms, name, expected):
    np.testing.assert_allclose(terms[name], expected, rtol=1e-6, atol=1e-5, err_msg=name)


def test_env_configures_every_shipped_term_in_order():
    assert env_a().reward_terms == TERMS
    assert set(TERMS) <= set(__import__("ppage_jax").reward_terms())


# ------------------------------------------------------------ two predators on one cell
PILE_ON = dict(
    positions=[[1, 1], [3, 1], [4, 4], [2, 1], [0, 4]],
    actions=[RIGHT, LEFT, NOOP, NOOP, NOOP],
    obstacles=CORNERS,
)


@pytest.mark.parametrize(
    "credit, expected",
    [
        ("full", [95.0, 95.0, -5.0, -100.0, 0.0]),  # PPAGE: each predator on the cell: +100
        ("split", [45.0, 45.0, -5.0, -100.0, 0.0]),  # 100 shared by the two predators
        ("team", [95.0, 95.0, 95.0, -100.0, 0.0]),  # every predator, per prey captured
    ],
)
def test_base_credit_modes_two_predators_on_one_cell(credit, expected):
    env = env_a()
    params = with_terms(env, env.default_params, term_params={"base": {"credit": credit}})
    after, terminated, _, terms = run_turn(env, params=params, **PILE_ON)
    assert np.asarray(after.positions)[:2].tolist() == [[2, 1], [2, 1]]
    assert np.asarray(after.captured).tolist() == [False, False, False, True, False]
    assert not terminated  # capture_threshold is 2: one prey of two is captured
    assert_term(terms, "base", expected)


def test_shaping_terms_after_a_capture_use_uncaptured_prey_only():
    # After the turn: predators at (2,1), (2,1), (4,4); prey_1 captured at (2,1); prey_2 (0,4).
    _, _, _, terms = run_turn(env_a(), **PILE_ON)
    assert_term(terms, "predator_distance", [-5.0, -5.0, -4.0, 0.0, 0.0])
    assert_term(terms, "survival", [0.0, 0.0, 0.0, 0.0, 1.0])
    assert_term(terms, "prey_distance", [0.0, 0.0, 0.0, 0.0, 4.0])  # prey_2 to predator_3
    assert_term(terms, "capture_proximity", [0.0] * 5)  # nobody within radius 1
    # 1 - d / (2 (size - 1)) with d = 5, 5, 4 on the 5x5 grid; in range: 2 <= d <= 4
    assert_term(terms, "predator_closeness", [0.375, 0.375, 0.5, 0.0, 0.0])
    assert_term(terms, "prey_in_range", [0.0, 0.0, 1.0, 0.0, 0.0])
    assert_term(terms, "predator_cohesion", [1.0, 1.0, 0.0, 0.0, 0.0])  # 1 and 2 share a cell
    assert_term(terms, "place_bonus", [0.0] * 5)  # nobody within 1 of the corner (0, 0)
    # Potentials, once per turn: phi(s) = [-1, -1, -4 | 1, 4], phi(s') = [-5, -5, -4 | 0, 4].
    assert_term(
        terms, "potential_distance", [GAMMA * -5 + 1, GAMMA * -5 + 1, GAMMA * -4 + 4, 0.0, 0.0]
    )
    assert_term(terms, "potential_prey_distance", [0.0, 0.0, 0.0, -1.0, GAMMA * 4 - 4])


def test_capture_proximity_radius_is_a_traced_param():
    env = env_a()
    params = with_terms(env, env.default_params, term_params={"capture_proximity": {"radius": 4.0}})
    _, _, _, terms = run_turn(env, params=params, **PILE_ON)
    # predator_3 at (4,4) is 4 from prey_2 at (0,4): +1 to it, -1 to prey_2.
    assert_term(terms, "capture_proximity", [0.0, 0.0, 1.0, 0.0, -1.0])


# ------------------------------------------------------------ obstacles, params, weights
OBSTACLE_TURN = dict(
    positions=[[1, 1], [1, 3], [4, 4], [2, 2], [0, 4]],
    actions=[NOOP, NOOP, YMINUS, NOOP, YMINUS],
    obstacles=[[4, 3], [0, 3]],
)  # predator_3 and prey_2 step onto them


def test_predator_cohesion_radius_is_a_traced_param():
    env = env_a()
    params = with_terms(env, env.default_params, term_params={"predator_cohesion": {"radius": 2.0}})
    _, _, _, terms = run_turn(env, params=params, **OBSTACLE_TURN)
    # Predators end at (1,1), (1,3), (4,3): 1 and 2 are 2 apart, 3 is 3 from 2.
    assert_term(terms, "predator_cohesion", [1.0, 1.0, 0.0, 0.0, 0.0])


def test_place_bonus_place_and_radius_are_traced_params():
    env = env_a()
    near_corner = {"place_bonus": {"x": 0.0, "y": 0.0, "radius": 3.0}}
    params = with_terms(env, env.default_params, term_params=near_corner)
    _, _, _, terms = run_turn(env, params=params, **OBSTACLE_TURN)
    # Predators end at (1,1), (1,3), (4,3): 2, 4 and 7 from (0,0); prey are not paid.
    assert_term(terms, "place_bonus", [1.0, 0.0, 0.0, 0.0, 0.0])
    on_the_pile = {"place_bonus": {"x": 2.0, "y": 1.0, "radius": 0.0}}
    params = with_terms(env, env.default_params, term_params=on_the_pile)
    _, _, _, terms = run_turn(env, params=params, **PILE_ON)
    assert_term(terms, "place_bonus", [1.0, 1.0, 0.0, 0.0, 0.0])  # both on (2,1)


def test_every_term_on_an_obstacle_layout():
    # After: predators (1,1), (1,3), (4,3)*; prey (2,2), (0,3)* (* on an obstacle).
    _, _, _, terms = run_turn(env_a(), **OBSTACLE_TURN)
    assert_term(terms, "base", [-5.0, -5.0, -205.0, 0.0, -200.0])
    assert_term(terms, "predator_distance", [-2.0, -1.0, -3.0, 0.0, 0.0])
    assert_term(terms, "survival", [0.0, 0.0, 0.0, 1.0, 1.0])
    assert_term(terms, "prey_distance", [0.0, 0.0, 0.0, 2.0, 1.0])
    assert_term(terms, "capture_proximity", [0.0, 1.0, 0.0, 0.0, -1.0])
    assert_term(terms, "predator_closeness", [0.75, 0.875, 0.625, 0.0, 0.0])  # d = 2, 1, 3
    assert_term(terms, "prey_in_range", [1.0, 0.0, 1.0, 0.0, 0.0])
    assert_term(terms, "predator_cohesion", [0.0] * 5)  # predators 2, 5 and 3 cells apart
    assert_term(terms, "place_bonus", [0.0] * 5)  # (1,1) is 2 from the corner
    # phi(s) = [-2, -2, -4 | 2, 2]; phi(s') = [-2, -1, -3 | 2, 1].
    assert_term(
        terms, "potential_distance", [GAMMA * -2 + 2, GAMMA * -1 + 2, GAMMA * -3 + 4, 0.0, 0.0]
    )
    assert_term(terms, "potential_prey_distance", [0.0, 0.0, 0.0, GAMMA * 2 - 2, GAMMA * 1 - 2])


def test_base_params_weights_and_gamma_are_traced():
    env = env_a()
    params = with_terms(
        env,
        env.default_params,
        weights={"base": 2.0, "survival": -3.0, "potential_distance": 0.5},
        term_params={
            "base": {
                "capture_reward": 10.0,
                "step_cost": 1.0,
                "captured_penalty": 3.0,
                "obstacle_penalty": 7.0,
            }
        },
        gamma=0.5,
    )
    _, _, _, terms = run_turn(env, params=params, **OBSTACLE_TURN)
    assert_term(terms, "base", [-2.0, -2.0, -16.0, 0.0, -14.0])
    assert_term(terms, "survival", [0.0, 0.0, 0.0, -3.0, -3.0])
    assert_term(
        terms,
        "potential_distance",
        [0.5 * (0.5 * -2 + 2), 0.5 * (0.5 * -1 + 2), 0.5 * (0.5 * -3 + 4), 0.0, 0.0],
    )
    # Captures pay the traced constants too (split among two predators).
    params = with_terms(env, params, term_params={"base": {"credit": "split"}})
    _, _, _, terms = run_turn(env, params=params, **PILE_ON)
    assert_term(terms, "base", [2 * (5.0 - 1.0), 2 * (5.0 - 1.0), -2.0, -6.0, 0.0])


@pytest.mark.parametrize(
    "credit, expected",
    [("full", [95.0, -5.0, -5.0]), ("split", [95.0, -5.0, -5.0]), ("team", [195.0] * 3)],
)
def test_two_prey_caught_in_one_substep(credit, expected):
    env = env_a()
    params = with_terms(env, env.default_params, term_params={"base": {"credit": credit}})
    _, _, _, terms = run_turn(
        env,
        [[1, 1], [4, 4], [0, 4], [2, 1], [2, 1]],
        [RIGHT, NOOP, NOOP, NOOP, NOOP],
        CORNERS,
        params,
    )
    assert_term(terms, "base", expected + [-100.0, -100.0])


def test_applies_to_overrides_mask_roles():
    env = env_a()
    masks = np.asarray(env.default_params.reward.role_masks)
    params = env.default_params.replace(
        reward=env.default_params.reward.replace(
            role_masks=masks * 0 + np.asarray(env.is_predator, np.float32)
        )
    )  # all: predators
    _, _, _, terms = run_turn(env, params=params, **OBSTACLE_TURN)
    assert_term(terms, "base", [-5.0, -5.0, -205.0, 0.0, 0.0])
    assert_term(terms, "survival", [0.0] * 5)
    assert_term(terms, "capture_proximity", [0.0, 1.0, 0.0, 0.0, 0.0])


# ------------------------------------------------------------ no uncaptured prey left
def test_every_shaping_term_is_zero_once_all_prey_are_captured():
    env = env_a()
    params = with_terms(env, env.default_params, weights={n: 1.7 for n in TERMS})
    _, _, _, terms = run_turn(
        env,
        [[1, 1], [2, 1], [4, 4], [2, 1], [4, 4]],
        [RIGHT, YMINUS, LEFT, NOOP, NOOP],
        CORNERS,
        params,
        captured=[False, False, False, True, True],
    )
    assert_term(terms, "base", [-5 * 1.7] * 3 + [0.0, 0.0])  # step cost only, no recapture
    for name in TERMS[1:]:
        assert_term(terms, name, [0.0] * 5)


def test_captured_prey_is_ignored_by_distances():
    # prey_1 is captured at (2,1), next to predator_1 at (3,1); prey_2 is free at (0,4).
    _, _, _, terms = run_turn(
        env_a(),
        [[3, 1], [4, 0], [4, 4], [2, 1], [0, 4]],
        [NOOP] * 5,
        [[0, 0], [1, 0]],
        captured=[False, False, False, True, False],
    )
    assert_term(terms, "predator_distance", [-6.0, -8.0, -4.0, 0.0, 0.0])
    assert_term(terms, "prey_distance", [0.0, 0.0, 0.0, 0.0, 4.0])
    assert_term(terms, "capture_proximity", [0.0] * 5)
    assert_term(terms, "survival", [0.0, 0.0, 0.0, 0.0, 1.0])


def test_weights_never_change_the_dynamics():
    env = env_a()
    zero = with_terms(env, env.default_params, weights={n: 0.0 for n in TERMS})
    heavy = with_terms(env, env.default_params, weights={n: -7.5 for n in TERMS})
    a_state, *_, a_terms = run_turn(env, params=zero, **PILE_ON)
    b_state, *_, b_terms = run_turn(env, params=heavy, **PILE_ON)
    jax.tree.map(np.testing.assert_array_equal, a_state, b_state)
    assert all(not a_terms[n].any() for n in TERMS)
    assert any(b_terms[n].any() for n in TERMS)


# ------------------------------------------------------------ JAX vs the NumPy oracle
def compare_rollout(env, params, positions, obstacles, actions_per_turn):
    oracle = oracle_for(env, params)
    ref = oracle.reset_to(positions, obstacles)
    # Traced, so not checked: these layouts may stack agents and obstacles on purpose.
    _, state = jit_reset_to(env)(np.asarray(positions), np.asarray(obstacles), params)
    step = jit_step(env)
    for turn, actions in enumerate(actions_per_turn):
        ref, ref_reward, ref_terms, ref_term, ref_trunc, _ = oracle.step(ref, actions)
        _, state, reward, terminated, truncated, info = step(
            jax.random.PRNGKey(turn), state, np.asarray(actions, np.int32), params
        )
        np.testing.assert_array_equal(np.asarray(state.positions), ref.positions)
        np.testing.assert_array_equal(np.asarray(state.captured), ref.captured)
        np.testing.assert_allclose(
            np.asarray(info["reward_terms"]),
            ref_terms,
            rtol=1e-5,
            atol=1e-3,
            err_msg=f"turn {turn}",
        )
        np.testing.assert_allclose(np.asarray(reward), ref_reward, rtol=1e-5, atol=1e-3)
        assert (bool(terminated), bool(truncated)) == (ref_term, ref_trunc)
        if ref_term or ref_trunc:
            return


cell = st.tuples(st.integers(0, 4), st.integers(0, 4)).map(list)


@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    positions=st.lists(cell, min_size=5, max_size=5),
    obstacles=st.lists(cell, min_size=2, max_size=2),
    actions=st.lists(st.lists(st.integers(0, 5), min_size=5, max_size=5), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_matches_oracle_on_random_layouts_shape_a(positions, obstacles, actions, seed):
    """Shared and obstacle cells allowed (blocking is off); action 5 is out of range."""
    env = env_a()
    params = with_terms(
        env,
        random_params(env, np.random.default_rng(seed)),
        capture_threshold=int(seed % 3 + 1),
        max_steps=int(seed % 4 + 1),
    )
    compare_rollout(env, params, positions, obstacles, actions)


def test_matches_oracle_on_random_rollouts_shape_b():
    """Two sub-steps per turn (prey speed 2), blocking obstacles, no cell sharing."""
    env = env_b()
    rng = np.random.default_rng(7)
    reset = jax.jit(env.reset)
    for episode in range(12):
        params = random_params(env, rng)
        _, state = reset(jax.random.PRNGKey(episode), params)
        actions = rng.integers(0, env.num_actions, size=(8, env.num_agents)).tolist()
        compare_rollout(
            env,
            params,
            np.asarray(state.positions).tolist(),
            np.asarray(state.obstacles).tolist(),
            actions,
        )


def test_term_defaults_give_a_choice_its_default_option():
    from ppage_jax.rewards.registry import get_term

    assert get_term("base").defaults() == {
        "capture_reward": 100.0,
        "captured_penalty": 100.0,
        "step_cost": 5.0,
        "obstacle_penalty": 200.0,
        "credit": "full",
    }
    assert get_term("capture_proximity").defaults() == {"radius": 1.0}
