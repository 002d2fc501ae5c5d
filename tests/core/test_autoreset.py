"""Auto-reset wrappers and start-layout draws: semantics against the plain env, per-grid
params, and the uniformity of start layouts (chi-square, fixed seeds, loose thresholds)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import ppage_jax as pj
from ppage_jax.sampling import bounded_ints, distinct_sample
from ppage_jax.state import UNLIMITED_STAMINA
from ppage_jax.wrappers import AutoResetEnv, BatchedAutoResetEnv, default_resets_per_step

B, R, T = 8, 2, 12
# Loose: a correct sampler fails one of these checks about once in 10^5 runs.
P_MIN = 1e-5


@pytest.fixture(scope="module")
def env():
    # max_steps 3: all 8 grids truncate together at turn 3 (8 > R: several reset rounds);
    # the random 3v3 policy also terminates some episodes by capture.
    return pj.make("configs/default", {"env.termination.max_steps": 3})


def _layout_ok(positions, obstacles, obstacle_map, size):
    """Distinct agent cells, obstacles on other distinct cells, map == obstacle list."""
    agent_cells = {tuple(p) for p in positions}
    obstacle_cells = {tuple(o) for o in obstacles}
    expected_map = np.zeros((size, size), bool)
    expected_map[obstacles[:, 1], obstacles[:, 0]] = True
    return (
        len(agent_cells) == len(positions)
        and len(obstacle_cells) == len(obstacles)
        and not agent_cells & obstacle_cells
        and np.array_equal(obstacle_map, expected_map)
    )


@pytest.fixture(scope="module")
def trajectory(env):
    """T batched auto-reset steps, with the plain env stepped from the same states."""
    auto = BatchedAutoResetEnv(env, B, resets_per_step=R)
    params = env.default_params
    plain = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    @jax.jit
    def run(key):
        obs, state = auto.reset(jax.random.PRNGKey(0), params)

        def one(carry, k):
            obs, state = carry
            k_act, k_env = jax.random.split(k)
            actions = jax.random.randint(k_act, (B, env.num_agents), 0, env.num_actions)
            ref = plain(jax.random.split(k_env, B), state, actions, params)
            out = auto.step(k_env, state, actions, params)
            return (out[0], out[1]), (ref, out)

        return jax.lax.scan(one, (obs, state), jax.random.split(key, T))[1]

    ref, out = jax.tree.map(np.asarray, run(jax.random.PRNGKey(1)))
    _, again = jax.tree.map(np.asarray, run(jax.random.PRNGKey(1)))
    return ref, out, again


def test_batched_auto_reset_matches_plain_step_and_restarts_finished_grids(env, trajectory):
    ref, out, _ = trajectory
    r_obs, r_state, r_reward, r_term, r_trunc, r_info = ref
    obs, state, reward, term, trunc, info = out
    done = r_term | r_trunc
    # Flags, rewards and info are the plain step's, terminated and truncated kept apart.
    np.testing.assert_array_equal(term, r_term)
    np.testing.assert_array_equal(trunc, r_trunc)
    np.testing.assert_array_equal(reward, r_reward)
    np.testing.assert_array_equal(info["reward_terms"], r_info["reward_terms"])
    np.testing.assert_array_equal(info["final_obs"], r_obs)
    # Grids that started together truncate together: some step resets more than R grids
    # (several rounds of R fresh layouts).
    assert (done.sum(axis=1) > R).any()
    assert (r_term & ~r_trunc).any(), "some episode should end by capture only"
    assert (r_trunc & ~r_term).any(), "some episode should end by truncation only"
    for t, i in itertools.product(range(T), range(B)):
        if not done[t, i]:
            for field in ("positions", "captured", "obstacles", "turn", "captures_total"):
                np.testing.assert_array_equal(
                    getattr(state, field)[t, i], getattr(r_state, field)[t, i]
                )
            np.testing.assert_array_equal(obs[t, i], r_obs[t, i])
            continue
        # A fresh episode: a valid layout, nothing captured, turn 0, its own first obs.
        assert state.turn[t, i] == 0 and state.captures_total[t, i] == 0
        assert not state.captured[t, i].any()
        assert not state.terminated[t, i] and not state.truncated[t, i]
        assert (state.stamina[t, i] == UNLIMITED_STAMINA).all()
        assert _layout_ok(
            state.positions[t, i], state.obstacles[t, i], state.obstacle_map[t, i], env.layout.size
        )
        fresh = jax.tree.map(lambda x: x[t, i], state)
        np.testing.assert_array_equal(obs[t, i], np.asarray(env.observe(fresh)))
    # Grids that finish together get different layouts (each fresh layout is used once).
    t = int(np.argmax(done.sum(axis=1)))
    starts = {
        state.positions[t, i].tobytes() + state.obstacles[t, i].tobytes()
        for i in np.flatnonzero(done[t])
    }
    assert len(starts) == done[t].sum()


def test_batched_auto_reset_is_deterministic(trajectory):
    _, out, again = trajectory
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(again), strict=False):
        np.testing.assert_array_equal(a, b)


def test_batched_auto_reset_takes_per_grid_params():
    env = pj.make("configs/1v1", {"agents.predators.stamina": 7})
    n = 4
    params = jax.tree.map(lambda x: jnp.stack([x] * n), env.default_params)
    params = params.replace(
        max_steps=jnp.array([1, 2, 3, 4], jnp.int32),
        capture_threshold=jnp.full(n, 99, jnp.int32),
        stamina=params.stamina.at[:, 0].set(jnp.array([1, 2, 3, 4])),
    )
    auto = BatchedAutoResetEnv(env, n, resets_per_step=1)
    # The predator (speed 2) always moves, spending min(2, stamina) a turn; the prey waits.
    actions = jnp.tile(jnp.array([0, env.noop_action], jnp.int32), (n, 1))
    obs, state = jax.jit(auto.reset)(jax.random.PRNGKey(0), params)
    np.testing.assert_array_equal(state.stamina[:, 0], [1, 2, 3, 4])
    step = jax.jit(auto.step)
    truncated, stamina = [], []
    for t in range(4):
        obs, state, _, term, trunc, _ = step(jax.random.PRNGKey(t), state, actions, params)
        truncated.append(np.asarray(trunc))
        stamina.append(np.asarray(state.stamina[:, 0]))
        assert not np.asarray(term).any()
    # Grid i truncates every (i+1) turns and restarts with its own row of params.
    np.testing.assert_array_equal(
        np.array(truncated), [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    )
    np.testing.assert_array_equal(
        np.array(stamina), [[1, 0, 1, 2], [1, 2, 0, 0], [1, 0, 3, 0], [1, 2, 1, 4]]
    )


@pytest.mark.slow  # compiles one program per arm
def test_batched_auto_reset_vmapped_over_arms_equals_each_arm(env):
    """Sweeps vmap the wrapper over EnvParams arms: the round loop then runs as many rounds
    as the busiest arm needs, and each arm's result is its own single run."""
    auto = BatchedAutoResetEnv(env, B, resets_per_step=R)
    arms = jax.tree.map(lambda x: jnp.stack([x, x]), env.default_params)
    arms = arms.replace(max_steps=jnp.array([1, 5], jnp.int32))  # arm 0: all 8 finish
    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    _, state = jax.jit(jax.vmap(auto.reset))(keys, arms)
    actions = jax.random.randint(jax.random.PRNGKey(6), (2, B, env.num_agents), 0, env.num_actions)
    both = jax.jit(jax.vmap(auto.step))(keys, state, actions, arms)
    assert np.asarray(both[4])[0].all()
    one = jax.jit(auto.step)
    for arm in range(2):
        pick = lambda tree: jax.tree.map(lambda x: x[arm], tree)
        single = one(keys[arm], pick(state), actions[arm], pick(arms))
        for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(both), strict=False):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b)[arm])


@pytest.mark.slow  # compiles the batched reset
def test_finished_grid_j_restarts_from_the_documented_key():
    """All 8 grids end at turn 1; with R = 4 and one_by_one = 5, grids 0-3 reset in a round
    of 4 and grids 4-7 one by one, each from split(fold_in(k_reset, j // R), R)[j % R]."""
    env = pj.make("configs/default", {"env.termination.max_steps": 1})
    auto = BatchedAutoResetEnv(env, 8, resets_per_step=4, one_by_one=5)
    _, state = jax.jit(auto.reset)(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(9)
    actions = jnp.zeros((8, env.num_agents), jnp.int32)
    obs, state, _, term, trunc, _ = jax.jit(auto.step)(key, state, actions)
    assert np.asarray(term | trunc).all()
    k_reset = jax.random.split(key)[1]
    reset = jax.jit(env.reset)
    for j in range(8):
        fresh_obs, fresh = reset(jax.random.split(jax.random.fold_in(k_reset, j // 4), 4)[j % 4])
        np.testing.assert_array_equal(state.positions[j], fresh.positions)
        np.testing.assert_array_equal(state.obstacle_map[j], fresh.obstacle_map)
        np.testing.assert_array_equal(obs[j], fresh_obs)


@pytest.mark.slow  # long sequential comparison
def test_one_by_one_resets_change_no_layout(env):
    """Rounds of R only, the default (R // 4 = 1: a lone finished grid is reset alone) and
    one by one throughout give the same trajectories."""
    runs = []
    for one_by_one in (0, None, B):
        auto = BatchedAutoResetEnv(env, B, resets_per_step=4, one_by_one=one_by_one)

        @jax.jit
        def run(key, auto=auto):
            _, state = auto.reset(jax.random.PRNGKey(0))

            def one(state, k):
                actions = jax.random.randint(k, (B, env.num_agents), 0, env.num_actions)
                obs, state, reward, term, trunc, _ = auto.step(k, state, actions)
                return state, (obs, state.positions, state.obstacles, reward, term | trunc)

            return jax.lax.scan(one, state, jax.random.split(key, 8))[1]

        runs.append(jax.tree.map(np.asarray, run(jax.random.PRNGKey(4))))
    counts = runs[0][-1].sum(axis=1)
    assert counts.max() > 4 and ((counts > 0) & (counts <= 1)).any()  # both kinds of round
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


def test_single_grid_auto_reset_keeps_final_obs_and_flags():
    env = pj.make("configs/1v1", {"env.termination.max_steps": 2})
    auto = AutoResetEnv(env)
    obs, state = auto.reset(jax.random.PRNGKey(0))
    noop = jnp.full(env.num_agents, env.noop_action, jnp.int32)
    step, plain_step, reset = jax.jit(auto.step), jax.jit(env.step), jax.jit(env.reset)
    obs1, state1, _, term1, trunc1, info1 = step(jax.random.PRNGKey(1), state, noop)
    assert not trunc1 and int(state1.turn) == 1
    np.testing.assert_array_equal(info1["final_obs"], obs1)
    obs2, state2, _, term2, trunc2, info2 = step(jax.random.PRNGKey(2), state1, noop)
    assert bool(trunc2) and not bool(term2) and int(state2.turn) == 0
    plain_obs, plain_state, *_ = plain_step(jax.random.PRNGKey(2), state1, noop)
    np.testing.assert_array_equal(info2["final_obs"], plain_obs)
    assert int(plain_state.turn) == 2
    expected_obs, expected = reset(jax.random.PRNGKey(2))  # the same key, the same layout
    np.testing.assert_array_equal(state2.positions, expected.positions)
    np.testing.assert_array_equal(obs2, expected_obs)


def test_resets_per_step_validation_and_default():
    env = pj.make("configs/1v1")
    assert default_resets_per_step(4096) == 580
    assert default_resets_per_step(1) == 1
    assert default_resets_per_step(8) == 4
    with pytest.raises(ValueError, match="resets_per_step must be in"):
        BatchedAutoResetEnv(env, 4, resets_per_step=5)
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        BatchedAutoResetEnv(env, 0)
    with pytest.raises(ValueError, match=r"one_by_one must be in \[0, num_envs=4\], got 5"):
        BatchedAutoResetEnv(env, 4, one_by_one=5)
    assert BatchedAutoResetEnv(env, 4096).one_by_one == 145  # resets_per_step // 4
    auto = BatchedAutoResetEnv(env, 4)
    _, state = jax.eval_shape(auto.reset, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"actions of shape \(3, 2\)"):
        jax.eval_shape(auto.step, jax.random.PRNGKey(0), state, jnp.zeros((3, 2), jnp.int32))


# ----------------------------------------------------------------------------- uniformity
def _chi2_p(counts: np.ndarray) -> float:
    counts = np.asarray(counts, float).ravel()
    return float(stats.chisquare(counts).pvalue)


@pytest.mark.slow  # statistical: many layouts
def test_start_layouts_are_uniform_under_batched_auto_reset():
    """Cell occupancy of the start layouts that auto-reset hands out, over many resets, is
    uniform: per agent row (each over 100 cells) and for obstacles."""
    env = pj.make("configs/default", {"env.termination.max_steps": 4})
    n, steps = 512, 120
    auto = BatchedAutoResetEnv(env, n, resets_per_step=48)  # often several rounds a step
    size = env.layout.size

    @jax.jit
    def run(key):
        _, state = auto.reset(jax.random.PRNGKey(7))

        def one(state, k):
            k_act, k_env = jax.random.split(k)
            actions = jax.random.randint(k_act, (n, env.num_agents), 0, env.num_actions)
            _, state, _, term, trunc, _ = auto.step(k_env, state, actions)
            return state, (term | trunc, state.positions, state.obstacles)

        return jax.lax.scan(one, state, jax.random.split(key, steps))[1]

    done, positions, obstacles = jax.tree.map(np.asarray, run(jax.random.PRNGKey(11)))
    starts_pos, starts_obs = positions[done], obstacles[done]  # [E, A, 2], [E, K, 2]
    episodes = len(starts_pos)
    assert episodes > 12_000
    cells_pos = starts_pos[..., 1] * size + starts_pos[..., 0]
    cells_obs = starts_obs[..., 1] * size + starts_obs[..., 0]
    for agent in range(env.num_agents):
        counts = np.bincount(cells_pos[:, agent], minlength=size * size)
        assert _chi2_p(counts) > P_MIN, f"agent {agent} start cells are not uniform"
    counts = np.bincount(cells_obs.ravel(), minlength=size * size)
    assert counts.sum() == episodes * env.layout.num_obstacles
    assert _chi2_p(counts) > P_MIN, "obstacle cells are not uniform"
    # Every layout is valid: distinct agent cells, obstacles elsewhere and distinct.
    both = np.concatenate([cells_pos, cells_obs], axis=1)
    assert (np.sort(both, axis=1)[:, 1:] != np.sort(both, axis=1)[:, :-1]).all()


def test_distinct_sample_gives_uniform_ordered_subsets():
    keys = jax.random.split(jax.random.PRNGKey(3), 24_000)
    pairs = np.asarray(jax.jit(jax.vmap(lambda k: distinct_sample(k, 5, 2)))(keys))
    assert (pairs[:, 0] != pairs[:, 1]).all() and pairs.min() == 0 and pairs.max() == 4
    counts = np.bincount(pairs[:, 0] * 5 + pairs[:, 1], minlength=25)
    assert (counts[[0, 6, 12, 18, 24]] == 0).all()  # no repeated value
    assert _chi2_p(np.delete(counts, [0, 6, 12, 18, 24])) > P_MIN  # 20 ordered pairs
    perms = np.asarray(jax.jit(jax.vmap(lambda k: distinct_sample(k, 4, 4)))(keys))
    index = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    counts = np.bincount([index[tuple(p)] for p in perms], minlength=24)
    assert _chi2_p(counts) > P_MIN  # 24 permutations


def test_distinct_sample_population_values_and_errors():
    values = jnp.array([10, 20, 30, 40], jnp.int32)
    draw = np.asarray(distinct_sample(jax.random.PRNGKey(0), values, 3))
    assert len(set(draw.tolist())) == 3 and set(draw.tolist()) <= {10, 20, 30, 40}
    assert distinct_sample(jax.random.PRNGKey(0), 7, 0).shape == (0,)
    with pytest.raises(ValueError, match="cannot draw 5 distinct values from a population of 4"):
        distinct_sample(jax.random.PRNGKey(0), values, 5)


def test_bounded_ints_stay_in_range_and_cover_it():
    bounds = jnp.array([1, 2, 3, 100, 65536], jnp.int32)
    draws = np.asarray(
        jax.vmap(lambda k: bounded_ints(k, bounds))(jax.random.split(jax.random.PRNGKey(0), 20_000))
    )
    assert (draws >= 0).all() and (draws < np.asarray(bounds)).all()
    assert (draws[:, 0] == 0).all()
    assert set(np.unique(draws[:, 1])) == {0, 1} and set(np.unique(draws[:, 2])) == {0, 1, 2}
    assert _chi2_p(np.bincount(draws[:, 3], minlength=100)) > P_MIN


@pytest.mark.parametrize("n", [1, 63, 64, 200, 4096])
def test_prefix_count_is_cumsum(n):
    from ppage_jax.wrappers import _prefix_count

    mask = np.asarray(jax.random.bernoulli(jax.random.PRNGKey(n), 0.3, (n,)))
    np.testing.assert_array_equal(np.asarray(jax.jit(_prefix_count)(mask)), np.cumsum(mask))
