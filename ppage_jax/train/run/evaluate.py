"""Held-out evaluation of trained policies beside baselines, with censored time to capture.

Episode ``j`` of an evaluation starts from the layout of ``PRNGKey(eval.seed + j)`` and runs
until capture or the step limit (``eval.max_steps``, else the env's ``max_steps``); nothing
auto-resets (:func:`ppage_jax.episodes.play_episodes`). Every row plays the same episodes.

Rows (``ROWS``; name -> what the predators and the prey play):

- ``trained``: both roles play the trained policy as it acts: sampled for a stochastic
  policy (IPPO), greedy (argmax) otherwise; a role that does not learn plays its configured
  baseline. The primary row.
- ``trained_greedy`` (stochastic policies only): both learning roles take the argmax action.
- ``random``, ``chase``: uniformly random / greedy BFS-chase predators against the same prey
  as ``trained`` (when the predators learn).
- ``prey_random``, ``prey_evade``: uniformly random / greedy BFS-evade prey against the same
  predators as ``trained`` (when the prey learn).

Each row is summarised by :func:`ppage_jax.episodes.summarize_episodes` (``capture_rate``,
``km_median``, ``rmst`` with bootstrap CIs, ``truncated_share``, ``episode_length``,
``steps_to_capture``, returns), seeds pooled, plus ``per_seed`` summaries without CIs.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax.episodes import episode_keys, play_episodes, summarize_episodes
from ppage_jax.policies import PREDATOR_POLICIES, PREY_POLICIES, Policy
from ppage_jax.state import EnvParams
from ppage_jax.stats.survival import BOOTSTRAP_REPS
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit.roles import LEARN, ROLES, FrozenPolicy
from ppage_jax.train.protocol import acting_one
from ppage_jax.train.registry import algorithm

# name -> (predators, prey). A side plays "trained" (the policy as it acts), "greedy",
# "sampled" (stochastic policies) or a baseline name ("random", "noop", "chase" for
# predators, "evade" for prey).
ROWS: dict[str, tuple[str, str]] = {
    "trained": ("trained", "trained"),
    "trained_greedy": ("greedy", "greedy"),
    "random": ("random", "trained"),
    "chase": ("chase", "trained"),
    "prey_random": ("trained", "random"),
    "prey_evade": ("trained", "evade"),
}
LEARNED_MODES = ("trained", "greedy", "sampled")
BASELINE_LABELS = {
    "random": "random",
    "noop": "no-op",
    "chase": "greedy BFS chase",
    "intercept": "intercept chase",
    "evade": "greedy BFS evade",
}


# Episodes the untrained matchup plays to measure the monitor's starting point.
UNTRAINED_EPISODES = 128


def is_stochastic(module: Any) -> bool:
    """Whether an algorithm's trained policy samples its actions (IPPO): its declared
    ``STOCHASTIC`` capability (:class:`ppage_jax.train.protocol.Algorithm`)."""
    return bool(module.STOCHASTIC)


def resolve(tc: TrainConfig, role: str, mode: str) -> str:
    """What ``role`` really plays for ``mode``: ``"greedy"``, ``"sampled"`` or a baseline
    name (a role that does not learn plays its configured baseline for a learned mode)."""
    if mode not in LEARNED_MODES:
        table = PREDATOR_POLICIES if role == "predator" else PREY_POLICIES
        if mode not in table:
            raise ValueError(
                f"{role}s cannot play {mode!r}: choose one of {list(LEARNED_MODES) + list(table)}"
            )
        return mode
    if not tc.learns(role):
        configured = tc.roles[ROLES.index(role)]
        return "noop" if configured == LEARN else configured
    stochastic = is_stochastic(algorithm(tc.algorithm))
    if mode == "trained":
        return "sampled" if stochastic else "greedy"
    if mode == "sampled" and not stochastic:
        raise ValueError(f"{tc.algorithm} has no stochastic policy to sample; use 'greedy'")
    return mode


def describe(tc: TrainConfig, role: str, mode: str) -> str:
    """A label for a table heading: ``"trained (sampled)"``, ``"greedy BFS chase"``,
    ``"random (configured)"``, ..."""
    what = resolve(tc, role, mode)
    if what in ("greedy", "sampled"):
        return f"trained ({what})"
    label = BASELINE_LABELS.get(what, what)
    return f"{label} (configured)" if mode in LEARNED_MODES else label


def _role_policy(tc: TrainConfig, policy: Any, params: EnvParams, role: str, what: str) -> Policy:
    """One grid's actions (int32[A]; only ``role``'s rows matter) for a resolved mode."""
    if what in ("greedy", "sampled"):
        act = acting_one(algorithm(tc.algorithm), what == "greedy")
        return functools.partial(act, tc, policy)
    if isinstance(what, FrozenPolicy):  # a role played by another run's policy
        return what.policy(tc.env, params)
    table = PREDATOR_POLICIES if role == "predator" else PREY_POLICIES
    return table[what](tc.env, params)


def switch_policy(
    tc: TrainConfig,
    policy: Any,
    params: EnvParams,
    options: tuple[tuple[str, ...], tuple[str, ...]],
    choice: jax.Array,
) -> Policy:
    """A policy where each role ``i`` plays ``options[i][choice[i]]`` (modes as in ``ROWS``;
    ``choice`` int32[2] may be traced, so one compiled program serves every row)."""
    is_predator = jnp.asarray(tc.env.is_predator)
    branches = [
        [_role_policy(tc, policy, params, role, resolve(tc, role, mode)) for mode in options[i]]
        for i, role in enumerate(ROLES)
    ]

    def act(key, obs, state):
        k_pred, k_prey = jax.random.split(key)
        pred = lax.switch(choice[0], branches[0], k_pred, obs, state)
        prey = lax.switch(choice[1], branches[1], k_prey, obs, state)
        return jnp.where(is_predator, pred, prey).astype(jnp.int32)

    return act


def matchup_policy(
    tc: TrainConfig,
    policy: Any,
    params: EnvParams,
    predators: str = "trained",
    prey: str = "trained",
) -> Policy:
    """One grid's policy ``(key, obs[A, F], state) -> int32[A]`` with each role playing a
    mode of ``ROWS`` (``policy`` is one seed's ``policy_state``)."""
    return switch_policy(tc, policy, params, ((predators,), (prey,)), jnp.zeros(2, jnp.int32))


def rows_for(tc: TrainConfig) -> dict[str, tuple[str, str]]:
    """The rows worth evaluating for this run (see the module docstring)."""
    names = ["trained"]
    if tc.learning_roles and is_stochastic(algorithm(tc.algorithm)):
        names.append("trained_greedy")
    if tc.learns("predator"):
        names += ["random", "chase"]
    if tc.learns("prey"):
        names += ["prey_random", "prey_evade"]
    return {name: ROWS[name] for name in names}


def untrained_pair(tc: TrainConfig) -> tuple[str, str]:
    """The matchup of an untrained run: every learning role plays uniformly random actions
    (what a freshly initialised policy, near-uniform logits or epsilon 1, plays); the other
    roles play their configured baselines."""
    predator, prey = ("random" if tc.learns(role) else "trained" for role in ROLES)
    return predator, prey


def untrained_levels(
    tc: TrainConfig, params: EnvParams, seed: int, episodes: int = UNTRAINED_EPISODES
) -> dict[str, float]:
    """The task metrics and per-term returns (``capture_rate``, ``episode_length``,
    ``steps_to_capture``, ``return/<role>/<term>``, ...; :func:`summarize_episodes`) of the
    untrained matchup (:func:`untrained_pair`) over the held-out block
    ``[seed, seed + episodes)``, whole episodes to the env's step limit: the reward-hacking
    monitor's starting point."""
    which = {"untrained": untrained_pair(tc)}
    played = evaluate_episodes(tc, {}, params, seed, episodes, None, which)["untrained"]
    summary = summarize_episodes(played, tc.env, horizon=step_limit(tc, params, None), reps=0)
    return {k: float(v) for k, v in summary.items() if isinstance(v, (int, float))}


def step_limit(tc: TrainConfig, params: EnvParams, max_steps: int | None) -> int:
    """The evaluation's step limit: ``max_steps``, else the env's."""
    return int(params.max_steps) if max_steps is None else int(max_steps)


def evaluate_episodes(
    tc: TrainConfig,
    policies: Any,
    params: EnvParams,
    seed: int,
    episodes: int,
    max_steps: int | None = None,
    which: dict[str, tuple[str, str]] | None = None,
) -> dict[str, dict]:
    """Play every row of ``which`` (default :func:`rows_for`) on the held-out block
    ``[seed, seed + episodes)`` with the policies stacked on a leading seed axis
    (``policy_state`` of a vmapped ``train``). Returns ``{row: per-episode NumPy arrays
    [seeds, episodes, ...]}`` (:data:`ppage_jax.episodes.EPISODE_FIELDS`)."""
    which = rows_for(tc) if which is None else which
    options = tuple(tuple(dict.fromkeys(pair[i] for pair in which.values())) for i in range(2))
    for i, role in enumerate(ROLES):
        for mode in options[i]:
            resolve(tc, role, mode)  # bad modes fail here, with their name
    run = _compiled(tc, options, seed, episodes, max_steps, bool(jax.tree.leaves(policies)))
    out = {}
    for name, pair in which.items():
        choice = jnp.asarray([options[i].index(pair[i]) for i in range(2)], jnp.int32)
        out[name] = jax.tree.map(np.asarray, jax.device_get(run(policies, params, choice)))
    return out


def summarize_rows(
    tc: TrainConfig, played: dict[str, dict], which: dict, horizon: int, reps: int = BOOTSTRAP_REPS
) -> dict[str, dict]:
    """Each row's summary (seeds pooled, bootstrap within seeds), its ``predators``/``prey``
    labels and ``per_seed`` summaries (no CIs)."""
    results = {}
    for name, episodes in played.items():
        seeds = episodes["captured"].shape[0]
        strata = np.broadcast_to(np.arange(seeds)[:, None], episodes["captured"].shape)
        row = summarize_episodes(episodes, tc.env, horizon=horizon, reps=reps, strata=strata)
        row["predators"] = describe(tc, "predator", which[name][0])
        row["prey"] = describe(tc, "prey", which[name][1])
        row["per_seed"] = [
            summarize_episodes(
                jax.tree.map(lambda a, i=i: a[i], episodes), tc.env, horizon=horizon, reps=0
            )
            for i in range(seeds)
        ]
        results[name] = row
    return results


def evaluate(
    tc: TrainConfig,
    policies: Any,
    params: EnvParams,
    seed: int,
    episodes: int,
    max_steps: int | None = None,
    which: dict | None = None,
    reps: int = BOOTSTRAP_REPS,
) -> dict[str, dict]:
    """Evaluate trained policies (stacked on a leading seed axis) in each row of ``which``
    (default :func:`rows_for`) on the held-out block: ``{row: summary}`` (see
    :func:`summarize_rows`). Every row runs through one compiled program (cached per ``tc``,
    rows and block)."""
    which = rows_for(tc) if which is None else which
    played = evaluate_episodes(tc, policies, params, seed, episodes, max_steps, which)
    return summarize_rows(tc, played, which, step_limit(tc, params, max_steps), reps)


@functools.lru_cache(maxsize=32)
def _compiled(
    tc: TrainConfig, options: tuple, seed: int, episodes: int, max_steps: int | None, stacked: bool
):
    """jit of ``(policies, params, choice) -> per-episode results [seeds, episodes]``."""
    keys = episode_keys(seed, episodes)

    def play(policy, params, choice):
        act = switch_policy(tc, policy, params, options, choice)
        return play_episodes(tc.env, act, keys, params, max_steps)

    if stacked:
        return jax.jit(jax.vmap(play, in_axes=(0, None, None)))
    # nothing learned (algorithm random): one "seed"
    return jax.jit(
        lambda policy, params, choice: jax.tree.map(lambda a: a[None], play(policy, params, choice))
    )
