"""Baseline policies. A policy is ``policy(key, obs float32[A, F], state) -> int32[A]``.

Baselines may read the full state (they are privileged reference behaviours, not learners).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams, State
from ppage_jax.types import Actions, Key, Observations

Policy = Callable[[Key, Observations, State], Actions]


def noop_policy(env: GridWorld) -> Policy:
    """Every agent takes the table's no-op."""

    def act(key: Key, obs: Observations, state: State) -> Actions:
        return jnp.full((env.num_agents,), env.noop_action, jnp.int32)

    return act


def random_policy(env: GridWorld) -> Policy:
    """Uniformly random actions over the whole action table."""

    def act(key: Key, obs: Observations, state: State) -> Actions:
        return jax.random.randint(key, (env.num_agents,), 0, env.num_actions)

    return act


# ------------------------------------------------------------------ shortest-path baselines
def _shifted(grid: jax.Array, dx: int, dy: int, fill: int) -> jax.Array:
    """``grid`` read one move (dx, dy) away: out[y, x] = grid[y + dy, x + dx], ``fill`` off
    the grid."""
    size = grid.shape[0]
    padded = jnp.pad(grid, 1, constant_values=fill)
    return lax.dynamic_slice(padded, (1 + dy, 1 + dx), (size, size))


def bfs_distances(env: GridWorld, obstacle_map: jax.Array, sources: jax.Array) -> jax.Array:
    """int32[H, W]: fewest single-cell moves (with ``env``'s action table) from each cell to the
    nearest ``sources`` cell (bool[H, W]), moving only where the move stage would allow (an
    obstacle refuses the move when blocking is on). Unreachable cells, and obstacle cells when
    blocking is on, get ``H*W``.

    A multi-source breadth-first search as a ``lax.while_loop`` of relaxations over the whole
    grid, each a minimum over the grid shifted by every move (a move off the grid stays put
    and can never shorten a path); jittable and vmappable.
    """
    size = env.layout.size
    unreachable = jnp.int32(size * size)
    moves = sorted({(int(dx), int(dy)) for dx, dy in np.asarray(env.action_table)} - {(0, 0)})
    blocked = obstacle_map if env.layout.block_agents_by_obstacles else None

    def relax(carry):
        dist, _ = carry
        enterable = dist if blocked is None else jnp.where(blocked, unreachable, dist)
        via = enterable
        for dx, dy in moves:  # static: the action table's directions
            via = jnp.minimum(via, _shifted(enterable, dx, dy, size * size))
        new = jnp.where(sources, 0, jnp.minimum(dist, via + 1))
        return new, (new != dist).any()

    start = jnp.where(sources, 0, unreachable).astype(jnp.int32)
    dist, _ = lax.while_loop(lambda c: c[1], relax, (start, jnp.bool_(True)))
    if blocked is not None:  # no agent can stand on an obstacle
        dist = jnp.where(blocked, unreachable, dist)
    return dist


# Grids up to this many columns search with one machine word per row (bfs_distances_at),
# growing the reached set this many moves per loop step (a loop step costs more than a move).
WORD_BITS = 32
GROWTH_PER_STEP = 8


def _pack_rows(mask: jax.Array) -> jax.Array:
    """uint32[H]: bool[H, W] with bit ``x`` of row ``y`` set where ``mask[y, x]``."""
    weights = jnp.left_shift(jnp.uint32(1), jnp.arange(mask.shape[1], dtype=jnp.uint32))
    return (mask.astype(jnp.uint32) * weights[None, :]).sum(axis=1, dtype=jnp.uint32)


def bfs_distances_at(
    env: GridWorld, obstacle_map: jax.Array, sources: jax.Array, cells: jax.Array
) -> jax.Array:
    """int32[...]: :func:`bfs_distances` read at ``cells`` (int32[..., 2], [x, y]), the same
    values. The search grows the set of cells within ``k`` moves of a source one move per
    step, each grid row one machine word (a move is a shift of the words), and stops once
    every asked cell is reached or the set stops growing: on a 16x16 grid about 16 word
    operations a step instead of 256 cell operations, and no more steps than the asked cells
    need. Grids wider than :data:`WORD_BITS` read the full search instead."""
    size = env.layout.size
    unreachable = jnp.int32(size * size)
    x, y = cells[..., 0], cells[..., 1]
    if size > WORD_BITS:
        return bfs_distances(env, obstacle_map, sources)[y, x]
    moves = sorted({(int(dx), int(dy)) for dx, dy in np.asarray(env.action_table)} - {(0, 0)})
    width = jnp.uint32((1 << size) - 1)
    blocking = env.layout.block_agents_by_obstacles
    free = _pack_rows(~obstacle_map) if blocking else jnp.full(size, width, jnp.uint32)

    def reached_at(rows: jax.Array) -> jax.Array:
        return (jnp.right_shift(rows[y], x.astype(jnp.uint32)) & 1).astype(bool)

    def grow(rows: jax.Array) -> jax.Array:
        """The cells one move from a reached free cell (a cell c with c + m reached)."""
        spread = rows & free
        padded = jnp.pad(spread, 1)
        out = rows
        for dx, dy in moves:  # static: the action table's directions
            moved = padded[1 + dy : 1 + dy + size]  # row y reads row y + dy
            moved = jnp.right_shift(moved, dx) if dx >= 0 else jnp.left_shift(moved, -dx)
            out = out | (moved & width)
        return out

    start = _pack_rows(sources)
    found = jnp.where(reached_at(start), 0, unreachable)

    def going(carry):
        _, dist, changed, _ = carry
        return changed & (dist == unreachable).any()

    def step(carry):
        rows, dist, _, k = carry
        before = rows
        for j in range(GROWTH_PER_STEP):  # static: a few moves per loop step
            rows = grow(rows)
            dist = jnp.where((dist == unreachable) & reached_at(rows), k + j + 1, dist)
        return rows, dist, (rows != before).any(), k + GROWTH_PER_STEP

    _, dist, _, _ = lax.while_loop(going, step, (start, found, jnp.bool_(True), jnp.int32(0)))
    if blocking:  # no agent can stand on an obstacle
        dist = jnp.where(obstacle_map[y, x], unreachable, dist)
    return dist


def _action_scores(
    env: GridWorld, sources: jax.Array, state: State, budget: jax.Array, rows: np.ndarray
) -> tuple[jax.Array, jax.Array]:
    """For every agent and action, slide up to ``budget`` cells along the action's direction
    (refused moves stay put) and return (closest BFS distance to ``sources`` met on the way,
    distance at the end), both int32[A, n_actions]. The no-op, or a budget of 0, reports the
    current cell for both. The distances are read where the slides go
    (:func:`bfs_distances_at`), for the agent ``rows`` (static indices) alone: the other
    rows of both arrays are 0."""
    size = env.layout.size
    table = jnp.asarray(env.action_table)
    moves = (table != 0).any(axis=1)  # [n_actions]
    budget = budget[rows]
    pos = jnp.broadcast_to(state.positions[rows, None, :], (len(rows), env.num_actions, 2))
    visited, actives = [pos], []
    for k in range(env.layout.max_speed):  # static, small: the sub-steps of one turn
        active = moves[None, :] & (k < budget)[:, None]
        target = jnp.clip(pos + table[None, :, :], 0, size - 1)
        go = active
        if env.layout.block_agents_by_obstacles:
            go = go & ~state.obstacle_map[target[..., 1], target[..., 0]]
        pos = jnp.where(go[..., None], target, pos)
        visited.append(pos)
        actives.append(active)
    dist = bfs_distances_at(env, state.obstacle_map, sources, jnp.stack(visited))
    closest, end = dist[0], dist[0]
    for k, active in enumerate(actives):
        d = dist[k + 1]
        # The first sub-step leaves the current cell, so it replaces it rather than min-ing.
        closest = jnp.where(active, d if k == 0 else jnp.minimum(closest, d), closest)
        end = jnp.where(active, d, end)
    blank = jnp.zeros((env.num_agents, env.num_actions), closest.dtype)
    return blank.at[rows].set(closest), blank.at[rows].set(end)


def _turn_budget(state: State, params: EnvParams) -> jax.Array:
    """int32[A]: cells each agent can move this turn, min(speed, stamina)."""
    return jnp.minimum(params.speeds, state.stamina)


def _pick_best(key: jax.Array, first: jax.Array, second: jax.Array) -> jax.Array:
    """int32[A]: per agent, the action maximising ``first``, then ``second`` among those tied,
    then uniformly at random among any remaining ties (exact integer comparisons)."""
    tied = first == first.max(axis=1, keepdims=True)
    second = jnp.where(tied, second, jnp.iinfo(jnp.int32).min)
    tied = tied & (second == second.max(axis=1, keepdims=True))
    noise = jax.random.uniform(key, first.shape)
    return jnp.argmax(jnp.where(tied, noise, -1.0), axis=1).astype(jnp.int32)


def _cells_of(env: GridWorld, state: State, rows: jax.Array) -> jax.Array:
    """bool[H, W]: the cells holding at least one of the agent rows selected by ``rows``."""
    size = env.layout.size
    x, y = state.positions[:, 0], state.positions[:, 1]
    return (
        jnp.zeros((size * size,), jnp.int32)
        .at[y * size + x]
        .add(rows.astype(jnp.int32))
        .reshape(size, size)
        > 0
    )


def greedy_chase(env: GridWorld, params: EnvParams | None = None) -> Policy:
    """Predators follow a shortest path (BFS over free cells) to the nearest uncaptured prey.

    Each predator scores every action by sliding its turn budget along it: first the closest
    BFS distance met on the way (so a path through a prey's cell wins), then the distance at
    the end; remaining ties are broken at random. With no reachable prey a predator takes the
    no-op. Prey rows always take the no-op (pair it with an evade policy through
    :func:`combine_policies`). Speeds come from ``params`` (default ``env.default_params``).
    """
    params = env.default_params if params is None else params
    is_predator = jnp.asarray(env.is_predator)
    predators = np.flatnonzero(np.asarray(env.is_predator))
    unreachable = env.layout.size**2

    def act(key: Key, obs: Observations, state: State) -> Actions:
        sources = _cells_of(env, state, ~is_predator & ~state.captured)
        budget = _turn_budget(state, params)
        closest, end = _action_scores(env, sources, state, budget, predators)
        action = _pick_best(key, -closest, -end)
        reachable = closest.min(axis=1) < unreachable
        return jnp.where(is_predator & reachable, action, env.noop_action).astype(jnp.int32)

    return act


def greedy_evade(env: GridWorld, params: EnvParams | None = None) -> Policy:
    """Prey move to the cell that keeps them farthest (BFS distance) from the nearest predator.

    Each prey scores every action by sliding its turn budget along it: first the closest
    distance to a predator met on the way (never run through a predator), then the distance at
    the end; remaining ties are broken at random. Predator rows take the no-op.
    """
    params = env.default_params if params is None else params
    is_predator = jnp.asarray(env.is_predator)
    prey = np.flatnonzero(~np.asarray(env.is_predator))

    def act(key: Key, obs: Observations, state: State) -> Actions:
        sources = _cells_of(env, state, is_predator)
        closest, end = _action_scores(env, sources, state, _turn_budget(state, params), prey)
        action = _pick_best(key, closest, end)
        return jnp.where(is_predator, env.noop_action, action).astype(jnp.int32)

    return act


def intercept_chase(env: GridWorld, params: EnvParams | None = None) -> Policy:
    """Predators chase where the prey are about to be: each prey's greedy-evade move this turn
    is predicted (predators held still, the move stage's rules), then :func:`greedy_chase`
    runs towards the predicted cells. Against greedy-evade prey it heads them off instead of
    following them. Prey rows take the no-op.
    """
    params = env.default_params if params is None else params
    is_predator = jnp.asarray(env.is_predator)
    evade, chase = greedy_evade(env, params), greedy_chase(env, params)
    directions = jnp.asarray(env.action_table)

    def act(key: Key, obs: Observations, state: State) -> Actions:
        k_flee, k_chase = jax.random.split(key)
        flee = directions[evade(k_flee, obs, state)]
        budget = jnp.where(is_predator, 0, _turn_budget(state, params))
        ahead = state
        for k in range(env.layout.max_speed):  # static, small: the sub-steps of one turn
            ahead = ahead.replace(positions=env.move_agents(ahead, k < budget, flee))
        return chase(k_chase, obs, ahead)

    return act


def combine_policies(env: GridWorld, predator_policy: Policy, prey_policy: Policy) -> Policy:
    """One policy taking predator rows from ``predator_policy`` and prey rows from
    ``prey_policy`` (each gets its own key)."""
    is_predator = jnp.asarray(env.is_predator)

    def act(key: Key, obs: Observations, state: State) -> Actions:
        k_pred, k_prey = jax.random.split(key)
        return jnp.where(
            is_predator, predator_policy(k_pred, obs, state), prey_policy(k_prey, obs, state)
        ).astype(jnp.int32)

    return act


# Named baselines per role (factories ``f(env, params=None) -> Policy``), for the audit.
PREDATOR_POLICIES: dict[str, Callable[..., Policy]] = {
    "noop": lambda env, params=None: noop_policy(env),
    "random": lambda env, params=None: random_policy(env),
    "chase": greedy_chase,
    "intercept": intercept_chase,
}
PREY_POLICIES: dict[str, Callable[..., Policy]] = {
    "noop": lambda env, params=None: noop_policy(env),
    "random": lambda env, params=None: random_policy(env),
    "evade": greedy_evade,
}
