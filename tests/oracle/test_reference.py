"""Scenario tests for the NumPy oracle ``ppage_jax.oracle.env``.

Every test sets concrete positions and checks concrete outcomes. Conventions: [x, y] with
y growing downward; the discrete_5 table is RIGHT [1,0], "UP" [0,1] (y+1), LEFT [-1,0],
"DOWN" [0,-1] (y-1), NOOP [0,0].
"""

from __future__ import annotations

import numpy as np
import pytest

from ppage_jax.oracle.env import ReferenceGridWorld, RefState
from ppage_jax.oracle.reward_terms import REWARD_TERMS

DISCRETE_5 = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [0, 0]])
RIGHT, YPLUS, LEFT, YMINUS, NOOP = range(5)
CROSS = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1], [0, 0]])
NE = 0  # [+1, +1]

BASE = {"name": "base", "weight": 1.0, "params": {}, "applies_to": "all"}


def make_env(
    n_predators: int = 1,
    n_prey: int = 1,
    *,
    size: int = 5,
    speeds=None,
    stamina=None,
    terms=None,
    table=DISCRETE_5,
    **kwargs,
) -> ReferenceGridWorld:
    n = n_predators + n_prey
    return ReferenceGridWorld(
        size=size,
        n_predators=n_predators,
        n_prey=n_prey,
        speeds=speeds if speeds is not None else [1] * n,
        stamina=stamina if stamina is not None else [None] * n,
        action_table=table,
        reward_terms=terms if terms is not None else [BASE],
        **kwargs,
    )


def pos(state: RefState) -> list:
    return state.positions.tolist()


# ----------------------------------------------------------------------- capture


def test_predator_steps_onto_prey_captures():
    env = make_env()
    s0 = env.reset_to([[1, 1], [2, 1]], [])
    s1, reward, terms, terminated, truncated, info = env.step(s0, [RIGHT, NOOP])
    assert pos(s1) == [[2, 1], [2, 1]]
    assert s1.captured.tolist() == [False, True]
    assert s1.captures_total == 1
    assert info["captures_this_step"] == 1
    assert info["captured"].tolist() == [False, True]
    assert reward.tolist() == [95.0, -100.0]
    assert terms.shape == (2, 1)
    assert terminated and not truncated
    assert s1.turn == 1


def test_prey_steps_onto_predator_captures():
    env = make_env()
    s0 = env.reset_to([[1, 1], [2, 1]], [])
    s1, reward, _, terminated, _, info = env.step(s0, [NOOP, LEFT])
    assert pos(s1) == [[1, 1], [1, 1]]
    assert s1.captured.tolist() == [False, True]
    assert reward.tolist() == [95.0, -100.0]
    assert terminated and info["captures_this_step"] == 1


def test_swap_does_not_capture():
    env = make_env()
    s0 = env.reset_to([[1, 1], [2, 1]], [])
    s1, reward, _, terminated, _, info = env.step(s0, [RIGHT, LEFT])
    assert pos(s1) == [[2, 1], [1, 1]]
    assert not s1.captured.any()
    assert s1.captures_total == 0 and info["captures_this_step"] == 0
    assert reward.tolist() == [-5.0, 0.0]
    assert not terminated


def test_two_prey_captured_at_once_count_two():
    env = make_env(1, 2, capture_threshold=2)
    s0 = env.reset_to([[1, 1], [2, 1], [2, 1]], [])
    s1, reward, _, terminated, _, info = env.step(s0, [RIGHT, NOOP, NOOP])
    assert s1.captured.tolist() == [False, True, True]
    assert s1.captures_total == 2 and info["captures_this_step"] == 2
    # "full" credit: the predator gets the bonus once, each prey pays.
    assert reward.tolist() == [95.0, -100.0, -100.0]
    assert terminated


def test_captured_prey_frozen_and_never_recounted():
    env = make_env(1, 2, capture_threshold=5)
    s0 = env.reset_to([[1, 1], [2, 1], [4, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, NOOP, NOOP])
    assert s1.captured.tolist() == [False, True, False]
    # Captured prey tries to move: it stays. Predator leaves and comes back.
    s2, r2, *_ = env.step(s1, [RIGHT, YPLUS, NOOP])
    assert pos(s2)[:2] == [[3, 1], [2, 1]]
    s3, r3, _, _, _, info = env.step(s2, [LEFT, YPLUS, NOOP])
    assert pos(s3)[:2] == [[2, 1], [2, 1]]
    assert s3.captures_total == 1 and info["captures_this_step"] == 0
    assert r3.tolist() == [-5.0, 0.0, 0.0]


# ---------------------------------------------------------------------- movement


def test_diagonal_into_wall_slides():
    env = make_env(size=8, table=CROSS)
    s0 = env.reset_to([[7, 3], [0, 0]], [])
    s1, *_ = env.step(s0, [NE, 4])
    assert pos(s1)[0] == [7, 4]


def test_cardinal_into_wall_stays():
    env = make_env()
    s0 = env.reset_to([[4, 0], [0, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, YPLUS])
    assert pos(s1) == [[4, 0], [0, 4]]


def test_obstacle_blocks_when_blocking_on():
    env = make_env(block_agents_by_obstacles=True)
    s0 = env.reset_to([[1, 1], [4, 4]], [[2, 1], [3, 4]])
    s1, reward, *_ = env.step(s0, [RIGHT, LEFT])
    assert pos(s1) == [[1, 1], [4, 4]]
    assert reward.tolist() == [-5.0, 0.0]


def test_obstacle_penalty_reachable_when_blocking_off():
    env = make_env(block_agents_by_obstacles=False)
    s0 = env.reset_to([[1, 1], [4, 4]], [[2, 1], [3, 4]])
    s1, reward, *_ = env.step(s0, [RIGHT, LEFT])
    assert pos(s1) == [[2, 1], [3, 4]]
    assert reward.tolist() == [-205.0, -200.0]
    # Standing penalty: paid again while staying there.
    s2, reward2, *_ = env.step(s1, [NOOP, NOOP])
    assert reward2.tolist() == [-205.0, -200.0]


def test_sharing_off_earlier_agent_blocked_by_later_agents_old_cell():
    env = make_env(2, 1, allow_cell_sharing=False)
    s0 = env.reset_to([[1, 1], [2, 1], [4, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, RIGHT, NOOP])
    # predator_1 targets predator_2's old cell; predator_2 is processed later -> blocked.
    assert pos(s1)[:2] == [[1, 1], [3, 1]]


def test_sharing_off_later_agent_sees_earlier_agents_new_cell():
    env = make_env(2, 1, allow_cell_sharing=False)
    s0 = env.reset_to([[2, 1], [1, 1], [4, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, RIGHT, NOOP])
    # predator_1 moved away first, so predator_2 may enter its old cell.
    assert pos(s1)[:2] == [[3, 1], [2, 1]]


def test_sharing_on_moves_are_simultaneous():
    env = make_env(2, 1, allow_cell_sharing=True)
    s0 = env.reset_to([[1, 1], [2, 1], [4, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, RIGHT, NOOP])
    assert pos(s1)[:2] == [[2, 1], [3, 1]]


def test_sharing_off_blocks_same_role_for_both_roles():
    env = make_env(2, 2, allow_cell_sharing=False)
    s0 = env.reset_to([[2, 1], [3, 1], [4, 4], [4, 3]], [])
    s1, *_ = env.step(s0, [RIGHT, NOOP, NOOP, YPLUS])
    assert pos(s1)[0] == [2, 1]  # predator_1 cannot join predator_2
    assert pos(s1)[3] == [4, 3]  # prey_2 cannot join uncaptured prey_1


def test_sharing_off_allows_cross_role_overlap():
    env = make_env(1, 1, allow_cell_sharing=False)
    s0 = env.reset_to([[1, 1], [2, 1]], [])
    s1, _, _, terminated, _, _ = env.step(s0, [RIGHT, NOOP])
    assert pos(s1) == [[2, 1], [2, 1]]
    assert s1.captured.tolist() == [False, True] and terminated


def test_sharing_off_captured_prey_do_not_block():
    env = make_env(2, 2, allow_cell_sharing=False, capture_threshold=5)
    s0 = env.reset_to([[4, 0], [0, 4], [0, 3], [2, 4]], [])
    s1, *_ = env.step(s0, [NOOP, NOOP, YPLUS, NOOP])  # prey_1 walks onto predator_2
    assert s1.captured.tolist() == [False, False, True, False]
    s2, *_ = env.step(s1, [NOOP, YMINUS, NOOP, LEFT])  # predator_2 leaves (0,4)
    assert pos(s2)[1:] == [[0, 3], [0, 4], [1, 4]]
    s3, *_ = env.step(s2, [NOOP, NOOP, NOOP, LEFT])  # prey_2 joins the captured prey_1
    assert pos(s3)[3] == [0, 4]
    assert s3.captured.tolist() == [False, False, True, False]


def test_out_of_range_action_is_noop():
    env = make_env(stamina=[4, 4])
    s0 = env.reset_to([[1, 1], [3, 3]], [])
    s1, reward, *_ = env.step(s0, [5, -1])
    assert pos(s1) == [[1, 1], [3, 3]]
    assert s1.stamina == [4, 4]
    assert reward.tolist() == [-5.0, 0.0]


# ------------------------------------------------------------------ speed/stamina


def test_speed3_predator_captures_prey_it_passes_and_stops_paying():
    env = make_env(speeds=[3, 1], stamina=[10, None])
    s0 = env.reset_to([[0, 0], [2, 0]], [])
    s1, reward, terms, terminated, _, info = env.step(s0, [RIGHT, NOOP])
    # Sub-step 0: (1,0), -5. Sub-step 1: (2,0) captures, +95. Sub-step 2 skipped.
    assert pos(s1) == [[2, 0], [2, 0]]
    assert reward.tolist() == [90.0, -100.0]
    assert terminated and info["captures_this_step"] == 1
    # Budget 3 is spent whatever happened.
    assert s1.stamina == [7, None]
    assert s1.turn == 1


def test_speed3_without_termination_runs_all_substeps():
    env = make_env(1, 2, speeds=[3, 1, 1], capture_threshold=2)
    s0 = env.reset_to([[0, 0], [2, 0], [4, 4]], [])
    s1, reward, _, terminated, _, _ = env.step(s0, [RIGHT, NOOP, NOOP])
    assert pos(s1)[0] == [3, 0]
    assert reward.tolist() == [-5.0 + 95.0 - 5.0, -100.0, 0.0]
    assert not terminated


def test_slow_agents_get_per_substep_terms_every_substep():
    terms = [BASE, {"name": "survival", "weight": 1.0, "params": {}, "applies_to": "all"}]
    env = make_env(speeds=[1, 3], terms=terms)
    s0 = env.reset_to([[0, 0], [4, 4]], [])
    s1, reward, t, *_ = env.step(s0, [NOOP, NOOP])
    assert t.tolist() == [[-15.0, 0.0], [0.0, 3.0]]
    assert reward.tolist() == [-15.0, 3.0]


def test_slow_agent_moves_only_in_first_substeps():
    env = make_env(speeds=[1, 3])
    s0 = env.reset_to([[0, 0], [0, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, RIGHT])
    assert pos(s1) == [[1, 0], [3, 4]]


def test_stamina_budget_and_depletion():
    env = make_env(speeds=[3, 1], stamina=[2, 5])
    s0 = env.reset_to([[0, 0], [4, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, NOOP])
    assert pos(s1)[0] == [2, 0]  # budget min(3, 2) = 2
    assert s1.stamina == [0, 5]  # NOOP spends nothing
    s2, *_ = env.step(s1, [RIGHT, YMINUS])
    assert pos(s2) == [[2, 0], [4, 3]]  # out of stamina: cannot move
    assert s2.stamina == [0, 4]


def test_blocked_move_still_spends_stamina():
    env = make_env(speeds=[3, 1], stamina=[5, None])
    s0 = env.reset_to([[4, 0], [0, 4]], [])
    s1, *_ = env.step(s0, [RIGHT, NOOP])
    assert pos(s1)[0] == [4, 0]
    assert s1.stamina == [2, None]


def test_reset_to_stamina_override():
    env = make_env(stamina=[5, None])
    s0 = env.reset_to([[0, 0], [4, 4]], [], stamina=[1, 2])
    assert s0.stamina == [1, 2]
    assert env.reset_to([[0, 0], [4, 4]], []).stamina == [5, None]


# ------------------------------------------------------------------ credit modes


@pytest.mark.parametrize(
    "credit, expected",
    [("full", [95.0, 95.0, -5.0]), ("split", [45.0, 45.0, -5.0]), ("team", [95.0, 95.0, 95.0])],
)
def test_credit_modes_two_predators_on_one_cell(credit, expected):
    term = {"name": "base", "weight": 1.0, "params": {"credit": credit}, "applies_to": "all"}
    env = make_env(3, 2, terms=[term], capture_threshold=5)
    s0 = env.reset_to([[1, 1], [3, 1], [4, 4], [2, 1], [0, 4]], [])
    s1, reward, *_ = env.step(s0, [RIGHT, LEFT, NOOP, NOOP, NOOP])
    assert pos(s1)[:2] == [[2, 1], [2, 1]]
    assert s1.captured.tolist() == [False, False, False, True, False]
    assert reward.tolist() == expected + [-100.0, 0.0]


def test_team_credit_scales_with_prey_captured_in_substep():
    term = {"name": "base", "weight": 1.0, "params": {"credit": "team"}, "applies_to": "all"}
    env = make_env(2, 2, terms=[term], capture_threshold=5)
    s0 = env.reset_to([[1, 1], [4, 4], [2, 1], [2, 1]], [])
    s1, reward, *_ = env.step(s0, [RIGHT, NOOP, NOOP, NOOP])
    assert reward.tolist() == [195.0, 195.0, -100.0, -100.0]


def test_split_credit_counts_predators_per_cell():
    term = {"name": "base", "weight": 1.0, "params": {"credit": "split"}, "applies_to": "all"}
    env = make_env(3, 2, terms=[term], capture_threshold=5)
    # predators 1 and 2 meet prey_1 at (2,1); predator 3 alone catches prey_2 at (4,3).
    s0 = env.reset_to([[1, 1], [3, 1], [4, 4], [2, 1], [4, 3]], [])
    s1, reward, *_ = env.step(s0, [RIGHT, LEFT, YMINUS, NOOP, NOOP])
    assert reward.tolist() == [45.0, 45.0, 95.0, -100.0, -100.0]


def test_base_params_and_weight():
    term = {
        "name": "base",
        "weight": 2.0,
        "params": {"capture_reward": 10.0, "step_cost": 1.0, "captured_penalty": 3.0},
        "applies_to": "all",
    }
    env = make_env(terms=[term])
    s0 = env.reset_to([[1, 1], [2, 1]], [])
    _, reward, *_ = env.step(s0, [RIGHT, NOOP])
    assert reward.tolist() == [18.0, -6.0]


# ----------------------------------------------------------------------- shaping


def test_predator_distance_ignores_captured_prey():
    terms = [{"name": "predator_distance", "weight": 1.0, "params": {}, "applies_to": "all"}]
    env = make_env(1, 2, terms=terms, capture_threshold=5)
    s0 = env.reset_to([[0, 0], [1, 0], [4, 4]], [])
    s1, reward, *_ = env.step(s0, [RIGHT, NOOP, NOOP])
    assert s1.captured.tolist() == [False, True, False]
    # Nearest *uncaptured* prey is prey_2: |1-4| + |0-4| = 7 (prey_1 at distance 0 ignored).
    assert reward.tolist() == [-7.0, 0.0, 0.0]


def test_predator_distance_zero_when_no_prey_left():
    terms = [{"name": "predator_distance", "weight": 0.5, "params": {}, "applies_to": "all"}]
    env = make_env(2, 1, terms=terms, capture_threshold=5)
    s0 = env.reset_to([[0, 0], [4, 4], [1, 0]], [])
    s1, reward, *_ = env.step(s0, [RIGHT, NOOP, NOOP])
    assert s1.captured.tolist() == [False, False, True]
    assert reward.tolist() == [0.0, 0.0, 0.0]
    # Before any capture: -(0.5 * distance).
    s2, reward2, *_ = env.step(env.reset_to([[0, 0], [4, 4], [2, 1]], []), [NOOP] * 3)
    assert reward2.tolist() == [-1.5, -2.5, 0.0]


def test_survival_only_uncaptured_prey():
    terms = [{"name": "survival", "weight": 2.0, "params": {}, "applies_to": "all"}]
    env = make_env(1, 2, terms=terms, capture_threshold=5)
    s0 = env.reset_to([[0, 0], [1, 0], [4, 4]], [])
    _, reward, *_ = env.step(s0, [RIGHT, NOOP, NOOP])
    assert reward.tolist() == [0.0, 0.0, 2.0]


def test_applies_to_masks_roles_and_terms_sum_to_reward():
    terms = [
        {"name": "base", "weight": 1.0, "params": {}, "applies_to": "prey"},
        {"name": "predator_distance", "weight": 1.0, "params": {}, "applies_to": "predator"},
        {"name": "survival", "weight": 1.0, "params": {}, "applies_to": "predator"},
    ]
    env = make_env(1, 1, terms=terms)
    assert env.term_names == ("base", "predator_distance", "survival")
    s0 = env.reset_to([[0, 0], [3, 2]], [])
    _, reward, t, *_ = env.step(s0, [NOOP, NOOP])
    assert t.tolist() == [[0.0, -5.0, 0.0], [0.0, 0.0, 0.0]]
    np.testing.assert_array_equal(reward, t.sum(axis=1))


def test_unknown_term_raises_listing_known():
    with pytest.raises(ValueError, match="predator_distance"):
        make_env(terms=[{"name": "nope", "weight": 1.0, "params": {}, "applies_to": "all"}])
    assert set(REWARD_TERMS) >= {"base", "predator_distance", "survival"}


def test_bad_term_options_raise():
    with pytest.raises(ValueError, match="credit"):
        make_env(terms=[{"name": "base", "params": {"credit": "half"}}])
    with pytest.raises(ValueError, match="applies_to"):
        make_env(terms=[{"name": "base", "applies_to": "wolves"}])
    with pytest.raises(ValueError, match="unknown params"):
        make_env(terms=[{"name": "base", "params": {"capture_bonus": 1}}])


# ------------------------------------------------------------------------- flags


def test_truncation_at_max_steps_with_both_flags():
    env = make_env(max_steps=1)
    s0 = env.reset_to([[1, 1], [2, 1]], [])
    s1, _, _, terminated, truncated, _ = env.step(s0, [RIGHT, NOOP])
    assert terminated and truncated


def test_truncation_counts_turns_not_substeps():
    env = make_env(speeds=[1, 3], max_steps=3)
    state = env.reset_to([[0, 0], [4, 4]], [])
    flags = []
    for _ in range(3):
        state, _, _, terminated, truncated, _ = env.step(state, [NOOP, NOOP])
        flags.append((terminated, truncated))
    assert flags == [(False, False), (False, False), (False, True)]
    assert state.turn == 3


def test_step_does_not_mutate_input_state():
    env = make_env(stamina=[3, 3])
    s0 = env.reset_to([[1, 1], [2, 1]], [])
    before = (s0.positions.copy(), s0.captured.copy(), list(s0.stamina), s0.turn)
    env.step(s0, [RIGHT, RIGHT])
    assert s0.positions.tolist() == before[0].tolist()
    assert s0.captured.tolist() == before[1].tolist()
    assert (s0.stamina, s0.turn, s0.captures_total) == (before[2], before[3], 0)


# ------------------------------------------------------------------------- reset


def test_reset_distinct_cells_and_obstacles_off_agents():
    env = make_env(2, 3, size=4, num_obstacles=5)
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = env.reset(rng)
        cells = [tuple(p) for p in s.positions.tolist()] + [tuple(o) for o in s.obstacles.tolist()]
        assert len(cells) == 10 and len(set(cells)) == 10
        assert s.positions.min() >= 0 and s.positions.max() < 4
        assert not s.captured.any() and s.turn == 0 and s.captures_total == 0


def test_too_many_obstacles_rejected():
    with pytest.raises(ValueError):
        make_env(size=2, num_obstacles=3)
