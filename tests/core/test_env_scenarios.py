"""Scenario tests for the JAX GridWorld: one test per rule, concrete layouts, concrete values.

Conventions: positions are [x, y] with y growing downward. discrete_5 is RIGHT [1, 0],
YPLUS [0, 1], LEFT [-1, 0], YMINUS [0, -1], NOOP [0, 0]. Every scenario starts from
``env.reset_to`` on a config built with ``pj.load_config(None, overrides=...)``; each distinct
config is compiled once (``sim(...)`` caches a jitted step per config).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.config.env_spec import EnvSpec, RewardTerm
from ppage_jax.state import NO_TRUNCATION, UNLIMITED_STAMINA

RIGHT, YPLUS, LEFT, YMINUS, NOOP = range(5)
KEY = jax.random.key(0)

# 1 predator vs 1 prey, both speed 1, 5x5, no obstacles, base reward only.
BASE = {
    "env.size": 5,
    "env.obstacle_percentage": 0.0,
    "agents.predators.count": 1,
    "agents.preys.count": 1,
    "agents.predators.speed": 1,
    "agents.preys.speed": 1,
    "rewards.shaping": [],
    "observations.type": "local_only",
    "observations.params": {},
}


class StepOut(NamedTuple):
    state: pj.State
    reward: list
    terminated: bool
    truncated: bool
    info: dict
    obs: np.ndarray

    @property
    def positions(self) -> list:
        return np.asarray(self.state.positions).tolist()

    @property
    def captured(self) -> list:
        return np.asarray(self.state.captured).tolist()

    @property
    def terms(self) -> list:
        return np.asarray(self.info["reward_terms"]).tolist()


class Sim:
    """A GridWorld with its jitted reset_to / step (compiled once per config)."""

    def __init__(self, env: pj.GridWorld):
        self.env = env
        self.params = env.default_params
        self._reset_to = jax.jit(env.reset_to)
        self._step = jax.jit(env.step)

    def start(self, positions, obstacles=(), params: pj.EnvParams | None = None) -> pj.State:
        obstacles = np.asarray(obstacles, np.int32).reshape(-1, 2)
        _, state = self._reset_to(
            jnp.asarray(positions, jnp.int32),
            jnp.asarray(obstacles),
            self.params if params is None else params,
        )
        return state

    def step(self, state: pj.State, actions, params: pj.EnvParams | None = None) -> StepOut:
        obs, state, reward, term, trunc, info = self._step(
            KEY, state, jnp.asarray(actions, jnp.int32), self.params if params is None else params
        )
        return StepOut(
            state,
            np.asarray(reward).tolist(),
            bool(term),
            bool(trunc),
            jax.tree.map(np.asarray, info),
            np.asarray(obs),
        )


_SIMS: dict[str, Sim] = {}


def sim(**overrides: Any) -> Sim:
    """The cached Sim for BASE updated with dotted overrides (pass them as a dict via **)."""
    merged = {**BASE, **overrides}
    if "env.map" in overrides:  # a map fixes the obstacles; the percentage must not be set
        del merged["env.obstacle_percentage"]
    cache_key = json.dumps(merged, sort_keys=True)
    if cache_key not in _SIMS:
        _SIMS[cache_key] = Sim(pj.make(pj.load_config(None, overrides=merged)))
    return _SIMS[cache_key]


def with_params(params: pj.EnvParams, **fields: Any) -> pj.EnvParams:
    """Params with some int32 leaves (speeds, stamina, capture_threshold, max_steps) replaced."""
    return params.replace(**{k: jnp.asarray(v, jnp.int32) for k, v in fields.items()})


def roles(n_pred: int, n_prey: int, **more: Any) -> dict:
    return {"agents.predators.count": n_pred, "agents.preys.count": n_prey, **more}


# ------------------------------------------------------------- the per-step pipeline (A, B, C)


def test_predator_steps_onto_prey_captures():
    s = sim()
    out = s.step(s.start([[2, 2], [3, 2]]), [RIGHT, NOOP])
    assert out.positions == [[3, 2], [3, 2]]
    assert out.captured == [False, True]
    assert out.info["captured"].tolist() == [False, True]
    assert out.reward == [95.0, -100.0]
    assert out.terms == [[95.0], [-100.0]]
    assert out.terminated and not out.truncated
    assert int(out.info["captures"]) == 1 and int(out.info["captures_total"]) == 1
    assert int(out.state.turn) == 1
    # Observation (local_only): own [x, y] and the captured flag, for every agent.
    assert out.obs.tolist() == [[3.0, 2.0, 0.0], [3.0, 2.0, 1.0]]


def test_prey_steps_onto_predator_captures():
    s = sim()
    out = s.step(s.start([[3, 2], [2, 2]]), [NOOP, RIGHT])
    assert out.positions == [[3, 2], [3, 2]]
    assert out.captured == [False, True]
    assert out.reward == [95.0, -100.0]
    assert out.terminated and int(out.info["captures"]) == 1


def test_swap_does_not_capture():
    s = sim()
    out = s.step(s.start([[2, 2], [3, 2]]), [RIGHT, LEFT])
    assert out.positions == [[3, 2], [2, 2]]
    assert out.captured == [False, False]
    assert out.reward == [-5.0, 0.0]
    assert not out.terminated and int(out.info["captures_total"]) == 0


# ------------------------------------------------------------------------- speed sub-steps


def test_speed3_predator_captures_prey_it_passes_and_nothing_is_paid_after():
    s = sim(
        **roles(1, 2),
        **{"agents.predators.speed": 3, "rewards.shaping": [{"name": "survival", "weight": 1.0}]},
    )
    assert s.env.layout.max_speed == 3
    assert s.env.reward_terms == ("base", "survival")
    start = s.start([[0, 0], [2, 0], [4, 4]])
    out = s.step(start, [RIGHT, NOOP, NOOP])
    # k=0: predator to (1,0), -5; both prey +1. k=1: (2,0) captures prey_1: +95, -100,
    # prey_2 +1. The episode terminated, so k=2 neither moves nor pays.
    assert out.positions == [[2, 0], [2, 0], [4, 4]]
    assert out.captured == [False, True, False]
    assert out.terms == [[90.0, 0.0], [-100.0, 1.0], [0.0, 2.0]]
    assert out.reward == [90.0, -99.0, 2.0]
    assert out.terminated and int(out.info["captures"]) == 1
    # With threshold 2 (a traced value) the turn runs its third sub-step: the predator walks on
    # past the captured prey, which stays frozen where it was caught.
    out2 = s.step(start, [RIGHT, NOOP, NOOP], with_params(s.params, capture_threshold=2))
    assert out2.positions == [[3, 0], [2, 0], [4, 4]]
    assert out2.captured == [False, True, False]
    assert out2.terms == [[85.0, 0.0], [-100.0, 1.0], [0.0, 3.0]]
    assert not out2.terminated


def test_agent_moves_only_in_its_first_speed_substeps():
    s = sim(**FAST)
    out = s.step(s.start([[0, 0], [0, 4]]), [RIGHT, RIGHT])
    assert out.positions == [[1, 0], [3, 4]]
    # The step cost is per predator per sub-step: three sub-steps ran.
    assert out.reward == [-15.0, 0.0]


def test_traced_speeds_below_static_max_run_fewer_substeps():
    s = sim(**FAST)
    slow = with_params(s.params, speeds=[1, 1])
    out = s.step(s.start([[0, 0], [0, 4]], params=slow), [RIGHT, RIGHT], slow)
    assert out.positions == [[1, 0], [1, 4]]
    assert out.reward == [-5.0, 0.0]  # one sub-step, exactly like a speed-1 config


# --------------------------------------------------------------------- captures and threshold


def test_two_prey_captured_at_once_count_two():
    s = sim(**roles(1, 2))
    start = s.start([[1, 1], [2, 1], [2, 1]])
    out = s.step(start, [RIGHT, NOOP, NOOP], with_params(s.params, capture_threshold=2))
    assert out.captured == [False, True, True]
    assert int(out.info["captures"]) == 2 and int(out.info["captures_total"]) == 2
    assert out.reward == [95.0, -100.0, -100.0]  # full credit: the predator is paid once
    assert out.terminated
    out3 = s.step(start, [RIGHT, NOOP, NOOP], with_params(s.params, capture_threshold=3))
    assert int(out3.info["captures_total"]) == 2 and not out3.terminated


def test_capture_threshold_is_cumulative():
    s = sim(**roles(1, 2))
    params = with_params(s.params, capture_threshold=2)
    state = s.start([[1, 1], [2, 1], [4, 1]], params=params)
    seen = []
    for _ in range(3):
        out = s.step(state, [RIGHT, NOOP, NOOP], params)
        state = out.state
        seen.append((int(out.info["captures"]), int(out.info["captures_total"]), out.terminated))
    assert seen == [(1, 1, False), (0, 1, False), (1, 2, True)]
    assert out.positions == [[4, 1], [2, 1], [4, 1]]


def test_capture_threshold_zero_and_unreachable():
    s = sim(**roles(1, 2))
    zero = with_params(s.params, capture_threshold=0)
    out = s.step(s.start([[0, 0], [4, 4], [4, 3]], params=zero), [NOOP] * 3, zero)
    assert out.terminated and int(out.info["captures_total"]) == 0
    big = with_params(s.params, capture_threshold=3)  # more than the 2 prey
    out = s.step(s.start([[1, 1], [2, 1], [2, 1]], params=big), [RIGHT, NOOP, NOOP], big)
    assert int(out.info["captures_total"]) == 2 and not out.terminated


def test_captured_prey_frozen_and_never_recaptured():
    s = sim(**roles(1, 2))
    params = with_params(s.params, capture_threshold=5)
    out = s.step(s.start([[1, 1], [2, 1], [4, 4]], params=params), [RIGHT, NOOP, NOOP], params)
    assert out.captured == [False, True, False]
    assert out.reward == [95.0, -100.0, 0.0]
    # The captured prey tries to move: it stays. The predator leaves and comes back.
    out = s.step(out.state, [RIGHT, YPLUS, NOOP], params)
    assert out.positions[:2] == [[3, 1], [2, 1]]
    assert out.reward == [-5.0, 0.0, 0.0]
    out = s.step(out.state, [LEFT, YPLUS, NOOP], params)
    assert out.positions[:2] == [[2, 1], [2, 1]]
    assert out.captured == [False, True, False]
    assert int(out.info["captures"]) == 0 and int(out.info["captures_total"]) == 1
    assert out.reward == [-5.0, 0.0, 0.0]  # no second bonus, no second penalty
    assert out.obs[1].tolist() == [2.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "credit, expected",
    [
        ("full", [95.0, 95.0, -5.0]),
        ("split", [45.0, 45.0, -5.0]),
        ("team", [95.0, 95.0, 95.0]),
    ],
)
def test_credit_to_every_predator_on_the_cell(credit, expected):
    s = sim(**roles(3, 2), **{"env.termination.capture_threshold": 5})
    params = s.env.with_term_params(s.params, "base", credit=credit)
    out = s.step(
        s.start([[1, 1], [3, 1], [4, 4], [2, 1], [0, 4]]), [RIGHT, LEFT, NOOP, NOOP, NOOP], params
    )
    assert out.positions[:2] == [[2, 1], [2, 1]]
    assert out.captured == [False, False, False, True, False]
    assert out.reward == expected + [-100.0, 0.0]


def test_split_credit_counts_predators_per_cell():
    s = sim(**roles(3, 2), **{"env.termination.capture_threshold": 5})
    params = s.env.with_term_params(s.params, "base", credit="split")
    out = s.step(
        s.start([[1, 1], [3, 1], [4, 4], [2, 1], [4, 3]]), [RIGHT, LEFT, YMINUS, NOOP, NOOP], params
    )
    assert out.reward == [45.0, 45.0, 95.0, -100.0, -100.0]
    assert int(out.info["captures"]) == 2


# -------------------------------------------------------------------------------- movement


SHARING_OFF = {**roles(2, 2), "env.dynamics.allow_cell_sharing": False}


def test_sharing_off_agent_order_rule():
    s = sim(**SHARING_OFF)
    idle = [NOOP, NOOP]  # the two prey stay at (4,4) and (0,4)
    # predator_1 targets predator_2's old cell; predator_2 moves later, so 1 is blocked.
    out = s.step(s.start([[1, 1], [2, 1], [4, 4], [0, 4]]), [RIGHT, RIGHT] + idle)
    assert out.positions[:2] == [[1, 1], [3, 1]]
    # predator_1 moves first and frees its cell, so predator_2 may enter it.
    out = s.step(s.start([[2, 1], [1, 1], [4, 4], [0, 4]]), [RIGHT, RIGHT] + idle)
    assert out.positions[:2] == [[3, 1], [2, 1]]
    # Two agents of one role heading for the same free cell: the first one gets it.
    out = s.step(s.start([[1, 1], [3, 1], [4, 4], [0, 4]]), [RIGHT, LEFT] + idle)
    assert out.positions[:2] == [[2, 1], [3, 1]]
    # The same order rule for prey: prey_1 is blocked by prey_2's old cell.
    out = s.step(s.start([[0, 0], [4, 0], [2, 3], [3, 3]]), [NOOP, NOOP, RIGHT, RIGHT])
    assert out.positions[2:] == [[2, 3], [4, 3]]


def test_sharing_on_moves_are_simultaneous():
    s = sim(**roles(2, 1))
    out = s.step(s.start([[1, 1], [2, 1], [4, 4]]), [RIGHT, RIGHT, NOOP])
    assert out.positions[:2] == [[2, 1], [3, 1]]
    out = s.step(s.start([[1, 1], [3, 1], [4, 4]]), [RIGHT, LEFT, NOOP])
    assert out.positions[:2] == [[2, 1], [2, 1]]


def test_sharing_off_blocks_same_role_only_and_captured_prey_do_not_block():
    s = sim(**SHARING_OFF)
    p = with_params(s.params, capture_threshold=5)
    out = s.step(s.start([[2, 1], [3, 1], [4, 4], [4, 3]], params=p), [RIGHT, NOOP, NOOP, YPLUS], p)
    assert out.positions[0] == [2, 1]  # predator_1 cannot join predator_2
    assert out.positions[3] == [4, 3]  # prey_2 cannot join the uncaptured prey_1
    # Cross-role overlap is allowed (it is a capture).
    out = s.step(s.start([[0, 0], [0, 4], [0, 3], [2, 4]], params=p), [NOOP, NOOP, YPLUS, NOOP], p)
    assert out.captured == [False, False, True, False]
    out = s.step(out.state, [NOOP, YMINUS, NOOP, LEFT], p)  # predator_2 leaves (0,4)
    assert out.positions[1:] == [[0, 3], [0, 4], [1, 4]]
    out = s.step(out.state, [NOOP, NOOP, NOOP, LEFT], p)  # prey_2 joins the captured prey_1
    assert out.positions[3] == [0, 4]
    assert out.captured == [False, False, True, False]


def test_per_axis_clipping_diagonal_slides_along_the_wall():
    s = sim(**{"actions.type": "cross"})
    ne, sw_, nw, se = 0, 1, 2, 3  # [1,1], [-1,1], [-1,-1], [1,-1]
    cases = [  # (start, action, end)
        ([4, 2], ne, [4, 3]),  # right wall: slides along y
        ([2, 4], ne, [3, 4]),  # bottom wall: slides along x
        ([4, 4], ne, [4, 4]),  # corner: stays
        ([0, 2], sw_, [0, 3]),
        ([0, 0], nw, [0, 0]),
        ([2, 0], se, [3, 0]),
        ([2, 2], nw, [1, 1]),  # inside: a true diagonal
    ]
    for start, action, end in cases:
        prey = [0, 4] if start != [0, 4] else [4, 0]
        out = s.step(s.start([start, prey]), [action, 4])
        assert out.positions[0] == end, (start, action)
    plain = sim()
    out = plain.step(plain.start([[4, 0], [0, 4]]), [RIGHT, YPLUS])
    assert out.positions == [[4, 0], [0, 4]]


MAP = [".....", "..#..", ".....", ".....", "...#."]
MAP_OBSTACLES = [[2, 1], [3, 4]]


def test_obstacle_blocks_when_blocking_on():
    s = sim(**{"env.map": MAP})
    assert s.env.layout.num_obstacles == 2
    out = s.step(s.start([[1, 1], [4, 4]], MAP_OBSTACLES), [RIGHT, LEFT])
    assert out.positions == [[1, 1], [4, 4]]
    assert out.reward == [-5.0, 0.0]


def test_obstacle_penalty_when_blocking_off():
    s = sim(**{"env.map": MAP, "env.dynamics.block_agents_by_obstacles": False})
    out = s.step(s.start([[1, 1], [4, 4]], MAP_OBSTACLES), [RIGHT, LEFT])
    assert out.positions == [[2, 1], [3, 4]]
    assert out.reward == [-205.0, -200.0]
    out = s.step(out.state, [NOOP, NOOP])  # standing there pays again
    assert out.reward == [-205.0, -200.0]
    out = s.step(out.state, [RIGHT, RIGHT])  # stepping off stops it
    assert out.reward == [-5.0, 0.0]
    params = s.env.with_term_params(s.params, "base", obstacle_penalty=50.0)
    out = s.step(s.start([[2, 1], [0, 0]], MAP_OBSTACLES), [NOOP, NOOP], params)
    assert out.reward == [-55.0, 0.0]


def test_discrete_9_table_and_diagonal_between_corner_obstacles():
    grid = [".....", ".....", "...#.", "..#..", "....."]
    s = sim(**{"actions.type": "discrete_9", "env.map": grid})
    obstacles = [[3, 2], [2, 3]]
    assert s.env.num_actions == 9 and s.env.noop_action == 8
    expected = [[1, 0], [1, 1], [0, 1], [-1, 1], [-1, 0], [-1, -1], [0, -1], [1, -1], [0, 0]]
    assert np.asarray(s.env.action_table).tolist() == expected
    for action, delta in enumerate(expected):
        out = s.step(s.start([[1, 1], [4, 0]], obstacles), [action, 8])
        assert out.positions[0] == [1 + delta[0], 1 + delta[1]], action
    # Only the destination is checked: the diagonal passes between two obstacles touching at
    # a corner, while the straight moves into them are refused.
    for action, end in [(1, [3, 3]), (0, [2, 2]), (2, [2, 2])]:
        out = s.step(s.start([[2, 2], [4, 0]], obstacles), [action, 8])
        assert out.positions[0] == end, action


def test_ppage_action_tables():
    assert np.asarray(sim().env.action_table).tolist() == [[1, 0], [0, 1], [-1, 0], [0, -1], [0, 0]]
    assert np.asarray(sim(**{"actions.type": "cross"}).env.action_table).tolist() == [
        [1, 1],
        [-1, 1],
        [-1, -1],
        [1, -1],
        [0, 0],
    ]


FAST = {"agents.preys.speed": 3}  # 1v1 with static max_speed 3; speeds and stamina traced


def test_out_of_range_action_is_a_noop():
    s = sim(**FAST)
    params = with_params(s.params, speeds=[1, 1], stamina=[4, 4])
    start = s.start([[1, 1], [3, 3]], params=params)
    for actions in ([5, -1], [99, -100], [2**31 - 1, -(2**31)]):
        out = s.step(start, actions, params)
        assert out.positions == [[1, 1], [3, 3]]
        assert np.asarray(out.state.stamina).tolist() == [4, 4]  # a no-op spends nothing
        assert out.reward == [-5.0, 0.0]


# ----------------------------------------------------------------------------- speed/stamina


def test_stamina_budget_and_depletion():
    s = sim(**FAST)
    p = with_params(s.params, speeds=[3, 1], stamina=[2, 5])
    start = s.start([[0, 0], [4, 4]], params=p)
    assert np.asarray(start.stamina).tolist() == [2, 5]
    out = s.step(start, [RIGHT, NOOP], p)
    assert out.positions[0] == [2, 0]  # budget min(speed 3, stamina 2) = 2
    assert np.asarray(out.state.stamina).tolist() == [0, 5]  # a no-op spends nothing
    assert out.reward == [-15.0, 0.0]  # the step cost is paid in all three sub-steps
    out = s.step(out.state, [RIGHT, YMINUS], p)
    assert out.positions == [[2, 0], [4, 3]]  # out of stamina: cannot move any more
    assert np.asarray(out.state.stamina).tolist() == [0, 4]


def test_blocked_move_still_spends_stamina():
    s = sim(**FAST)
    p = with_params(s.params, speeds=[3, 1], stamina=[5, UNLIMITED_STAMINA])
    out = s.step(s.start([[4, 0], [0, 4]], params=p), [RIGHT, NOOP], p)
    assert out.positions[0] == [4, 0]
    assert int(out.state.stamina[0]) == 2
    assert int(out.state.stamina[1]) == UNLIMITED_STAMINA  # prey stamina null: unlimited


def test_unlimited_stamina_is_never_spent():
    s = sim(**FAST)
    state = s.start([[0, 0], [0, 4]])
    for _ in range(3):
        state = s.step(state, [RIGHT, RIGHT]).state
    assert np.asarray(state.positions).tolist() == [[3, 0], [4, 4]]
    assert np.asarray(state.stamina).tolist() == [UNLIMITED_STAMINA] * 2


# ------------------------------------------------------------------------------ flags


def test_max_steps_counts_turns_not_substeps():
    s = sim(**FAST)
    p = with_params(s.params, max_steps=3)
    state = s.start([[0, 0], [4, 4]], params=p)
    flags = []
    for _ in range(3):
        out = s.step(state, [NOOP, NOOP], p)
        state = out.state
        flags.append((out.terminated, out.truncated, int(state.turn)))
    assert flags == [(False, False, 1), (False, False, 2), (False, True, 3)]


def test_terminated_and_truncated_both_true():
    s = sim()
    p = with_params(s.params, max_steps=1)
    out = s.step(s.start([[1, 1], [2, 1]], params=p), [RIGHT, NOOP], p)
    assert out.terminated and out.truncated
    assert bool(out.state.terminated) and bool(out.state.truncated)


def test_no_max_steps_never_truncates():
    config = pj.load_config(
        None, overrides={"env.termination.max_steps": None, "experiment.eval.max_steps": 100}
    )
    assert int(pj.make(config).default_params.max_steps) == NO_TRUNCATION
    s = sim()
    params = with_params(s.params, max_steps=NO_TRUNCATION)
    state = s.start([[0, 0], [4, 4]]).replace(turn=jnp.asarray(10**6, jnp.int32))
    out = s.step(state, [NOOP, NOOP], params)
    assert not out.truncated and int(out.state.turn) == 10**6 + 1


# ----------------------------------------------------------------------------- rewards


def test_base_reward_constants_and_overrides():
    s = sim()
    assert s.env.reward_terms == ("base",)
    base = {k: float(v) for k, v in s.params.reward.term_params["base"].items()}
    assert base == {
        "capture_reward": 100.0,
        "captured_penalty": 100.0,
        "step_cost": 5.0,
        "obstacle_penalty": 200.0,
        "credit": 0.0,
    }  # credit 0 = "full"
    start = s.start([[1, 1], [2, 1]])
    assert s.step(start, [NOOP, NOOP]).reward == [-5.0, 0.0]
    params = s.env.with_term_params(
        s.params, "base", capture_reward=10.0, step_cost=1.0, captured_penalty=3.0
    )
    assert s.step(start, [RIGHT, NOOP], params).reward == [9.0, -3.0]
    params = s.env.with_weights(params, base=2.0)
    out = s.step(start, [RIGHT, NOOP], params)
    assert out.reward == [18.0, -6.0] and out.terms == [[18.0], [-6.0]]


def test_base_constants_from_yaml_params():
    s = sim(
        **{
            "rewards.base.params": {"capture_reward": 40, "credit": "team"},
            "rewards.base.weight": 0.5,
        }
    )
    out = s.step(s.start([[1, 1], [2, 1]]), [RIGHT, NOOP])
    assert out.reward == [17.5, -50.0]


def test_reward_terms_columns_sum_exactly_to_reward():
    s = sim(
        **{
            "rewards.shaping": [
                {"name": "predator_distance", "weight": 0.5},
                {"name": "survival", "weight": 1.0},
            ]
        }
    )
    assert s.env.reward_terms == ("base", "predator_distance", "survival")
    out = s.step(s.start([[0, 0], [3, 2]]), [NOOP, NOOP])
    assert out.terms == [[-5.0, -2.5, 0.0], [0.0, 0.0, 1.0]]
    assert out.reward == [-7.5, 1.0]
    out = s.step(s.start([[0, 0], [1, 0]]), [RIGHT, NOOP])  # captured: no prey left
    assert out.terms == [[95.0, 0.0, 0.0], [-100.0, 0.0, 0.0]]


def test_reward_terms_sum_to_reward_on_default_config_rollout():
    env = pj.make(
        pj.load_config(
            None, overrides={"observations.type": "local_only", "observations.params": {}}
        )
    )
    assert env.reward_terms == ("base", "predator_distance", "survival")
    step = jax.jit(env.step)
    _, state = jax.jit(env.reset)(jax.random.key(3))
    all_actions = np.random.default_rng(4).integers(0, env.num_actions, (30, env.num_agents))
    for actions in all_actions:
        _, state, reward, _, _, info = step(
            KEY, state, jnp.asarray(actions, jnp.int32), env.default_params
        )
        terms = np.asarray(info["reward_terms"])
        assert terms.shape == (6, 3) and terms.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(reward), terms.sum(axis=1))


# ------------------------------------------------------------------------------- reset


LOCAL_ONLY = {"observations.type": "local_only", "observations.params": {}}


def _reset_batch(env: pj.GridWorld, n: int, seed: int = 0):
    keys = jax.random.split(jax.random.key(seed), n)
    _, states = jax.jit(jax.vmap(env.reset))(keys)
    return jax.tree.map(np.asarray, states)


@pytest.mark.parametrize(
    "size, pct, n_pred, n_prey, expected",
    [
        (10, 20.0, 3, 3, 20),  # PPAGE default: int(0.2 * 100)
        (8, 10.0, 1, 1, 6),  # int(0.1 * 64)
        (7, 30.0, 2, 3, 14),  # int(0.3 * 49)
        (3, 90.0, 1, 1, 7),  # int(0.9 * 9) = 8, but only 7 cells are free
    ],
)
def test_reset_distinct_cells_obstacles_off_agents_and_count(size, pct, n_pred, n_prey, expected):
    env = pj.GridWorld(
        size=size,
        obstacle_percentage=pct,
        n_predators=n_pred,
        n_prey=n_prey,
        observation_type="local_only",
    )
    assert env.layout.num_obstacles == env.spec.num_obstacles == expected
    states = _reset_batch(env, 64)
    for i in range(64):
        pos = states.positions[i]
        obs = states.obstacles[i]
        assert pos.min() >= 0 and pos.max() < size and obs.min(initial=0) >= 0
        assert obs.max(initial=0) < size
        cells = {tuple(p) for p in pos.tolist()}
        walls = {tuple(o) for o in obs.tolist()}
        assert len(cells) == n_pred + n_prey  # distinct agent cells
        assert len(walls) == expected  # distinct obstacle cells
        assert not cells & walls  # obstacles never on agents
        ys, xs = np.nonzero(states.obstacle_map[i])
        assert set(zip(xs.tolist(), ys.tolist(), strict=False)) == walls
    assert not states.captured.any() and not states.terminated.any()
    assert (states.turn == 0).all() and (states.captures_total == 0).all()


def test_reset_redraws_layout_per_key_and_covers_the_grid():
    env = pj.make(pj.load_config(None, overrides=LOCAL_ONLY))
    states = _reset_batch(env, 200, seed=1)
    layouts = {(states.positions[i].tobytes(), states.obstacles[i].tobytes()) for i in range(200)}
    assert len(layouts) == 200
    # Over 200 resets every cell holds predator_1 at least once and an obstacle at least once.
    p1 = {tuple(p) for p in states.positions[:, 0].tolist()}
    assert len(p1) >= 75  # 200 uniform draws over 100 cells hit 86.6 +- 2.4 on average
    assert states.obstacle_map.any(axis=0).all()


def test_fixed_map_places_obstacles_and_agents_on_free_cells():
    grid = ["#....", ".#...", "..#..", ".....", "....#"]
    env = sim(**{"env.map": grid, "agents.predators.count": 2}).env
    assert env.layout.num_obstacles == 4
    states = _reset_batch(env, 32)
    walls = {(0, 0), (1, 1), (2, 2), (4, 4)}
    starts = set()
    for i in range(32):
        assert {tuple(o) for o in states.obstacles[i].tolist()} == walls
        cells = [tuple(p) for p in states.positions[i].tolist()]
        assert len(set(cells)) == 3 and not set(cells) & walls
        starts.add(tuple(cells))
    assert len(starts) > 20  # agents are still drawn at random


def test_fixed_map_and_starts():
    grid = ["#....", ".....", ".....", ".....", "....#"]
    env = sim(**{"env.map": grid, "env.starts": [[1, 0], [3, 4]]}).env
    assert env.spec == EnvSpec(
        size=5,
        n_predators=1,
        n_prey=1,
        prey_speed=1,
        fixed_map=tuple(grid),
        fixed_starts=((1, 0), (3, 4)),
        observation_type="local_only",
        rewards=(RewardTerm("base"),),
    )
    states = _reset_batch(env, 4)
    assert states.positions.tolist() == [[[1, 0], [3, 4]]] * 4
    assert {tuple(o) for o in states.obstacles[0].tolist()} == {(0, 0), (4, 4)}


def test_fixed_starts_with_random_obstacles():
    env = sim(**{"env.obstacle_percentage": 40.0, "env.starts": [[0, 0], [2, 2]]}).env
    assert env.layout.num_obstacles == 10
    states = _reset_batch(env, 32)
    assert (states.positions == np.array([[0, 0], [2, 2]])).all()
    layouts = set()
    for i in range(32):
        walls = {tuple(o) for o in states.obstacles[i].tolist()}
        assert len(walls) == 10 and not walls & {(0, 0), (2, 2)}
        layouts.add(frozenset(walls))
    assert len(layouts) > 20


def test_agent_names_and_roles():
    env = sim(**roles(2, 3)).env
    assert env.agent_names == ("predator_1", "predator_2", "prey_1", "prey_2", "prey_3")
    assert env.is_predator.tolist() == [True, True, False, False, False]
