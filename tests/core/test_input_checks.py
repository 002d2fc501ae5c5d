"""Arrays are checked: step's actions and state (eagerly and in checked mode under jit),
reset_to's layout (the same), and the structure EnvParams were built for."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.state import Structure

# 5x5, 2 predators + 1 prey, int((12/100.0)*5*5) = 3 obstacles, speed 1.
SMALL = {
    "env.size": 5,
    "env.obstacle_percentage": 12.0,
    "agents.predators.count": 2,
    "agents.preys.count": 1,
    "agents.preys.speed": 1,
}
POSITIONS = np.array([[0, 0], [4, 4], [2, 2]], np.int32)
OBSTACLES = np.array([[1, 0], [3, 3], [0, 4]], np.int32)
NOOP = np.full(3, 4, np.int32)  # action 4 is the no-op of discrete_5


@pytest.fixture(scope="module")
def env() -> pj.GridWorld:
    return pj.make(None, SMALL)


@pytest.fixture(scope="module")
def start(env):
    return env.reset_to(POSITIONS, OBSTACLES)[1]


@pytest.fixture(scope="module")
def jit_step(env):
    return jax.jit(env.step)


# ------------------------------------------------------------------------------ actions
@pytest.mark.parametrize(
    "actions, error, words",
    [
        (np.zeros(3, np.float32), TypeError, "got dtype float32"),
        (np.array([np.nan, 0.0, 1.0]), TypeError, "got dtype float"),
        (np.zeros(3, bool), TypeError, "got dtype bool"),
        (np.zeros(2, np.int32), ValueError, "got shape (2,)"),
        (np.zeros((3, 1), np.int32), ValueError, "got shape (3, 1)"),
        (np.int32(0), ValueError, "got shape ()"),
    ],
)
def test_step_refuses_non_integer_or_misshapen_actions(env, start, jit_step, actions, error, words):
    for step in (env.step, jit_step):  # both are static: refused at trace time under jit
        with pytest.raises(error) as info:
            step(None, start, jnp.asarray(actions) if step is jit_step else actions)
        message = str(info.value)
        assert "integer array of shape (3,)" in message and words in message, message


@pytest.mark.parametrize(
    "actions, index, value",
    [
        # Wrapped to 32 bits these two would read 0 and 2: real moves.
        (np.array([2**32, 4, 4], np.int64), 0, 2**32),
        (np.array([4, 2**33 + 2, 4], np.int64), 1, 2**33 + 2),
        ([4, 4, 2**63 - 1], 2, 2**63 - 1),
        (np.array([4, 4, 255], np.uint8), 2, 255),
        (jnp.array([4, -1, 4], jnp.int32), 1, -1),
        (np.array([5, 4, 4]), 0, 5),
    ],
)
def test_concrete_actions_outside_the_table_are_refused_in_their_own_width(
    env, start, actions, index, value
):
    rule = (
        f"step: actions[{index}] = {value} is outside the action table "
        f"(an action must lie in [0, 5))"
    )
    with pytest.raises(ValueError) as info:
        env.step(None, start, actions)
    name = ("predator_1", "predator_2", "prey_1")[index]
    assert str(info.value) == f"{rule} ({name}; discrete_5, whose no-op is 4)"
    err, out = env.checked_step(None, start, actions)  # checked mode: reported, not raised
    assert str(err.get()).startswith(rule)
    assert out[1].positions.tolist() == POSITIONS.tolist()  # the step ran, as the no-op


def test_traced_actions_outside_the_table_are_the_noop_and_checked_mode_reports_them(
    env, start, jit_step
):
    stay = POSITIONS.tolist()
    # Wrapped to 32 bits, the wide actions below would read 1, 2, 0: moves for every row.
    assert jit_step(None, start, jnp.array([1, 2, 0]))[1].positions.tolist() == [
        [0, 1],
        [3, 4],
        [3, 2],
    ]
    got = jit_step(None, start, jnp.array([5, -1, 2**31 - 1], jnp.int32))[1]
    assert got.positions.tolist() == stay
    got = jit_step(None, start, jnp.array([255, 5, 9], jnp.uint8))[1]
    assert got.positions.tolist() == stay
    with jax.enable_x64(True):
        actions = jnp.array([2**32 + 1, 2**33 + 2, 2**40], jnp.int64)
        assert jax.jit(env.step)(None, start, actions)[1].positions.tolist() == stay
        err, out = jax.jit(env.checked_step)(None, start, actions)
    assert "step: actions[0] = 4294967297 is outside the action table" in str(err.get())
    assert out[1].positions.tolist() == stay
    checked = jax.jit(env.checked_step)
    err, out = checked(None, start, jnp.array([4, 1, 4]))
    assert err.get() is None and out[1].positions.tolist() == stay  # [4, 4] + y clips
    err, _ = checked(None, start, jnp.array([4, 4, 7]))
    assert "step: actions[2] = 7 is outside the action table (an action must lie in [0, 5))" in (
        str(err.get())
    )
    with pytest.raises(Exception, match="step: actions"):
        err.throw()
    batch = jax.jit(jax.vmap(env.checked_step, in_axes=(None, None, 0)))
    err, _ = batch(None, start, jnp.array([[4, 4, 4], [4, 9, 4]]))
    assert "at mapped index 1" in err.get() and "actions[1] = 9" in err.get()


# ---------------------------------------------------------------- stepping a finished state
# predator_1 at [1, 1] steps right onto prey_1 at [2, 1]: captured, threshold 1, terminated.
CAPTURE = np.array([[1, 1], [4, 4], [2, 1]], np.int32)


@pytest.fixture(scope="module")
def finished(env):
    _, state = env.reset_to(CAPTURE, OBSTACLES)
    out = env.step(None, state, np.array([0, 4, 4]))
    assert bool(out[3]) and int(out[1].turn) == 1 and out[2].tolist() == [95.0, -5.0, -100.0]
    return out[1]


def test_a_finished_state_steps_on_under_jit_as_in_ppage(finished, jit_step):
    # What step does with a finished state inside jit (PPAGE's behaviour: no auto-reset, the
    # grid steps on): the free agents move, the step cost is paid, the captured prey stays
    # frozen, the turn counter runs on and terminated stays True.
    obs, state, reward, terminated, truncated, info = jit_step(None, finished, jnp.array([1, 2, 4]))
    assert state.positions.tolist() == [[2, 2], [3, 4], [2, 1]]
    assert reward.tolist() == [-5.0, -5.0, 0.0]
    assert state.captured.tolist() == [False, False, True]
    assert int(state.turn) == 2 and int(info["captures"]) == 0
    assert bool(terminated) and not bool(truncated)


def test_stepping_a_finished_state_is_refused_eagerly_and_reported_in_checked_mode(env, finished):
    with pytest.raises(ValueError) as info:
        env.step(None, finished, np.array([1, 2, 4]))
    assert str(info.value) == (
        "step: this state's episode has ended (terminated) at turn 1; reset it (env.reset, "
        "env.reset_to) or step through ppage_jax.wrappers.AutoResetEnv"
    )
    truncated = finished.replace(terminated=jnp.asarray(False), truncated=jnp.asarray(True))
    with pytest.raises(ValueError, match=r"has ended \(truncated\) at turn 1"):
        env.step(None, truncated, NOOP)
    err, out = jax.jit(env.checked_step)(None, finished, jnp.asarray(NOOP))
    assert "step: this state's episode has ended (terminated True, truncated False) at turn 1" in (
        str(err.get())
    )
    assert int(out[1].turn) == 2  # the step itself ran, as under jit
    running = env.reset_to(CAPTURE, OBSTACLES)[1]
    assert jax.jit(env.checked_step)(None, running, jnp.asarray(NOOP))[0].get() is None


def test_auto_reset_never_steps_a_finished_state(env, finished):
    wrapped = pj.AutoResetEnv(env)
    _, state = env.reset_to(CAPTURE, OBSTACLES)
    _, state, _, terminated, _, _ = jax.jit(wrapped.step)(
        jax.random.PRNGKey(0), state, jnp.array([0, 4, 4])
    )
    assert bool(terminated) and int(state.turn) == 0  # a fresh episode
    assert int(env.step(None, state, NOOP)[1].turn) == 1


def test_actions_inside_the_table_still_move(start, jit_step):
    # predator_1 at [0, 0] moves "up" (+y, action 1) to [0, 1]; others stay.
    got = jit_step(None, start, jnp.array([1, 4, 4]))[1]
    assert got.positions.tolist() == [[0, 1], [4, 4], [2, 2]]


# ------------------------------------------------------------------------------ reset_to
@pytest.mark.parametrize(
    "positions, obstacles, error, words",
    [
        (POSITIONS.T, OBSTACLES, ValueError, "positions must be an integer array of shape (3, 2)"),
        (POSITIONS.reshape(-1), OBSTACLES, ValueError, "got shape (6,)"),
        (
            POSITIONS,
            OBSTACLES[:2],
            ValueError,
            "obstacles must be an integer array of shape (3, 2)",
        ),
        (POSITIONS.astype(np.float32), OBSTACLES, TypeError, "got dtype float32"),
        (
            POSITIONS,
            np.array([[1, 0], [3, 3], [5, 4]]),
            ValueError,
            "obstacles[2] = [5, 4] is off the 5x5 grid",
        ),
        (
            np.array([[0, 0], [4, -1], [2, 2]]),
            OBSTACLES,
            ValueError,
            "positions[1] = [4, -1] is off the 5x5 grid",
        ),
        (
            POSITIONS + np.array(2**32, np.int64),
            OBSTACLES,
            ValueError,
            "positions[0] = [4294967296, 4294967296] is off the 5x5 grid",
        ),
        (
            np.array([[0, 0], [3, 3], [2, 2]]),
            OBSTACLES,
            ValueError,
            "positions[1] = [3, 3]: the agent stands on an obstacle",
        ),
        (
            POSITIONS,
            np.array([[1, 0], [3, 3], [1, 0]]),
            ValueError,
            "obstacles[0] = [1, 0] shares its cell with another obstacle",
        ),
        (
            np.array([[0, 0], [2, 2], [2, 2]]),
            OBSTACLES,
            ValueError,
            "reset_to: positions[2] = [2, 2]: the prey shares its cell with a predator (no "
            "episode starts so: reset puts every agent on a cell of its own, and a prey on a "
            "predator's cell is captured)",
        ),
    ],
)
def test_reset_to_refuses_bad_layouts(env, positions, obstacles, error, words):
    with pytest.raises(error) as info:
        env.reset_to(positions, obstacles)
    assert words in str(info.value), str(info.value)


def test_reset_to_leaves_two_agents_of_one_role_on_one_cell(env):
    state = env.reset_to(np.array([[2, 2], [2, 2], [0, 0]]), OBSTACLES)[1]
    assert state.positions.tolist() == [[2, 2], [2, 2], [0, 0]]


def test_reset_to_keeps_a_valid_layout_as_given(env):
    _, state = env.reset_to(POSITIONS.tolist(), OBSTACLES.astype(np.int64))
    assert state.positions.dtype == jnp.int32 and state.obstacles.dtype == jnp.int32
    assert state.positions.tolist() == POSITIONS.tolist()
    assert state.obstacles.tolist() == OBSTACLES.tolist()
    assert np.asarray(state.obstacle_map).sum() == 3
    no_obstacles = pj.make(None, {**SMALL, "env.obstacle_percentage": 0.0})
    assert no_obstacles.reset_to(POSITIONS, [])[1].obstacles.shape == (0, 2)


def test_checked_reset_to_reports_each_rule_under_jit_and_vmap(env):
    checked = jax.jit(env.checked_reset_to)
    err, (obs, state) = checked(jnp.asarray(POSITIONS), jnp.asarray(OBSTACLES))
    assert err.get() is None
    assert state.positions.tolist() == POSITIONS.tolist()
    assert obs.shape == (3, env.observation_size)
    cases = [
        (np.array([[0, 0], [4, 4], [2, 7]]), OBSTACLES, "positions[2] = [2 7] is off the 5x5"),
        (POSITIONS, np.array([[1, 0], [3, 3], [-1, 4]]), "obstacles[2] = [-1  4] is off the"),
        (np.array([[0, 0], [0, 4], [2, 2]]), OBSTACLES, "positions[1] = [0 4]: the agent stands"),
        (POSITIONS, np.array([[3, 3], [1, 0], [3, 3]]), "obstacles[0] = [3 3] shares its cell"),
        (np.array([[0, 0], [2, 2], [2, 2]]), OBSTACLES, "positions[2] = [2 2]: the prey shares"),
    ]
    for positions, obstacles, words in cases:
        err, _ = checked(jnp.asarray(positions), jnp.asarray(obstacles))
        assert words in str(err.get()), (words, err.get())
        with pytest.raises(Exception, match="reset_to: "):
            err.throw()
    batch = jax.jit(jax.vmap(env.checked_reset_to))
    err, _ = batch(
        jnp.stack([POSITIONS, np.array([[0, 0], [3, 3], [2, 2]])]),
        jnp.stack([OBSTACLES, OBSTACLES]),
    )
    assert "at mapped index 1" in err.get() and "stands on an obstacle" in err.get()


# ------------------------------------------------------------------------------ params
def test_params_carry_the_structure_they_were_built_for(env):
    assert env.default_params.structure == Structure(
        reward_terms=("base", "predator_distance", "survival"),
        observation="local_radius",
        n_predators=2,
        n_prey=1,
        num_obstacles=3,
    )
    assert env.with_weights(env.default_params, survival=2.0).structure == env.structure
    assert (
        env.with_term_params(env.default_params, "base", capture_reward=3.0).structure
        == env.structure
    )


def test_params_of_another_structure_are_refused_at_trace_time(env, start):
    swapped = pj.make(
        None,
        {
            **SMALL,
            "rewards.shaping": [
                {"name": "survival", "weight": 1.0},
                {"name": "predator_distance", "weight": 0.5},
            ],
        },
    )
    more_obstacles = pj.make(None, {**SMALL, "env.obstacle_percentage": 20.0})
    for other, words in (
        (
            swapped,
            "reward_terms ('base', 'survival', 'predator_distance') vs "
            "('base', 'predator_distance', 'survival')",
        ),
        (more_obstacles, "num_obstacles 5 vs 3"),
    ):
        params = env.default_params
        for call, args in (
            (other.step, (None, start, NOOP, params)),
            (jax.jit(other.step), (None, start, NOOP, params)),
            (other.reset, (jax.random.PRNGKey(0), params)),
            (other.observe, (start, params)),
            (other.with_weights, (params,)),
        ):
            with pytest.raises(ValueError, match="built for another environment structure") as info:
                call(*args)
            assert words in str(info.value), str(info.value)


def test_stacked_params_keep_their_structure_and_vmap(env, start):
    params = [env.with_weights(env.default_params, survival=w) for w in (0.0, 1.0, 2.0)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *params)
    assert stacked.structure == env.structure
    stacked = env.with_weights(stacked, base=jnp.array([1.0, 2.0, 3.0]))
    assert stacked.structure == env.structure
    reward = jax.jit(jax.vmap(lambda p: env.step(None, start, NOOP, p)[2]))(stacked)
    for i, w in enumerate((0.0, 1.0, 2.0)):
        one = env.with_weights(env.default_params, survival=w, base=float(i + 1))
        np.testing.assert_array_equal(reward[i], env.step(None, start, NOOP, one)[2])
    assert float(reward[2, 2] - reward[1, 2]) != 0.0  # the weights reached the reward


def test_hand_built_params_have_no_structure_and_pass(env, start):
    p = env.default_params
    hand = pj.EnvParams(
        speeds=p.speeds,
        stamina=p.stamina,
        capture_threshold=p.capture_threshold,
        max_steps=p.max_steps,
        reward=p.reward,
    )
    assert hand.structure is None
    assert env.step(None, start, NOOP, hand)[1].turn == 1


@pytest.mark.parametrize("value", [1e39, float("nan"), float("inf"), np.array([1.0, 1e40])])
def test_with_weights_and_term_params_refuse_numbers_outside_float32(env, value):
    with pytest.raises(ValueError, match="finite in float32"):
        env.with_weights(env.default_params, survival=value)
    with pytest.raises(ValueError, match="finite in float32"):
        env.with_term_params(env.default_params, "base", capture_reward=value)
