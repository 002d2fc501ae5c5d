"""Baseline policies: BFS distances, greedy chase and evade, and their combination.

Conventions: [x, y] with y growing downward; discrete_5 actions are RIGHT [1,0], YPLUS [0,1],
LEFT [-1,0], YMINUS [0,-1], NOOP.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax import policies as P

RIGHT, YPLUS, LEFT, YMINUS, NOOP = range(5)
WALL = ["..#..", "..#..", "..#..", ".....", "....."]
CORRIDOR = ["#####", "#####", ".....", "#####", "#####"]


def map_env(rows, predators=1, prey=1, predator_speed=1, prey_speed=1, **extra):
    return pj.make(
        None,
        {
            "env.size": len(rows),
            "env.map": rows,
            "agents.predators.count": predators,
            "agents.preys.count": prey,
            "agents.predators.speed": predator_speed,
            "agents.preys.speed": prey_speed,
            **extra,
        },
    )


def place(env, positions):
    _, fresh = env.reset(jax.random.PRNGKey(0))  # a fixed map gives fixed obstacles
    return env.reset_to(jnp.asarray(positions), fresh.obstacles)


def cells(size, *xy):
    grid = np.zeros((size, size), bool)
    for x, y in xy:
        grid[y, x] = True
    return jnp.asarray(grid)


def test_bfs_distances_route_around_a_wall():
    env = map_env(WALL)
    _, state = place(env, [[1, 0], [3, 0]])
    dist = np.asarray(P.bfs_distances(env, state.obstacle_map, cells(5, (3, 0))))
    blocked = 25  # obstacles (blocking on) are unreachable
    np.testing.assert_array_equal(
        dist,
        [
            [9, 8, blocked, 0, 1],
            [8, 7, blocked, 1, 2],
            [7, 6, blocked, 2, 3],
            [6, 5, 4, 3, 4],
            [7, 6, 5, 4, 5],
        ],
    )


def test_bfs_without_blocking_walks_through_obstacles():
    env = map_env(WALL, **{"env.dynamics.block_agents_by_obstacles": False})
    _, state = place(env, [[1, 0], [3, 0]])
    dist = np.asarray(P.bfs_distances(env, state.obstacle_map, cells(5, (3, 0))))
    assert dist[0].tolist() == [3, 2, 1, 0, 1]  # plain Manhattan distance along row 0


def test_bfs_multi_source_and_unreachable():
    env = map_env(["..#..", "..#..", "..#..", "..#..", "..#.."])  # a full wall at x=2
    _, state = place(env, [[0, 0], [4, 4]])
    dist = np.asarray(P.bfs_distances(env, state.obstacle_map, cells(5, (0, 0), (0, 4))))
    assert dist[:, 0].tolist() == [0, 1, 2, 1, 0]  # nearest of the two sources
    assert (dist[:, 3:] == 25).all()  # the other side cannot be reached


def test_bfs_with_diagonal_actions():
    env = map_env(["....."] * 5, **{"actions.type": "discrete_9"})
    _, state = place(env, [[0, 0], [4, 4]])
    dist = np.asarray(P.bfs_distances(env, state.obstacle_map, cells(5, (0, 0))))
    assert dist[4, 4] == 4 and dist[2, 4] == 4 and dist[1, 1] == 1  # Chebyshev distance


def test_chase_takes_the_detour_not_the_manhattan_step():
    env = map_env(WALL)
    obs, state = place(env, [[1, 0], [3, 0]])  # prey two cells right, behind the wall
    chase = jax.jit(P.greedy_chase(env))
    for seed in range(4):  # the shortest path is unique
        actions = np.asarray(chase(jax.random.PRNGKey(seed), obs, state))
        assert actions.tolist() == [YPLUS, NOOP]  # prey rows take the no-op


def test_chase_runs_through_the_prey_with_speed():
    # A speed-3 predator two cells left of the prey: sliding right passes the prey's cell
    # (closest distance 0) even though it ends one cell beyond it.
    env = map_env(CORRIDOR, predator_speed=3)
    obs, state = place(env, [[0, 2], [2, 2]])
    actions = P.greedy_chase(env)(jax.random.PRNGKey(0), obs, state)
    assert int(actions[0]) == RIGHT
    _, after, _, terminated, _, _ = env.step(jax.random.PRNGKey(0), state, actions)
    assert bool(after.captured[1]) and bool(terminated)


def test_chase_without_reachable_prey_waits():
    env = map_env(["..#..", "..#..", "..#..", "..#..", "..#.."])
    obs, state = place(env, [[0, 0], [4, 4]])
    assert P.greedy_chase(env)(jax.random.PRNGKey(0), obs, state).tolist() == [NOOP, NOOP]


def test_evade_moves_away_along_the_corridor():
    env = map_env(CORRIDOR)
    obs, state = place(env, [[1, 2], [3, 2]])
    assert P.greedy_evade(env)(jax.random.PRNGKey(0), obs, state).tolist() == [NOOP, RIGHT]


def test_evade_never_runs_through_a_predator():
    # Prey (speed 3) at x=1, predator at x=2. RIGHT would slide through the predator to x=4
    # (end distance 2); LEFT reaches x=0 (distance 2 as well) without touching it.
    env = map_env(CORRIDOR, prey_speed=3)
    obs, state = place(env, [[2, 2], [1, 2]])
    evade = jax.jit(P.greedy_evade(env))
    for seed in range(6):
        assert evade(jax.random.PRNGKey(seed), obs, state).tolist() == [NOOP, LEFT]


def test_evade_breaks_ties_at_random():
    # In the open, a prey diagonal from the predator has two equally good moves away.
    env = map_env(["....."] * 5)
    obs, state = place(env, [[1, 1], [2, 2]])
    evade = jax.jit(P.greedy_evade(env))
    seen = {int(evade(jax.random.PRNGKey(s), obs, state)[1]) for s in range(20)}
    assert seen == {RIGHT, YPLUS}


@pytest.mark.slow  # compiles the intercept
def test_intercept_heads_the_prey_off():
    # The prey (speed 3) at (0, 1) is two turns of chasing away over the top; greedy evade
    # sends it down the left column, so the interceptor goes down while the chase goes up.
    env = map_env(["#....", "..#..", "..#..", ".....", "..#.."], prey_speed=3)
    obs, state = place(env, [[3, 1], [0, 1]])
    chase, intercept = jax.jit(P.greedy_chase(env)), jax.jit(P.intercept_chase(env))
    evade = jax.jit(P.greedy_evade(env))
    for seed in range(6):
        key = jax.random.PRNGKey(seed)
        assert chase(key, obs, state).tolist() == [YMINUS, NOOP]
        assert evade(key, obs, state).tolist() == [NOOP, YPLUS]
        assert intercept(key, obs, state).tolist() == [YPLUS, NOOP]


@pytest.mark.slow  # compiles every policy
def test_combine_policies_takes_rows_by_role():
    env = map_env(CORRIDOR, predators=1, prey=2)
    obs, state = place(env, [[1, 2], [3, 2], [0, 2]])
    both = P.combine_policies(env, P.greedy_chase(env), P.greedy_evade(env))
    # predator: toward the nearer prey (x=0, left, or x=3 two cells right: x=0 is nearer);
    # prey at x=3 runs right; prey at x=0 is cornered: every action it may pick keeps it there.
    actions = both(jax.random.PRNGKey(0), obs, state).tolist()
    assert actions[:2] == [LEFT, RIGHT] and actions[2] in (NOOP, LEFT, YPLUS, YMINUS)
    random_prey = P.combine_policies(env, P.noop_policy(env), P.random_policy(env))
    key = jax.random.PRNGKey(7)
    _, k_prey = jax.random.split(key)
    expected = P.random_policy(env)(k_prey, obs, state)
    actions = random_prey(key, obs, state)
    assert int(actions[0]) == NOOP
    assert actions[1:].tolist() == expected[1:].tolist()


@pytest.fixture(scope="module")
def default_batch():
    env = pj.make("configs/default")
    keys = jax.random.split(jax.random.PRNGKey(3), 64)
    obs, states = jax.vmap(env.reset, in_axes=(0, None))(keys, env.default_params)
    return env, obs, states


@pytest.mark.slow  # a batch of default grids
def test_chase_shortens_every_predators_path_by_one_under_vmap(default_batch):
    env, obs, states = default_batch
    policy = P.combine_policies(env, P.greedy_chase(env), P.noop_policy(env))
    keys = jax.random.split(jax.random.PRNGKey(4), obs.shape[0])
    actions = jax.jit(jax.vmap(policy))(keys, obs, states)
    _, after, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
        keys, states, actions, env.default_params
    )
    is_pred = np.asarray(env.is_predator)
    prey_cells = jax.vmap(lambda s: P._cells_of(env, s, ~jnp.asarray(is_pred)))(states)
    dist = jax.vmap(lambda s, src: P.bfs_distances(env, s.obstacle_map, src))(states, prey_cells)
    d = np.asarray(dist)
    rows = np.arange(d.shape[0])[:, None]
    pred = np.flatnonzero(is_pred)
    before, moved = np.asarray(states.positions)[:, pred], np.asarray(after.positions)[:, pred]
    d0 = d[rows, before[..., 1], before[..., 0]]
    d1 = d[rows, moved[..., 1], moved[..., 0]]
    reachable = d0 < env.layout.size**2
    assert reachable.mean() > 0.8
    np.testing.assert_array_equal(d1[reachable], d0[reachable] - 1)
    np.testing.assert_array_equal(moved[~reachable], before[~reachable])


@pytest.mark.slow  # a batch of default grids
def test_intercept_chases_where_the_env_moves_the_prey(default_batch):
    # The prediction is the env's own move: step with the predators still and the prey on
    # greedy evade (the interceptor's key split), then chase from there.
    env, obs, states = default_batch
    intercept, chase = P.intercept_chase(env), P.greedy_chase(env)
    evade = P.greedy_evade(env)

    def both(key, obs, state):
        k_flee, k_chase = jax.random.split(key)
        _, after, *_ = env.step(key, state, evade(k_flee, obs, state))
        return intercept(key, obs, state), chase(
            k_chase, obs, state.replace(positions=after.positions)
        )

    keys = jax.random.split(jax.random.PRNGKey(5), obs.shape[0])
    got, expected = jax.jit(jax.vmap(both))(keys, obs, states)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    chase_keys = jax.vmap(lambda k: jax.random.split(k)[1])(keys)  # the same tie-breaks
    plain = jax.jit(jax.vmap(chase))(chase_keys, obs, states)
    assert (np.asarray(plain) != np.asarray(got)).any()  # the prediction changes some moves


@pytest.mark.parametrize(
    "actions, blocking, size",
    [
        ("discrete_5", True, 16),
        ("cross", True, 9),
        ("discrete_9", False, 12),
        ("discrete_5", True, 40),
    ],
)
def test_distances_at_cells_equal_the_full_search(actions, blocking, size):
    # the word-per-row search (every grid up to 32 wide) and the full search read where asked
    env = pj.make(
        None,
        {
            "env.size": size,
            "env.obstacle_percentage": 30.0,
            "actions.type": actions,
            "env.dynamics.block_agents_by_obstacles": blocking,
            "agents.predators.count": 2,
            "agents.preys.count": 1,
        },
    )
    keys = jax.random.split(jax.random.PRNGKey(11), 24)
    _, states = jax.vmap(env.reset)(keys)
    sources = jax.vmap(lambda s: P._cells_of(env, s, jnp.asarray(env.is_predator)))(states)
    everywhere = jnp.stack(jnp.meshgrid(jnp.arange(size), jnp.arange(size)), -1)  # [y, x, 2]

    def both(state, src):
        full = P.bfs_distances(env, state.obstacle_map, src)
        return full, P.bfs_distances_at(env, state.obstacle_map, src, everywhere)

    full, at = jax.jit(jax.vmap(both))(states, sources)
    np.testing.assert_array_equal(np.asarray(at), np.asarray(full))
    assert (np.asarray(full) == size * size).any() == blocking  # walled-off cells
    assert (np.asarray(full) > 5).any()
