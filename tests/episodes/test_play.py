"""play_episodes, the one episode player, on a tiny fixed layout with hand-computed capture
turns; its summary; and the renderer's rollout built on it."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.episodes import (
    EPISODE_FIELDS,
    episode_keys,
    play_episodes,
    record_one,
    summarize_episodes,
    with_step_limit,
)
from ppage_jax.policies import greedy_chase, noop_policy
from ppage_jax.viz.frames import render_episode, rollout_states

GAMMA = 0.99


@pytest.fixture(scope="module")
def env():
    """5x5, no obstacles: one speed-1 predator at (0, 0), one prey that cannot move (stamina
    0) at (2, 1). The BFS chase needs 3 turns; base reward only (-5 a turn and +100 for the
    capture to the predator, -100 to the captured prey); limit 10 turns."""
    return pj.make(
        None,
        {
            "env.size": 5,
            "env.obstacle_percentage": 0.0,
            "env.starts": [[0, 0], [2, 1]],
            "env.termination.max_steps": 10,
            "agents.predators": {"count": 1, "speed": 1},
            "agents.preys": {"count": 1, "speed": 1, "stamina": 0},
            "rewards.shaping": [],
        },
    )


@functools.cache
def played(env, policy_name: str, max_steps: int | None, turns: int | None = None):
    policy = {"chase": greedy_chase, "noop": lambda e: noop_policy(e)}[policy_name](env)
    run = jax.jit(
        lambda p: play_episodes(env, policy, episode_keys(7, 3), p, max_steps, turns=turns)
    )
    return jax.tree.map(np.asarray, run(env.default_params))


def test_chase_captures_on_turn_3_with_hand_computed_returns(env):
    out = played(env, "chase", None)
    assert set(out) == set(EPISODE_FIELDS)
    assert out["episode_length"].tolist() == [3, 3, 3]
    assert out["captured"].all() and out["terminated"].all() and not out["truncated"].any()
    assert out["captures"].tolist() == [1, 1, 1]
    predator = -5 - 5 + (100 - 5)  # three turns, capture last
    np.testing.assert_allclose(out["returns"][:, 0, 0], predator)
    np.testing.assert_allclose(out["returns"][:, 1, 0], -100.0)
    np.testing.assert_allclose(
        out["discounted_returns"][:, 0, 0], -5 - 5 * GAMMA + 95 * GAMMA**2, rtol=1e-6
    )
    np.testing.assert_allclose(out["discounted_returns"][:, 1, 0], -100 * GAMMA**2, rtol=1e-6)
    np.testing.assert_allclose(out["unit_returns"], out["returns"])  # base weight 1


@pytest.mark.slow  # long episodes
def test_the_step_limit_censors(env):
    idle = played(env, "noop", 4)  # nobody moves: 4 turns
    assert idle["episode_length"].tolist() == [4, 4, 4]
    assert not idle["captured"].any() and idle["truncated"].all()
    np.testing.assert_allclose(idle["returns"][:, 0, 0], -20.0)
    np.testing.assert_allclose(
        idle["discounted_returns"][:, 0, 0], -5 * sum(GAMMA**t for t in range(4)), rtol=1e-6
    )
    at_limit = played(env, "chase", 3)  # capture on the last turn
    assert at_limit["captured"].all() and at_limit["truncated"].all()
    short = played(env, "chase", 2)
    assert short["episode_length"].tolist() == [2, 2, 2] and not short["captured"].any()
    # `turns` stops without truncating: the episode is cut, with its values so far
    cut = played(env, "chase", None, turns=2)
    assert cut["episode_length"].tolist() == [2, 2, 2]
    assert not cut["captured"].any() and not cut["truncated"].any()
    np.testing.assert_allclose(cut["returns"][:, 0, 0], -10.0)


def test_vmap_over_params_and_the_censored_summary(env):
    limits = [2, 3, 10]
    stacked = jax.tree.map(
        lambda *x: jnp.stack(x), *[with_step_limit(env.default_params, m) for m in limits]
    )
    keys = episode_keys(7, 1)
    out = jax.jit(jax.vmap(lambda p: play_episodes(env, greedy_chase(env), keys, p)))(stacked)
    out = jax.tree.map(np.asarray, out)
    assert out["episode_length"][:, 0].tolist() == [2, 3, 3]
    assert out["captured"][:, 0].tolist() == [False, True, True]
    # pooled: censored at 2, captured at 3 and 3. KM: S = 1 until 3, then 0
    s = summarize_episodes(out, env, horizon=10, reps=200)
    assert s["capture_rate"] == pytest.approx(2 / 3)
    assert s["truncated_share"] == pytest.approx(1 / 3)
    assert s["km_median"] == 3.0 and s["rmst"] == pytest.approx(3.0)
    assert s["episode_length"] == pytest.approx(8 / 3)  # the censored one pulls it below
    assert s["steps_to_capture"] == pytest.approx(3.0)
    # a resample of only the censored episode knows nothing past turn 2: no median, and
    # the RMST is the whole horizon; 3 draws of it have probability 1/27 > 2.5 %
    assert s["km_median_ci"] == [3.0, np.inf] and s["rmst_ci"] == [3.0, 10.0]
    assert s["return/predator/base"] == pytest.approx((-10 + 85 + 85) / 3)


def test_record_sees_every_turn_and_skips_after_the_end(env):
    out = jax.jit(
        lambda p: play_episodes(
            env,
            greedy_chase(env),
            episode_keys(7, 2),
            p,
            6,
            record=lambda t: (t.t, t.live, t.terminated, t.next_state.positions[:, 0]),
        )
    )(env.default_params)
    t, live, terminated, predator = jax.tree.map(np.asarray, out["trajectory"])
    assert t.tolist() == [1, 2, 3, 0, 0, 0]  # turns 4-6 skipped: all ended
    assert live[:, 0].tolist() == [True, True, True, False, False, False]
    assert terminated[:, 0].tolist() == [False, False, True, False, False, False]
    np.testing.assert_array_equal(predator[2, 0], [2, 1])  # on the prey's cell at turn 3
    assert np.abs(np.diff(predator[:3, 0], axis=0)).sum(-1).tolist() == [1, 1]


def test_a_step_limit_is_required(env):
    unbounded = env.default_params.replace(max_steps=jnp.int32(2**31 - 1))
    with pytest.raises(ValueError, match="pass max_steps"):
        play_episodes(env, greedy_chase(env), episode_keys(0, 1), unbounded)
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        with_step_limit(env.default_params, 0)


@pytest.mark.slow  # renders
def test_render_rollout_is_the_played_episode(env):
    states, done = jax.jit(lambda k: rollout_states(env, k, greedy_chase(env), max_steps=6))(
        jax.random.PRNGKey(7)
    )
    assert np.asarray(done).tolist() == [False, False, False, True, True, True, True]
    positions = np.asarray(states.positions)
    np.testing.assert_array_equal(positions[0], [[0, 0], [2, 1]])
    np.testing.assert_array_equal(positions[3:], np.broadcast_to(positions[3], (4, 2, 2)))
    assert len(render_episode(env, jax.random.PRNGKey(7), greedy_chase(env), max_steps=6)) == 4


def test_record_one_returns_the_reset_state_and_the_turns(env):
    start, (live, predator) = jax.jit(
        lambda p: record_one(
            env,
            greedy_chase(env),
            jax.random.PRNGKey(0),
            p,
            4,
            lambda t: (t.live, t.next_state.positions[:, 0]),
        )
    )(env.default_params)
    np.testing.assert_array_equal(start.positions, [[0, 0], [2, 1]])
    assert np.asarray(live).tolist() == [True, True, True, False]  # captured on turn 3
    np.testing.assert_array_equal(predator[2], [2, 1])
