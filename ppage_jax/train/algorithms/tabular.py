"""Tabular Q-learning on device: hashed observation tables for ``iql``, ``cql`` and ``mixed``.

A Python dict keyed by the observation (PPAGE) cannot live on a device, so the observation is
hashed into a fixed-size table: every feature is rounded to an integer, the integer vector is
mixed by a multiply-add hash with fixed random odd multipliers and the murmur3 finaliser, and
the result modulo ``table_size`` picks the row. Two different observations may share a row
(a collision) and then share their Q-values; :func:`collision_rate` measures how often that
happens (see the README for the figure on the default config).

Two kinds of team learner, chosen per role:

- ``iql`` (PPAGE's IQL): one table per agent, ``float32[n, table_size, nA]``, keyed by the
  agent's own observation; each agent learns from its own reward.
- ``cql`` (PPAGE's centralised Q-learning): one table per team, ``float32[table_size,
  nA ** n]``, keyed by the team's joint observation (members in row order) and indexed by the
  joint action (first member most significant). The team learns from the sum of its members'
  rewards; each member acts on the mean of the row over the other members' actions. Unlike
  PPAGE's ``cql``, which puts predators and prey in one table summing all rewards together,
  each role here is its own team (PPAGE's ``mixed`` with both teams ``cql``).

Updates follow PPAGE, ``Q[s, a] += alpha * (r + gamma * (1 - terminal) * max Q[s'] - Q[s, a])``,
applied to every grid's transition of a turn at once: transitions hitting the same entry in the
same turn are averaged into one step. Terminal means the episode terminated or the prey was
captured; truncation bootstraps from ``final_obs``. Transitions of already-captured prey (all
members captured, for a ``cql`` team) are masked out. Epsilon decays per finished episode.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ppage_jax.config.experiment.tabular import JALGTHyperparams, TabularHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import exploration, loop, roles, rollout
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.rollout import EnvCarry
from ppage_jax.types import Replaceable


# --------------------------------------------------------------------------- hashing
def _multipliers(size: int) -> np.ndarray:
    """Fixed random odd uint32 multipliers, one per feature position."""
    rng = np.random.RandomState(12345)
    return (rng.randint(0, 2**31, size=size).astype(np.uint64) * 2 + 1).astype(np.uint32)


def hash_observation(obs: jax.Array, table_size: int) -> jax.Array:
    """Row index int32[...] of observations float[..., F] (features rounded to integers)."""
    values = jnp.round(obs).astype(jnp.int32).astype(jnp.uint32)
    mixed = (values * jnp.asarray(_multipliers(obs.shape[-1]))).sum(-1, dtype=jnp.uint32)
    h = mixed ^ (mixed >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    h = h ^ (h >> 16)
    return (h % jnp.uint32(table_size)).astype(jnp.int32)


def collision_rate(observations: np.ndarray, table_size: int) -> dict:
    """How much hashing ``observations`` (float[N, F], samples of visited observations) into
    ``table_size`` rows merges distinct observations.

    Returns ``distinct`` observations, ``rows`` used and ``collision_rate``: the fraction of
    distinct observations that share their row with another distinct observation.
    """
    rounded = np.unique(np.round(np.asarray(observations)).astype(np.int64), axis=0)
    rows = np.asarray(hash_observation(jnp.asarray(rounded, jnp.float32), table_size))
    _, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    shared = counts[inverse] > 1
    return {
        "distinct": int(len(rounded)),
        "rows": int(len(counts)),
        "collision_rate": float(shared.mean()) if len(rounded) else 0.0,
    }


# --------------------------------------------------------------------------- team learners
def team_keys(kind: str, obs: jax.Array, table_size: int) -> jax.Array:
    """Table rows: iql int32[E, n] (per agent), cql int32[E] (the joint observation)."""
    if kind == "iql":
        return hash_observation(obs, table_size)
    return hash_observation(obs.reshape(obs.shape[:-2] + (-1,)), table_size)


def joint_index(actions: jax.Array, num_actions: int) -> jax.Array:
    """int32[E] joint action of int32[E, n] member actions (first member most significant)."""
    n = actions.shape[-1]
    weights = jnp.asarray(num_actions ** np.arange(n - 1, -1, -1), jnp.int32)
    return (actions * weights).sum(-1)


def member_values(
    kind: str, table: jax.Array, keys: jax.Array, n: int, num_actions: int
) -> jax.Array:
    """float32[E, n, nA]: the values each member acts on (its own row; cql: the mean of the
    team row over the other members' actions)."""
    if kind == "iql":
        return table[jnp.arange(n)[None, :], keys]
    rows = table[keys].reshape((keys.shape[0],) + (num_actions,) * n)
    marginals = [rows.mean(axis=tuple(a + 1 for a in range(n) if a != i)) for i in range(n)]
    return jnp.stack(marginals, axis=1)


def _averaged_add(
    flat: jax.Array, index: jax.Array, delta: jax.Array, weight: jax.Array
) -> jax.Array:
    """``flat[index] += mean of delta over the entries with the same index`` (weight 0
    entries count for nothing). index, delta, weight: [M]. The counts come from an [M, M]
    comparison (M = grids x team members), cheaper than a table-sized scratch array for the
    batch sizes used here; it grows with num_envs squared."""
    same = (index[:, None] == index[None, :]) & (weight[None, :] > 0)
    count = same.sum(-1)
    share = jnp.where(weight > 0, delta / jnp.maximum(count, 1), 0.0)
    return flat.at[index].add(share)


def q_step(
    table: jax.Array,
    flat_index: jax.Array,
    q_taken: jax.Array,
    reward: jax.Array,
    terminal: jax.Array,
    next_value: jax.Array,
    valid: jax.Array,
    hp: TabularHyperparams | JALGTHyperparams,
) -> tuple[jax.Array, jax.Array]:
    """One batched Q-learning step: ``td = reward + gamma * (1 - terminal) * next_value -
    q_taken`` and ``alpha * td`` added at ``flat_index`` of the flattened ``table`` (averaged
    over the entries of one cell; invalid ones change nothing). Returns the table and td."""
    td = reward + hp.gamma * (1.0 - terminal) * next_value - q_taken
    flat = _averaged_add(
        table.reshape(-1), flat_index.reshape(-1), (hp.alpha * td).reshape(-1), valid.reshape(-1)
    )
    return flat.reshape(table.shape), td


def td_update(
    kind: str, table: jax.Array, batch: dict, hp: TabularHyperparams, num_actions: int
) -> tuple[jax.Array, jax.Array]:
    """One batched Q-learning step of a team from one turn of every grid.

    ``batch``: ``keys``/``next_keys`` (team_keys), ``action`` int32[E, n], ``reward``,
    ``terminal``, ``valid`` float32[E, n]. Returns the new table and the mean |TD error| over
    the valid transitions.
    """
    if kind == "iql":
        n = batch["action"].shape[-1]
        agent = jnp.broadcast_to(jnp.arange(n)[None, :], batch["action"].shape)
        q_taken = table[agent, batch["keys"], batch["action"]]
        next_max = table[agent, batch["next_keys"]].max(-1)
        reward, terminal, valid = batch["reward"], batch["terminal"], batch["valid"]
        flat_index = (agent * table.shape[1] + batch["keys"]) * num_actions + batch["action"]
    else:
        joint_actions = table.shape[-1]
        a = joint_index(batch["action"], num_actions)
        valid = batch["valid"].max(-1)  # any member uncaptured
        reward = (batch["reward"] * batch["valid"]).sum(-1)
        terminal = batch["terminal"].min(-1)  # every member finished
        q_taken = table[batch["keys"], a]
        next_max = table[batch["next_keys"]].max(-1)
        flat_index = batch["keys"] * joint_actions + a
    table, td = q_step(table, flat_index, q_taken, reward, terminal, next_max, valid, hp)
    return table, rollout.masked_mean(jnp.abs(td), valid)


# --------------------------------------------------------------------------- runner
@struct.dataclass
class RunnerState(Replaceable):
    tables: dict  # role -> table (see the module docstring)
    env: EnvCarry
    key: jax.Array
    progress: Progress


def table_shape(kind: str, n: int, num_actions: int, table_size: int) -> tuple[int, ...]:
    return (n, table_size, num_actions) if kind == "iql" else (table_size, num_actions**n)


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    k_env, key = jax.random.split(key)
    env = rollout.env_reset(tc, k_env, params)
    tables = {
        role: jnp.zeros(
            table_shape(
                tc.hp.kinds[role], len(tc.agents_of(role)), tc.env.num_actions, tc.hp.table_size
            ),
            jnp.float32,
        )
        for role in tc.learning_roles
    }
    return RunnerState(tables, env, key, loop.progress_init())


def act(
    tc: TrainConfig, tables: dict, key: jax.Array, obs: jax.Array, epsilon: jax.Array
) -> tuple[jax.Array, dict]:
    """Epsilon-greedy actions int32[E, A] for the learning roles and each role's table keys
    (predators draw first, as in PPAGE's mixed trainer)."""
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    keys = {}
    for i, role in enumerate(tc.learning_roles):
        kind, rows = tc.hp.kinds[role], tc.agents_of(role)
        keys[role] = team_keys(kind, obs[:, rows], tc.hp.table_size)
        values = member_values(kind, tables[role], keys[role], len(rows), tc.env.num_actions)
        action = exploration.epsilon_greedy(jax.random.fold_in(key, i), values, epsilon)
        actions = actions.at[:, rows].set(action)
    return actions, keys


def epsilon_greedy_update(
    tc: TrainConfig,
    runner: Any,
    params: EnvParams,
    act: Callable[[Any, jax.Array, jax.Array, jax.Array], tuple[jax.Array, Any]],
    learn: Callable[[Any, Any, jax.Array, Any], tuple[Any, dict]],
) -> tuple[Any, dict]:
    """``num_steps`` turns of every grid with PPAGE's epsilon schedule, each followed by one
    batched table update: ``act(tables, key, obs, epsilon) -> (actions int32[E, A], what
    learn needs)``, ``learn(tables, step, actions, acted) -> (tables, losses)``. ``runner``
    holds ``tables``, ``env``, ``key`` and ``progress``; returns it updated and the metrics
    row (mean losses, the last ``epsilon`` as an extra)."""
    hp = tc.hp

    def one_step(carry, _):
        tables, env, key, episodes = carry
        key, k_act, k_fixed, k_env = jax.random.split(key, 4)
        epsilon = exploration.ppage_epsilon(hp, episodes)
        actions, acted = act(tables, k_act, env.obs, epsilon)
        actions = roles.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, actions)
        env, step = rollout.env_step(tc, k_env, env, actions, params, hp.gamma)
        tables, losses = learn(tables, step, actions, acted)
        episodes = episodes + step.finished["done"].sum()
        return (tables, env, key, episodes), (step.finished, losses, epsilon)

    tables, env, key, new_progress, row = exploration.epsilon_turns(
        tc, runner, runner.tables, one_step
    )
    return runner.replace(tables=tables, env=env, key=key, progress=new_progress), row


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps`` turns, each followed by one batched table update per learning role."""
    hp = tc.hp

    def learn(tables, step, actions, keys):
        new, errors = {}, {}
        for role in tc.learning_roles:
            kind, rows = hp.kinds[role], tc.agents_of(role)
            batch = {
                "keys": keys[role],
                "next_keys": team_keys(kind, step.final_obs[:, rows], hp.table_size),
                "action": actions[:, rows],
                "reward": step.reward[:, rows],
                "terminal": step.agent_terminal[:, rows].astype(jnp.float32),
                "valid": step.valid[:, rows].astype(jnp.float32),
            }
            new[role], errors[f"td_error/{role}"] = td_update(
                kind, tables[role], batch, hp, tc.env.num_actions
            )
        return new, errors

    return epsilon_greedy_update(tc, runner, params, functools.partial(act, tc), learn)


train = loop.trainer(init, update, "the tabular learners")


def policy_state(runner: RunnerState) -> dict:
    """role -> Q table."""
    return dict(runner.tables)


def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Greedy (epsilon 0) actions int32[E, A] for the learning roles (0 for the others)."""
    actions, _ = act(tc, policy, key, obs, jnp.float32(0.0))
    return actions


Hyperparams = TabularHyperparams  # iql, cql and mixed register subclasses
STOCHASTIC = False
