"""JAL-GT: PPAGE's joint-action learning with a game-theoretic solver, on device.

Albrecht, Christianos & Tuyls (2024), *Multi-Agent Reinforcement Learning*, algorithm 7, with
the correlated equilibrium as solution concept (correlated Q-learning, Greenwald & Hall
2003), as PPAGE's ``jalgt``:

- The *players* are the agents of the learning roles (at most two, so the joint game has
  ``nA ** 2`` joint actions; 25 on PPAGE's 1v1 preset). Each player ``i`` has its own
  joint-action value table ``Q_i[s, a]``, ``float32[n, table_size, nA ** n]``, keyed by the
  hashed joint observation of the players (:mod:`ppage_jax.train.algorithms.tabular`'s hashing) and
  indexed by the joint action (first player most significant), valued by its own reward.
- At a state ``s`` the tables define the stage game ``Gamma_s,i(a) = Q_i[s, a]``;
  :func:`correlated_equilibrium` solves it for the correlated equilibrium that maximises the
  players' summed payoff (the linear programme of the book's eq. 4.20-4.23), for every grid
  at once (:mod:`ppage_jax.train.kit.lp`).
- Acting: a joint action is sampled from the equilibrium of ``s``; each player then explores
  on its own with probability epsilon (a uniform action instead of its part), epsilon
  decaying per finished episode as PPAGE.
- Learning: ``Q_i[s, a] += alpha * (r_i + gamma * (1 - terminal_i) * V_i(s') - Q_i[s, a])``
  with ``V_i(s') = sum_a pi(a) Q_i[s', a]`` under the equilibrium ``pi`` of ``s'`` (one solve
  serves every player), from the tables before the update. Terminal is the episode's
  termination or the prey's own capture; truncation bootstraps on ``final_obs``. A captured
  prey's transitions are masked out; transitions hitting the same entry in the same turn are
  averaged into one step.

PPAGE skips the solve when every agent explores; here every grid's game is solved each turn
(one batched programme), which changes no outcome.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ppage_jax.config.experiment.tabular import JALGTHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.algorithms import tabular
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, lp, rollout
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.rollout import EnvCarry
from ppage_jax.types import Replaceable

Hyperparams = JALGTHyperparams
STOCHASTIC = False  # greedy_actions already plays the (mixed) equilibrium with epsilon 0

# Largest deviation gain (payoffs scaled to [-1, 1]) an equilibrium may show before it is
# solved again with RETRY_PIVOT_TOL.
CE_TOL = 1e-6
RETRY_PIVOT_TOL = 1e-7


# --------------------------------------------------------------------------- stage games
@functools.cache
def deviation_structure(n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The correlated-equilibrium constraints of an ``n``-player, ``k``-action game, one row
    per (player i, recommended action a', deviation a'' != a'): ``player`` int[R], ``mask``
    float32[R, J] (joint actions whose part i is a'), ``deviated`` int[R, J] (the joint
    action with part i replaced by a'')."""
    joint = np.arange(k**n)
    powers = k ** np.arange(n - 1, -1, -1)
    parts = (joint[None, :] // powers[:, None]) % k  # [n, J]
    player, mask, deviated = [], [], []
    for i in range(n):
        for recommended in range(k):
            for deviation in range(k):
                if deviation != recommended:
                    player.append(i)
                    mask.append(parts[i] == recommended)
                    deviated.append(joint + (deviation - parts[i]) * powers[i])
    return (
        np.asarray(player, np.int32),
        np.asarray(mask, np.float32),
        np.asarray(deviated, np.int32),
    )


def game_shape(num_joint: int, n: int) -> int:
    """Actions per player ``k`` of a game with ``num_joint = k ** n`` joint actions."""
    k = int(round(num_joint ** (1.0 / n))) if n > 0 else 0
    if n < 1 or k < 1 or k**n != num_joint:
        raise ValueError(
            f"payoffs must be float[n_agents, k ** n_agents] with n_agents >= 1; "
            f"got {num_joint} joint actions for {n} agents"
        )
    return k


def correlated_equilibrium(payoffs: jax.Array, max_pivots: int = 1000) -> jax.Array:
    """The social-welfare-maximising correlated equilibrium of a normal-form game.

    ``payoffs`` float32[n_agents, k ** n_agents]: each agent's payoff of every joint action
    (row-major, agent 0 most significant). Returns float32[k ** n_agents], a distribution
    over joint actions under which no agent gains by deviating from any recommended action,
    maximising the summed expected payoff. Jittable and vmappable.
    """
    n, num_joint = payoffs.shape
    player, mask, deviated = deviation_structure(n, game_shape(num_joint, n))
    scale = jnp.abs(payoffs).max()
    q = payoffs.astype(jnp.float32) / jnp.where(scale > 0, scale, 1.0)  # in [-1, 1]
    rows = player[:, None]
    gain = q[rows, deviated] - q[rows, np.arange(num_joint)[None, :]]
    # max welfare s.t. deviation gains <= 0 and sum(x) <= 1, x >= 0. The constraints except
    # the last are homogeneous and the objective (welfare + n + 1 > 0) is positive, so the
    # optimum puts all mass, sum(x) = 1, on the best equilibrium (one always exists).
    a = jnp.concatenate([mask * gain, jnp.ones((1, num_joint), jnp.float32)])
    b = jnp.zeros(a.shape[0], jnp.float32).at[-1].set(1.0)
    welfare = q.sum(0) + (n + 1.0)

    def normalised(x):
        total = x.sum()
        return jnp.where(total > 0, x / jnp.where(total > 0, total, 1.0), 1.0 / num_joint)

    def violation(p):
        return (a[:-1] @ p).max()

    first = normalised(lp.maximize(welfare, a, b, max_pivots).x)
    # Round-off can, rarely, end the simplex at a point that breaks a constraint. Those
    # games are solved again with a finer pivot tolerance (the others get a zero objective,
    # so under vmap the second solve costs nothing unless some game needs it); the better
    # of the two answers is kept.
    retry = violation(first) > CE_TOL
    again = lp.maximize(jnp.where(retry, welfare, 0.0), a, b, max_pivots, RETRY_PIVOT_TOL)
    second = normalised(again.x)
    return jnp.where(retry & (violation(second) < violation(first)), second, first)


# --------------------------------------------------------------------------- players
def players(tc: TrainConfig) -> np.ndarray:
    """Agent rows of the learning roles, in row order (the joint game's players)."""
    rows = [tc.agents_of(role) for role in tc.learning_roles]
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


def joint_keys(tc: TrainConfig, obs: jax.Array) -> jax.Array:
    """Table rows int32[E] of the players' joint observations obs float[E, A, F]."""
    return tabular.team_keys("cql", obs[:, players(tc)], tc.hp.table_size)


def equilibria(tables: jax.Array, keys: jax.Array, max_pivots: int) -> jax.Array:
    """float32[E, J]: the equilibrium of each grid's stage game ``tables[:, keys[e]]``."""
    games = jnp.moveaxis(tables[:, keys], 0, 1)  # [E, n, J]
    return jax.vmap(lambda g: correlated_equilibrium(g, max_pivots))(games)


def decode(joint: jax.Array, n: int, k: int) -> jax.Array:
    """int32[..., n] player actions of int32[...] joint actions (first player most
    significant); the inverse of :func:`ppage_jax.train.algorithms.tabular.joint_index`."""
    powers = jnp.asarray(k ** np.arange(n - 1, -1, -1), jnp.int32)
    return (joint[..., None] // powers) % k


# --------------------------------------------------------------------------- runner
@struct.dataclass
class RunnerState(Replaceable):
    tables: jax.Array  # float32[n_players, table_size, nA ** n_players]
    env: EnvCarry
    key: jax.Array
    progress: Progress


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    k_env, key = jax.random.split(key)
    n = len(players(tc))
    tables = jnp.zeros((n, tc.hp.table_size, tc.env.num_actions**n), jnp.float32)
    return RunnerState(tables, rollout.env_reset(tc, k_env, params), key, loop.progress_init())


def act(
    tc: TrainConfig, tables: jax.Array, key: jax.Array, obs: jax.Array, epsilon: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Actions int32[E, A] (players' rows set, 0 elsewhere), the players' actions int32[E, n]
    and the table rows int32[E] of ``obs``: a joint action sampled from each grid's
    equilibrium, then each player exploring on its own with probability ``epsilon``."""
    rows, k = players(tc), tc.env.num_actions
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    keys = joint_keys(tc, obs)
    if len(rows) == 0:
        return actions, jnp.zeros((obs.shape[0], 0), jnp.int32), keys
    probs = equilibria(tables, keys, tc.hp.max_pivots)
    k_joint, k_explore, k_random = jax.random.split(key, 3)
    joint = jax.random.categorical(k_joint, jnp.log(probs))
    chosen = decode(joint, len(rows), k)
    explore = jax.random.uniform(k_explore, chosen.shape) < epsilon
    chosen = jnp.where(explore, jax.random.randint(k_random, chosen.shape, 0, k), chosen)
    return actions.at[:, rows].set(chosen), chosen, keys


def td_update(
    tables: jax.Array,
    keys: jax.Array,
    joint: jax.Array,
    reward: jax.Array,
    terminal: jax.Array,
    valid: jax.Array,
    next_value: jax.Array,
    hp: JALGTHyperparams,
) -> tuple[jax.Array, jax.Array]:
    """One batched step of every player's table from one turn of every grid.

    ``keys``, ``joint`` int32[E]; ``reward``, ``terminal``, ``valid``, ``next_value``
    float32[E, n]. Returns the new tables and the TD errors float32[E, n] (invalid
    transitions change nothing)."""
    n, size, num_joint = tables.shape
    player = jnp.arange(n)[None, :]
    q_taken = tables[player, keys[:, None], joint[:, None]]
    index = (player * size + keys[:, None]) * num_joint + joint[:, None]
    return tabular.q_step(tables, index, q_taken, reward, terminal, next_value, valid, hp)


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps`` turns, each followed by one batched update of every player's table."""
    hp, rows, k = tc.hp, players(tc), tc.env.num_actions

    def play(tables, key, obs, epsilon):
        actions, chosen, keys = act(tc, tables, key, obs, epsilon)
        return actions, (chosen, keys)

    def learn(tables, step, actions, acted):
        chosen, keys = acted
        errors = {}
        if len(rows):
            next_keys = joint_keys(tc, step.final_obs)
            next_probs = equilibria(tables, next_keys, hp.max_pivots)
            next_value = jnp.einsum("ej,nej->en", next_probs, tables[:, next_keys])
            valid = step.valid[:, rows].astype(jnp.float32)
            tables, td = td_update(
                tables,
                keys,
                tabular.joint_index(chosen, k),
                step.reward[:, rows],
                step.agent_terminal[:, rows].astype(jnp.float32),
                valid,
                next_value,
                hp,
            )
            is_pred = np.asarray(tc.env.is_predator, bool)[rows]
            for role in tc.learning_roles:
                mine = is_pred if role == "predator" else ~is_pred
                errors[f"td_error/{role}"] = rollout.masked_mean(
                    jnp.abs(td[:, mine]), valid[:, mine]
                )
        return tables, errors

    return tabular.epsilon_greedy_update(tc, runner, params, play, learn)


train = loop.trainer(init, update, "JAL-GT")


# --------------------------------------------------------------------------- policy
def policy_state(runner: RunnerState) -> dict:
    """``{"tables": float32[n_players, table_size, nA ** n_players]}``."""
    return {"tables": runner.tables}


def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Actions int32[E, A] of the equilibrium play without exploration (PPAGE evaluates
    JAL-GT with epsilon 0): a joint action sampled from each grid's equilibrium."""
    actions, _, _ = act(tc, policy["tables"], key, obs, jnp.float32(0.0))
    return actions
