"""Observation and global-state bounds: every registered builder's observations stay inside
the Box of the bounds it declares on random rollouts, and the bounds are the layout's
(concrete values pinned)."""

import dataclasses
from types import SimpleNamespace

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.compat.bounds import global_state_bounds, observation_bounds
from ppage_jax.observations import observation_builders

# 5x5, 2 predators vs 2 speed-2 prey, 20% obstacles; random walks of 16 turns (after the
# episode ends, the grid keeps stepping: captured prey stay, the rest move on)
BASE = {
    "env.size": 5,
    "env.obstacle_percentage": 20.0,
    "agents.predators.count": 2,
    "agents.preys.count": 2,
    "agents.preys.speed": 2,
    "env.termination.max_steps": 12,
    "env.termination.capture_threshold": 2,
}
# params that reach more of each builder's features than its defaults (the others: defaults)
BUILDERS = {
    "local_radius": {
        "type": "local_radius",
        "params": {"radius": 2, "include_obstacles": False},
        "per_agent": {"prey": {"radius": 6}},
    },
    "absolute": {"type": "absolute", "params": {}},
    "relative": {
        "type": "relative",
        "params": {"include_walls": True, "distance_type": "euclidean"},
    },
    "grid": {"type": "grid", "params": {"radius": 1}, "per_agent": {"prey": {"radius": 2}}},
}


def rollout_observations(env, n_envs=32, n_steps=16):
    """float32[n_steps+1, n_envs, A, obs] and global states of random-action rollouts."""

    @jax.jit
    def run(key):
        k_reset, k_act = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, n_envs))

        def turn(state, k):
            acts = jax.random.randint(k, (n_envs, env.num_agents), 0, env.num_actions)
            obs, state, *_ = jax.vmap(env.step)(jax.random.split(k, n_envs), state, acts)
            return state, (obs, jax.vmap(env.global_state)(state))

        _, (later, states) = jax.lax.scan(turn, state, jax.random.split(k_act, n_steps))
        return jnp.concatenate([obs[None], later]), states

    return (np.asarray(x) for x in run(jax.random.PRNGKey(1)))


def observations(name: str) -> dict:
    """The observations section of builder ``name``'s test config."""
    return {"params": {}, "per_agent": None, **BUILDERS.get(name, {"type": name})}


@pytest.mark.slow  # rollouts of every builder
@pytest.mark.parametrize("name", observation_builders())
def test_observations_stay_inside_the_real_bounds(name):
    env = pj.make(None, dict(BASE, observations=observations(name)))
    low, high = observation_bounds(env)
    space = gymnasium.spaces.Box(low, high, (env.observation_size,), np.float32)
    assert np.isfinite(low).all() and np.isfinite(high).all() and (low < high).all()
    obs, states = rollout_observations(env)
    flat = obs.reshape(-1, env.observation_size)
    outside = [i for i, row in enumerate(flat) if not space.contains(row)]
    assert not outside, (flat[outside[0]], low, high)
    state_space = gymnasium.spaces.Box(*global_state_bounds(env.layout))
    assert all(state_space.contains(s) for s in states.reshape(-1, env.global_state_size))


def test_bounds_are_the_layouts():
    env = pj.make(None, dict(BASE, observations=observations("default")))
    low, high = observation_bounds(env)
    # own [x, y, captured]; per other agent [int(euclid), captured]; per obstacle int(euclid)
    assert high[:3].tolist() == [4, 4, 1] and low.min() == 0
    # a predator's captured flag is always 0: constant features are widened to [0, 1]
    assert high[3:9].tolist() == [5, 1, 5, 1, 5, 1] and high[9:].tolist() == [5] * 5
    env = pj.make(None, dict(BASE, observations=observations("local_radius")))
    low, high = observation_bounds(env)
    # header [x, y, radius, captured]: radius 2 for predators, 6 for prey
    assert (low[:4].tolist(), high[:4].tolist()) == ([0, 0, 2, 0], [4, 4, 6, 1])
    # slot of prey_2 [present, dx, dy, manhattan, type_id, captured]: a prey's view of
    # radius 6 reaches the whole 5x5 grid (offsets up to 4, Manhattan up to 6 < 8)
    assert (low[22:28].tolist(), high[22:28].tolist()) == ([0, -4, -4, 0, 0, 0], [1, 4, 4, 6, 1, 1])
    env = pj.make(None, dict(BASE, observations=observations("grid")))
    low, high = observation_bounds(env)
    # window 5x5 of [outside, obstacle, predators, free prey, captured prey]; the centre
    # cell is never outside (widened to [0, 1] as a constant 0)
    centre = high.reshape(5, 5, 5)[2, 2]
    assert centre.tolist() == [1, 1, 2, 2, 2]
    sharing_off = pj.make(
        None,
        dict(BASE, observations=observations("grid"), **{"env.dynamics.allow_cell_sharing": False}),
    )
    _, high = observation_bounds(sharing_off)
    assert high.reshape(5, 5, 5)[0, 0].tolist() == [1, 1, 1, 1, 2]
    low, high = global_state_bounds(env.layout)
    assert high[:4].tolist() == [4, 4, 1, 1] and high.shape == (4 * 4 + 25,) and low.max() == 0


def test_a_builder_that_declares_no_bounds_is_unbounded():
    env = pj.make(None, dict(BASE, observations=observations("local_only")))
    low, high = observation_bounds(env)
    assert (low.tolist(), high.tolist()) == ([0, 0, 0], [4, 4, 1])
    undeclared = dataclasses.replace(env.observation, bounds=None)
    low, high = observation_bounds(SimpleNamespace(observation=undeclared, layout=env.layout))
    assert np.isneginf(low).all() and np.isposinf(high).all() and low.shape == (3,)
