"""What every training algorithm shares: the static TrainConfig, stepping the batch of grids
with auto-reset and episode statistics, the per-agent masks, fixed-role baseline policies,
PPAGE's epsilon schedule, and the update loop that turns ``init`` + ``update`` into a pure
``train(key, config, params)``.

Conventions used by every algorithm file:

- Agents are rows (predators first). A *role* is ``"predator"`` or ``"prey"``; each role is
  either learned by the algorithm or played by a fixed baseline policy
  (``experiment.roles``).
- A transition of agent ``i`` at step ``t`` is *valid* when the agent was not a captured prey
  before the step. Invalid transitions are masked out of every loss and table update (PPAGE
  keeps updating captured prey; we do not). The step on which a prey is captured is valid and
  is terminal for that prey (``agent_terminal``), so nothing after its capture flows back.
- ``terminated`` cuts the bootstrap; ``truncated`` does not: the bootstrap value is computed on
  ``info["final_obs"]``, the last observation of the finished episode.
- Grids step through the fast batched auto-reset (:class:`BatchedAutoResetEnv`) and their
  batch axis is split across the local devices (:func:`shard_envs`, ``jax.sharding``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax import lax

from ppage_jax.env import GridWorld
from ppage_jax.episodes.stats import EpisodeStats, episode_stats_init, episode_stats_update
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams, State
from ppage_jax.sharding import batch_sharding, make_mesh
from ppage_jax.wrappers import BatchedAutoResetEnv

ROLES = ("predator", "prey")
# experiment.roles keys (PPAGE's plural config names) in ROLES order.
ROLE_KEYS = ("predators", "preys")
LEARN = "learn"


# --------------------------------------------------------------------------- static config
@struct.dataclass
class TrainConfig:
    """Everything static about a training run. It has no array leaves, so ``jit`` and
    ``vmap`` treat it as a constant (``in_axes=None``) and a new one recompiles.

    Build it with :func:`ppage_jax.train.make_train_config` from a validated Config.
    """

    env: GridWorld = struct.field(pytree_node=False)
    algorithm: str = struct.field(pytree_node=False)
    hp: Any = struct.field(pytree_node=False)          # the algorithm's Hyperparams
    num_envs: int = struct.field(pytree_node=False)
    num_updates: int = struct.field(pytree_node=False)
    episodes: int | None = struct.field(pytree_node=False)  # stop after this many episodes
    roles: tuple[str, str] = struct.field(pytree_node=False)  # per ROLES: "learn" or baseline
    config_hash: str = struct.field(pytree_node=False)      # Config.hash(): every section
    policy_hash: str = struct.field(pytree_node=False)      # what the trained policy depends on

    @property
    def steps_per_update(self) -> int:
        """Turns each grid takes per update (the rollout length)."""
        return self.hp.num_steps

    @property
    def env_steps_per_update(self) -> int:
        return self.num_envs * self.hp.num_steps

    def agents_of(self, role: str) -> np.ndarray:
        """int indices of the agent rows of ``role``."""
        is_pred = np.asarray(self.env.is_predator, bool)
        return np.flatnonzero(is_pred if role == "predator" else ~is_pred)

    def learns(self, role: str) -> bool:
        """True when the algorithm trains ``role`` (and the role has agents)."""
        return self.roles[ROLES.index(role)] == LEARN and len(self.agents_of(role)) > 0

    @property
    def learning_roles(self) -> tuple[str, ...]:
        return tuple(r for r in ROLES if self.learns(r))


# --------------------------------------------------------------------------- baselines
def baseline_policies(role: str) -> dict[str, Callable[..., Policy]]:
    """Fixed policies ``role`` may play instead of learning (``experiment.roles``):
    factories ``f(env, params) -> Policy`` from :mod:`ppage_jax.policies`."""
    from ppage_jax import policies

    return dict(policies.PREDATOR_POLICIES if role == "predator" else policies.PREY_POLICIES)


def role_policy_actions(tc: TrainConfig, role: str, name: str, key: jax.Array, obs: jax.Array,
                        state: State, params: EnvParams, actions: jax.Array) -> jax.Array:
    """Set the actions of ``role``'s rows in int32[E, A] ``actions`` from baseline ``name``."""
    rows = tc.agents_of(role)
    if len(rows) == 0:
        return actions
    policy = baseline_policies(role)[name](tc.env, params)
    fixed = jax.vmap(policy)(jax.random.split(key, obs.shape[0]), obs, state)
    return actions.at[:, rows].set(fixed[:, rows].astype(jnp.int32))


def fixed_role_actions(tc: TrainConfig, key: jax.Array, obs: jax.Array, state: State,
                       params: EnvParams, actions: jax.Array) -> jax.Array:
    """Replace the actions of the fixed (non-learning) roles by their baseline policy.

    ``obs`` float32[E, A, F], ``state`` batched, ``actions`` int32[E, A] -> int32[E, A].
    """
    for i, (role, name) in enumerate(zip(ROLES, tc.roles)):
        if name != LEARN:
            actions = role_policy_actions(tc, role, name, jax.random.fold_in(key, i), obs,
                                          state, params, actions)
    return actions


# --------------------------------------------------------------------------- env stepping
@struct.dataclass
class EnvCarry:
    """The batch of grids between steps: observations, states and running episode stats."""

    obs: jax.Array          # float32[E, A, F]
    state: State            # batched over E
    stats: EpisodeStats     # batched over E


@struct.dataclass
class Step:
    """What one batched env step tells a learner (E grids, A agents)."""

    reward: jax.Array          # float32[E, A]
    valid: jax.Array           # bool[E, A]: not a captured prey before the step
    agent_terminal: jax.Array  # bool[E, A]: terminated, or this prey was captured
    episode_end: jax.Array     # bool[E]: terminated | truncated (the grid was reset)
    final_obs: jax.Array       # float32[E, A, F]: obs after the step, before any reset
    next_obs: jax.Array        # float32[E, A, F]: obs to act on next (reset where ended)
    finished: dict             # episode_stats_update's `finished`, per grid


def _auto_reset(tc: TrainConfig) -> BatchedAutoResetEnv:
    return BatchedAutoResetEnv(tc.env, tc.num_envs)


def shard_envs(tree: Any) -> Any:
    """Split the leading (grid) axis of every leaf across the local devices inside a jitted
    program (``jax.sharding``; the helper's mesh). A no-op on one device, or when the batch
    does not divide evenly by the device count."""
    n_dev = jax.local_device_count()
    leaves = jax.tree.leaves(tree)
    if n_dev == 1 or any(np.ndim(x) == 0 or np.shape(x)[0] % n_dev for x in leaves):
        return tree
    sharding = batch_sharding(make_mesh(devices=jax.local_devices()))
    return jax.lax.with_sharding_constraint(tree, sharding)


def env_reset(tc: TrainConfig, key: jax.Array, params: EnvParams) -> EnvCarry:
    """Reset ``tc.num_envs`` grids."""
    obs, state = _auto_reset(tc).reset(key, params)
    return shard_envs(EnvCarry(obs, state, episode_stats_init(tc.env, (tc.num_envs,))))


def env_step(tc: TrainConfig, key: jax.Array, carry: EnvCarry, actions: jax.Array,
             params: EnvParams, gamma: jax.Array | float) -> tuple[EnvCarry, Step]:
    """Step every grid with the batched auto-reset; return the new carry and the learner's
    view of the step."""
    was_captured = carry.state.captured
    obs, state, reward, terminated, truncated, info = _auto_reset(tc).step(
        key, carry.state, actions, params)
    stats, finished = episode_stats_update(carry.stats, info, terminated, truncated, gamma)
    is_prey = ~jnp.asarray(tc.env.is_predator)
    step = Step(
        reward=reward,
        valid=~was_captured,
        agent_terminal=terminated[:, None] | (info["captured"] & is_prey),
        episode_end=terminated | truncated,
        final_obs=info["final_obs"],
        next_obs=obs,
        finished=finished,
    )
    return shard_envs(EnvCarry(obs, state, stats)), step


# --------------------------------------------------------------------------- metrics
@struct.dataclass
class Progress:
    """Counters every runner state carries (per seed)."""

    env_steps: jax.Array   # int32: turns taken over all grids
    episodes: jax.Array    # int32: episodes finished over all grids
    updates: jax.Array     # int32: updates done


def progress_init() -> Progress:
    zero = jnp.zeros((), jnp.int32)
    return Progress(zero, zero, zero)


def episode_metrics(tc: TrainConfig, finished: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Reduce a rollout's stacked ``finished`` dicts ([T, E, ...]) to one metrics row.

    ``capture_rate`` is the fraction of finished episodes that ended by capture (terminated)
    within the step limit; ``steps_to_capture`` the mean length of those episodes;
    ``returns`` float32[2, T] the mean per-term return per agent of each role (rows in
    ROLES order; NaN for a role without agents). Means over no episodes are NaN.
    """
    done = finished["done"]
    captured = finished["terminated"] & done
    n_done = done.sum()
    n_captured = captured.sum()

    def mean(total, count):
        return jnp.where(count > 0, total / jnp.maximum(count, 1), jnp.nan)

    is_pred = np.asarray(tc.env.is_predator, bool)
    returns = []
    for rows in (is_pred, ~is_pred):
        if rows.any():
            per_episode = finished["returns"][..., rows, :].mean(axis=-2)  # [T, E, terms]
            returns.append(mean(per_episode.sum(axis=(0, 1)), n_done))
        else:
            returns.append(jnp.full(len(tc.env.reward_terms), jnp.nan))
    return {
        "episodes": n_done.astype(jnp.int32),
        "capture_rate": mean(n_captured.astype(jnp.float32), n_done),
        "episode_length": mean(finished["length"].sum().astype(jnp.float32), n_done),
        "steps_to_capture": mean(jnp.where(captured, finished["length"], 0).sum()
                                 .astype(jnp.float32), n_captured),
        "returns": jnp.stack(returns),
    }


def advance(progress: Progress, tc: TrainConfig, row: dict) -> Progress:
    return Progress(env_steps=progress.env_steps + tc.env_steps_per_update,
                    episodes=progress.episodes + row["episodes"],
                    updates=progress.updates + 1)


# --------------------------------------------------------------------------- masks, eps
def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of ``x`` over the entries where ``mask`` is set (0 when none is)."""
    mask = mask.astype(x.dtype)
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def ppage_epsilon(hp: Any, episodes: jax.Array) -> jax.Array:
    """PPAGE's schedule: ``max(min_epsilon, epsilon * epsilon_decay ** episodes)``, decaying
    once per finished episode. ``episodes`` counts the episodes finished by all grids of the
    run, so the schedule is the same per episode of experience as in PPAGE's single env."""
    decayed = hp.epsilon * jnp.power(jnp.float32(hp.epsilon_decay),
                                     episodes.astype(jnp.float32))
    return jnp.maximum(jnp.float32(hp.min_epsilon), decayed)


def epsilon_greedy(key: jax.Array, q: jax.Array, epsilon: jax.Array) -> jax.Array:
    """Per row of ``q`` (float[..., nA]): a uniform action with probability epsilon, else the
    argmax (ties to the lowest index, as PPAGE's np.argmax)."""
    k_explore, k_action = jax.random.split(key)
    explore = jax.random.uniform(k_explore, q.shape[:-1]) < epsilon
    random = jax.random.randint(k_action, q.shape[:-1], 0, q.shape[-1])
    return jnp.where(explore, random, jnp.argmax(q, axis=-1)).astype(jnp.int32)


def obs_scale(tc: TrainConfig) -> float:
    """The factor networks apply to observations: ``hp.obs_scale``, or by default 1 / grid
    size (coordinates and distances) and 1 for the spatial ``grid`` observation (counts)."""
    if tc.hp.obs_scale is not None:
        return tc.hp.obs_scale
    return 1.0 if tc.env.observation_shape is not None else 1.0 / tc.env.layout.size


def agent_one_hot(n: int) -> jax.Array:
    """float32[n, n]: the agent-id feature appended to each agent's observation in its role."""
    return jnp.eye(n, dtype=jnp.float32)


def with_agent_id(obs: jax.Array) -> jax.Array:
    """Append the one-hot agent id (within the role) to float[..., n, F] -> [..., n, F + n]."""
    n = obs.shape[-2]
    ids = jnp.broadcast_to(agent_one_hot(n), obs.shape[:-2] + (n, n))
    return jnp.concatenate([obs, ids], axis=-1)


def role_input(tc: TrainConfig, role: str, obs: jax.Array) -> jax.Array:
    """A role's network input: obs float[..., A, F] -> [..., n_role, F + n_role] (scaled
    observations of the role's agents with a one-hot agent id)."""
    return with_agent_id(obs[..., tc.agents_of(role), :] * obs_scale(tc))


# --------------------------------------------------------------------------- the loop
InitFn = Callable[[jax.Array, TrainConfig, EnvParams], Any]
UpdateFn = Callable[[Any, TrainConfig, EnvParams], tuple[Any, dict]]


def run_updates(update: UpdateFn, runner: Any, tc: TrainConfig, params: EnvParams,
                num_updates: int) -> tuple[Any, dict]:
    """``num_updates`` updates in a ``lax.scan``; metrics stacked per update.

    With an episode budget (``tc.episodes``) an update whose run has already finished that
    many episodes is skipped: the runner passes through unchanged and its metrics row has
    ``active = False`` (and NaN/zero values)."""
    def one(runner, _):
        if tc.episodes is None:
            runner, row = update(runner, tc, params)
            return runner, dict(row, active=jnp.bool_(True))

        def skip(runner):
            shapes = jax.eval_shape(lambda r: update(r, tc, params)[1], runner)
            blank = jax.tree.map(
                lambda s: jnp.full(s.shape, jnp.nan, s.dtype)
                if jnp.issubdtype(s.dtype, jnp.floating) else jnp.zeros(s.shape, s.dtype),
                shapes)
            return runner, blank

        active = runner.progress.episodes < tc.episodes
        runner, row = lax.cond(active, lambda r: update(r, tc, params), skip, runner)
        return runner, dict(row, active=active)

    return lax.scan(one, runner, None, length=num_updates)


def train_loop(init: InitFn, update: UpdateFn, key: jax.Array, tc: TrainConfig,
               params: EnvParams) -> tuple[Any, dict]:
    """The whole run as one pure function: ``init`` then ``tc.num_updates`` updates."""
    runner = init(key, tc, params)
    return run_updates(update, runner, tc, params, tc.num_updates)


def num_updates_for(total_timesteps: int | None, episodes: int | None, num_envs: int,
                    num_steps: int, max_steps: int | None) -> int:
    """Static update count: ``total_timesteps // (num_envs * num_steps)`` (at least 1), or,
    with an episode budget, enough updates for ``episodes`` episodes of ``max_steps`` turns
    (the loop stops early once the budget is reached)."""
    per_update = num_envs * num_steps
    if total_timesteps is not None:
        return max(1, total_timesteps // per_update)
    assert episodes is not None and max_steps is not None
    return max(1, math.ceil(episodes * max_steps / per_update))
