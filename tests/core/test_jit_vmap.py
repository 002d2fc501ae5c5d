"""jit, vmap (over keys and over stacked EnvParams), determinism, and no recompiles."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.config.env_spec import EnvSpec

# 2 predators (speed 1) and 2 prey (speed 2) on 6x6 with 4 obstacles, sharing off: both
# sub-steps and the agent-order loop are exercised.
SMALL = EnvSpec(
    size=6,
    obstacle_percentage=12.0,
    allow_cell_sharing=False,
    n_predators=2,
    n_prey=2,
    prey_speed=2,
    observation_type="local_only",
    capture_threshold=2,
)
TURNS = 12


@pytest.fixture(scope="module")
def env() -> pj.GridWorld:
    env = pj.GridWorld(SMALL)
    assert env.layout.num_obstacles == 4
    assert env.reward_terms == ("base", "predator_distance", "survival")
    return env


@pytest.fixture(scope="module")
def jit_step(env):
    return jax.jit(env.step)


def random_actions(env: pj.GridWorld, key: jax.Array, turns: int = TURNS) -> jax.Array:
    return jax.random.randint(key, (turns, env.num_agents), 0, env.num_actions)


def assert_trees_equal(a, b) -> None:
    """Bit-identical pytrees (same structure, same leaves)."""
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=False):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_jit_matches_eager(env, jit_step):
    _, state = env.reset(jax.random.key(1))
    _, jstate = jax.jit(env.reset)(jax.random.key(1))
    assert_trees_equal(state, jstate)
    for turn, actions in enumerate(random_actions(env, jax.random.key(2), 3)):
        key = jax.random.key(turn)
        eager = env.step(key, state, actions, env.default_params)
        jitted = jit_step(key, state, actions, env.default_params)
        assert_trees_equal(eager, jitted)
        state = eager[1]
    assert int(state.turn) == 3


def test_vmap_over_keys_matches_single_calls(env, jit_step):
    keys = jax.random.split(jax.random.key(5), 8)
    obs, states = jax.jit(jax.vmap(env.reset))(keys)
    assert obs.shape == (8, env.num_agents, env.observation_size)
    actions = jax.vmap(lambda k: random_actions(env, k, 1)[0])(keys)
    batched = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))(
        keys, states, actions, env.default_params
    )
    reset = jax.jit(env.reset)
    for i in range(8):
        single_obs, single = reset(keys[i])
        assert_trees_equal((single_obs, single), jax.tree.map(lambda x: x[i], (obs, states)))
        out = jit_step(keys[i], single, actions[i], env.default_params)
        assert_trees_equal(out, jax.tree.map(lambda x: x[i], batched))
    # Different keys give different layouts.
    assert len({np.asarray(states.positions[i]).tobytes() for i in range(8)}) == 8


def stack(*params: pj.EnvParams) -> pj.EnvParams:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *params)


def rollout(env: pj.GridWorld, key: jax.Array, params: pj.EnvParams):
    """Reset from ``key`` and play TURNS random turns (actions from ``key`` too)."""
    k_reset, k_act = jax.random.split(key)
    _, state = env.reset(k_reset, params)

    def turn(state, actions):
        obs, state, reward, term, trunc, info = env.step(k_act, state, actions, params)
        return state, (
            state.positions,
            state.captured,
            reward,
            info["reward_terms"],
            term,
            trunc,
            obs,
        )

    return jax.lax.scan(turn, state, random_actions(env, k_act))[1]


run_rollout = jax.jit(rollout, static_argnums=0)  # one compile per env object


def test_vmap_over_stacked_params_gives_the_separate_results(env):
    default = env.default_params
    a = env.with_weights(default, predator_distance=0.0, survival=2.0)
    b = env.with_weights(
        env.with_term_params(default, "base", credit="team", step_cost=1.0), base=0.5
    )
    b = b.replace(
        speeds=jnp.asarray([1, 1, 1, 1], jnp.int32), capture_threshold=jnp.asarray(1, jnp.int32)
    )
    run = run_rollout
    key = jax.random.key(11)
    batched = jax.jit(jax.vmap(rollout, in_axes=(None, None, 0)), static_argnums=0)(
        env, key, stack(a, b)
    )
    separate_a, separate_b = run(env, key, a), run(env, key, b)
    for i, separate in enumerate((separate_a, separate_b)):
        for got, want in zip(batched, separate, strict=False):
            np.testing.assert_allclose(np.asarray(got[i]), np.asarray(want), rtol=1e-6)
    # The two weight vectors really gave two different results.
    assert not np.allclose(np.asarray(separate_a[3]), np.asarray(separate_b[3]))
    terms_a = np.asarray(separate_a[3])
    assert (terms_a[:, :, 1] == 0).all()  # predator_distance weight 0 in a


def test_with_weights_on_stacked_params(env):
    stacked = stack(env.default_params, env.default_params)
    stacked = env.with_weights(stacked, base=jnp.asarray([1.0, 3.0]))
    assert np.asarray(stacked.reward.weights).tolist() == [[1.0, 0.5, 1.0], [3.0, 0.5, 1.0]]


def test_same_key_gives_bit_identical_trajectory(env):
    first = run_rollout(env, jax.random.key(42), env.default_params)
    # A freshly built env (so a fresh compilation) reproduces it bit for bit.
    env2 = pj.GridWorld(SMALL)
    second = run_rollout(env2, jax.random.key(42), env2.default_params)
    assert_trees_equal(first, second)
    assert np.asarray(first[4]).any() or np.asarray(first[2]).any()  # something happened
    other = run_rollout(env2, jax.random.key(43), env2.default_params)
    assert not np.array_equal(np.asarray(first[0]), np.asarray(other[0]))


def test_equal_specs_are_one_static_jit_argument():
    @functools.partial(jax.jit, static_argnums=0)
    def first_obs(spec, key):
        return pj.GridWorld(spec).reset(key)[0]

    key = jax.random.key(0)
    one = first_obs(SMALL, key)
    two = first_obs(SMALL.replace(size=6), key)  # an equal spec, another object
    assert first_obs._cache_size() == 1
    np.testing.assert_array_equal(one, two)
    first_obs(SMALL.replace(size=7), key)
    assert first_obs._cache_size() == 2


def test_no_recompile_when_traced_values_change(env):
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(key, state, actions, params):
        return env.step(key, state, actions, params)

    default = env.default_params
    # predator_1 at (0,0) moves right onto prey_1 at (1,0); the others stay put.
    positions = jnp.asarray([[0, 0], [5, 5], [1, 0], [5, 0]], jnp.int32)
    obstacles = jnp.asarray([[3, 3], [3, 4], [4, 3], [4, 4]], jnp.int32)
    actions = jnp.asarray([0, 4, 4, 4], jnp.int32)
    variants = {
        "default": default,
        "weight": env.with_weights(default, base=2.0),
        "base constant": env.with_term_params(default, "base", capture_reward=10.0),
        "credit": env.with_term_params(default, "base", credit="team"),
        "max_steps": default.replace(max_steps=jnp.asarray(1, jnp.int32)),
        "capture_threshold": default.replace(capture_threshold=jnp.asarray(1, jnp.int32)),
        "speeds": default.replace(speeds=jnp.asarray([2, 2, 1, 1], jnp.int32)),
        "stamina": default.replace(stamina=jnp.asarray([0, 3, 3, 3], jnp.int32)),
    }
    results = {}
    for name, params in variants.items():
        _, state = env.reset_to(positions, obstacles, params)
        _, new_state, reward, term, trunc, _ = step(jax.random.key(0), state, actions, params)
        results[name] = (
            np.asarray(reward)[0],
            bool(term),
            bool(trunc),
            np.asarray(new_state.positions)[0].tolist(),
        )
    # Each traced change took effect (predator_1's reward, flags, position) without a retrace.
    # Default: two sub-steps (prey speed 2). k=0: capture, base 100 - 5, distance to prey_2
    # 4 -> 0.5 * -4; k=1: base -5, again -2. Total 95 - 2 - 5 - 2 = 86.
    assert results["default"] == (86.0, False, False, [1, 0])
    assert results["weight"] == (176.0, False, False, [1, 0])  # 2 * (95 - 5) - 4
    assert results["base constant"] == (-4.0, False, False, [1, 0])  # (10 - 5) - 5 - 4
    assert results["credit"] == (86.0, False, False, [1, 0])  # 1 prey: team == full for P1
    assert results["max_steps"] == (86.0, False, True, [1, 0])
    assert results["capture_threshold"] == (93.0, True, False, [1, 0])  # k=1 neither runs
    # Speed 2: captures at k=0, walks on to (2,0) at k=1: 95 - 2 - 5 - 0.5 * 3.
    assert results["speeds"] == (86.5, False, False, [2, 0])
    assert results["stamina"] == (-11.0, False, False, [0, 0])  # no stamina: cannot move
