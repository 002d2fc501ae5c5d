"""Adapters: PettingZoo ParallelEnv (API test, errors, trajectories) and the JaxMARL API."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test  # noqa: E402

import ppage_jax as pj  # noqa: E402
from ppage_jax.compat.jaxmarl import JaxMARLEnv  # noqa: E402
from ppage_jax.compat.pettingzoo import PettingZooEnv, parallel_env  # noqa: E402
from ppage_jax.viz.frames import render  # noqa: E402
from ppage_jax.wrappers import AutoResetEnv  # noqa: E402

# 4x4, no obstacles, predator_1 at (0,0) next to prey_1 at (1,0); prey_2 far away at (3,3);
# two captures end the episode, so a captured prey leaves before the others.
CHASE = {
    "env.size": 4,
    "env.obstacle_percentage": 0.0,
    "agents.predators.count": 1,
    "agents.preys.count": 2,
    "agents.preys.speed": 1,
    "agents.predators.speed": 1,
    "env.starts": [[0, 0], [1, 0], [3, 3]],
    "env.termination.capture_threshold": 2,
    "env.termination.max_steps": 6,
}


@pytest.fixture(scope="module")
def chase_env():
    return pj.make(None, CHASE)


def action_of(env, dx, dy):
    return int(np.flatnonzero((env.action_table == [dx, dy]).all(1))[0])


# ------------------------------------------------------------------------------ PettingZoo
def test_parallel_api_test_passes():
    env = PettingZooEnv("configs/default", render_mode="rgb_array", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the API test reports problems as warnings
        parallel_api_test(env, num_cycles=200)
    # agents leaving one by one (threshold 2 of 2 prey; truncation after 6 turns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(
            parallel_env(pj.make(None, dict(CHASE, **{"env.starts": None}))), num_cycles=50
        )


def test_captured_prey_leaves_and_rewards_match_native(chase_env):
    pz = PettingZooEnv(chase_env, seed=0)
    obs, infos = pz.reset(seed=0)
    assert pz.agents == ["predator_1", "prey_1", "prey_2"] and set(infos) == set(pz.agents)
    assert obs["predator_1"].dtype == np.float32
    assert obs["prey_1"].shape == pz.observation_space("prey_1").shape
    right = action_of(chase_env, 1, 0)
    start = pz.grid_state
    obs, rew, term, trunc, info = pz.step({"predator_1": right, "prey_1": chase_env.noop_action})
    nobs, _, nrew, nterm, _, ninfo = jax.jit(chase_env.step)(
        jax.random.PRNGKey(0),
        start,
        jnp.array([right, chase_env.noop_action, chase_env.noop_action]),
    )
    assert not bool(nterm)
    assert term == {"predator_1": False, "prey_1": True, "prey_2": False}
    assert trunc == {"predator_1": False, "prey_1": False, "prey_2": False}
    for i, name in enumerate(pz.possible_agents):
        assert rew[name] == pytest.approx(float(nrew[i]))
        np.testing.assert_array_equal(obs[name], np.asarray(nobs[i]))
    assert rew["prey_1"] == -100.0
    assert info["prey_1"]["captured"] and info["predator_1"]["captures"] == 1
    assert info["predator_1"]["reward_terms"]["base"] == 95.0
    assert pz.agents == ["predator_1", "prey_2"]
    with pytest.raises(ValueError, match="prey_1.*done"):
        pz.step({"prey_1": 0})
    # prey_2 left out of the dict: it takes the no-op and stays at (3, 3)
    for _ in range(5):
        obs, rew, term, trunc, info = pz.step({"predator_1": chase_env.noop_action})
        assert pz.grid_state.positions[2].tolist() == [3, 3]
    assert trunc == {"predator_1": True, "prey_2": True} and pz.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        pz.step({})


OUTSIDE = (
    "step: actions[0] = {} is outside the action table (an action must lie in [0, 5)) "
    "(predator_1; discrete_5, whose no-op is 4)"
)
SCALAR = (
    "step: actions['predator_1'] must be an integer scalar (an index into the action table, "
    "[0, 5)); got "
)


@pytest.mark.parametrize(
    "actions, error, message",
    [
        ({"wolf_1": 0}, ValueError, "unknown agent 'wolf_1'; agents: "),
        ({"predator_1": 5}, ValueError, OUTSIDE.format(5)),
        ({"predator_1": -1}, ValueError, OUTSIDE.format(-1)),
        ({"predator_1": np.int64(2**32)}, ValueError, OUTSIDE.format(2**32)),
        ({"predator_1": 1.0}, TypeError, SCALAR + "dtype float64"),
        ({"predator_1": np.array([1, 2])}, ValueError, SCALAR + "shape (2,)"),
        ([1, 2, 3], TypeError, "step: actions must be a dict {agent name: action} (agents: "),
    ],
)
def test_bad_actions_are_refused_in_one_line(chase_env, actions, error, message):
    pz = PettingZooEnv(chase_env)
    pz.reset(seed=1)
    before = pz.grid_state
    with pytest.raises(error) as info:
        pz.step(actions)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert pz.grid_state is before  # nothing stepped


def test_spaces_render_and_bad_names(chase_env):
    pz = PettingZooEnv(chase_env, render_mode="rgb_array")
    assert pz.action_space("prey_2").n == chase_env.num_actions
    assert pz.observation_space("prey_2") is pz.observation_space("prey_2")
    with pytest.raises(ValueError, match="unknown agent"):
        pz.action_space("prey_9")
    with pytest.raises(ValueError, match="render_mode"):
        PettingZooEnv(chase_env, render_mode="ansi")
    pz.reset(seed=2)
    frame = pz.render()
    assert frame.dtype == np.uint8 and frame.shape == (4 * 32 + 1, 4 * 32 + 1, 3)
    np.testing.assert_array_equal(
        frame, np.asarray(jax.jit(lambda s: render(chase_env, s))(pz.grid_state))
    )
    with pytest.warns(UserWarning, match="render_mode"):
        assert PettingZooEnv(chase_env).render() is None
    assert pz.state().shape == (chase_env.global_state_size,)


def test_seeded_resets_are_reproducible():
    a, b = PettingZooEnv("configs/default"), PettingZooEnv("configs/default")
    oa, _ = a.reset(seed=11)
    ob, _ = b.reset(seed=11)
    oc, _ = b.reset(seed=12)
    assert all(np.array_equal(oa[k], ob[k]) for k in oa)
    assert not all(np.array_equal(oa[k], oc[k]) for k in oa)


# ------------------------------------------------------------------------------ JaxMARL
@pytest.mark.slow  # a jitted rollout
def test_jaxmarl_jitted_dict_rollout_matches_native():
    env = pj.make("configs/default", {"env.termination.max_steps": 7})
    marl = JaxMARLEnv(env, final_obs=True)
    auto = AutoResetEnv(env)
    n_steps = 20
    actions = jax.random.randint(
        jax.random.PRNGKey(5), (n_steps, env.num_agents), 0, env.num_actions
    )

    @jax.jit
    def marl_rollout(key):
        obs, state = marl.reset(key)

        def turn(carry, xs):
            (state,) = carry
            k, act = xs
            # prey_1 is left out of the dict: it takes the no-op
            acts = {a: act[i] for i, a in enumerate(marl.agents) if a != "prey_1"}
            obs, state, rew, dones, infos = marl.step(k, state, acts)
            return (state,), (obs, rew, dones, infos)

        keys = jax.random.split(jax.random.PRNGKey(9), n_steps)
        return obs, jax.lax.scan(turn, (state,), (keys, actions))[1]

    @jax.jit
    def native_rollout(key):
        obs, state = auto.reset(key)
        noop_prey1 = actions.at[:, env.agent_names.index("prey_1")].set(env.noop_action)

        def turn(state, xs):
            k, act = xs
            obs, state, rew, term, trunc, info = auto.step(k, state, act)
            return state, (obs, rew, term, trunc, info)

        keys = jax.random.split(jax.random.PRNGKey(9), n_steps)
        return obs, jax.lax.scan(turn, state, (keys, noop_prey1))[1]

    obs0, (obs, rew, dones, infos) = marl_rollout(jax.random.PRNGKey(4))
    nobs0, (nobs, nrew, nterm, ntrunc, ninfo) = native_rollout(jax.random.PRNGKey(4))
    done = np.asarray(nterm | ntrunc)
    assert done.sum() >= 2  # the rollout crosses at least two auto-resets
    np.testing.assert_array_equal(np.asarray(dones["__all__"]), done)
    for i, name in enumerate(marl.agents):
        np.testing.assert_array_equal(np.asarray(obs0[name]), np.asarray(nobs0[i]))
        np.testing.assert_array_equal(np.asarray(obs[name]), np.asarray(nobs[:, i]))
        np.testing.assert_array_equal(np.asarray(rew[name]), np.asarray(nrew[:, i]))
        np.testing.assert_array_equal(
            np.asarray(dones[name]), done | np.asarray(ninfo["captured"][:, i])
        )
    for t, term in enumerate(env.reward_terms):
        np.testing.assert_array_equal(
            np.asarray(infos[f"reward_terms/{term}"]), np.asarray(ninfo["reward_terms"][:, :, t])
        )
    # final_obs travels as obs_size columns of shape [A] (the standard info reshape)
    assert len(infos["final_obs"]) == env.observation_size
    np.testing.assert_array_equal(
        np.asarray(marl.stack_final_obs(infos["final_obs"])), np.asarray(ninfo["final_obs"])
    )


def test_jaxmarl_api_surface(chase_env):
    marl = JaxMARLEnv(chase_env)
    assert marl.agents == ["predator_1", "prey_1", "prey_2"] and marl.num_agents == 3
    assert marl.action_space("prey_1").n == chase_env.num_actions
    assert marl.observation_space("prey_1").shape == (chase_env.observation_size,)
    assert marl.agent_classes == {"predators": ["predator_1"], "prey": ["prey_1", "prey_2"]}
    with pytest.raises(ValueError, match="unknown agent 'wolf'"):
        marl.action_space("wolf")
    obs, state = marl.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="unknown agent 'wolf'"):
        marl.step(jax.random.PRNGKey(0), state, {"wolf": 1})
    # the first step captures prey_1 (dones[prey_1]) without ending the episode
    right = action_of(chase_env, 1, 0)
    obs, state, rew, dones, infos = jax.jit(marl.step)(
        jax.random.PRNGKey(0), state, {"predator_1": jnp.int32(right)}
    )
    assert bool(dones["prey_1"]) and not bool(dones["__all__"]) and not bool(dones["prey_2"])
    assert float(rew["predator_1"]) == pytest.approx(95.0 - 0.5 * 5)  # prey_2 is 5 away
    assert all(v.shape[0] == 3 for v in infos.values())
    avail = marl.get_avail_actions(state)
    assert avail["prey_2"].tolist() == [1] * chase_env.num_actions  # no masks by default
    # reset_state (as in JaxMARL) is where a finished episode restarts: truncation at turn 6
    _, start = chase_env.reset_to(jnp.array([[2, 2], [0, 3], [3, 0]]), jnp.zeros((0, 2), int))
    step = jax.jit(marl.step)
    for turn in range(2, 7):
        obs, state, rew, dones, infos = step(jax.random.PRNGKey(turn), state, {}, start)
        assert bool(dones["__all__"]) == (turn == 6)
    assert state.positions.tolist() == [[2, 2], [0, 3], [3, 0]] and int(state.turn) == 0
    np.testing.assert_array_equal(
        np.asarray(obs["prey_1"]), np.asarray(chase_env.observe(start)[1])
    )
