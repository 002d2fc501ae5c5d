"""Greedy evaluation on a held-out seed block, beside the random baseline.

Episode ``j`` of an evaluation starts from the layout drawn with ``PRNGKey(eval.seed + j)``
and runs until it terminates or reaches the step cap (``eval.max_steps``, else the env's
``max_steps``); nothing auto-resets. Every policy compared is evaluated on the same episodes.

Reported per comparison: ``capture_rate`` (episodes ended by capture within the step cap),
``steps_to_capture`` (mean turns of those episodes), ``episode_length`` (mean turns, the
uncaptured ones counting the cap) and ``returns`` (mean per-term return per agent, per role).
"""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.state import EnvParams, State
from ppage_jax.train import common
from ppage_jax.train.common import LEARN, ROLES, TrainConfig
from ppage_jax.train.experiment import algorithm

# Batched actor: (key, obs float32[E, A, F], batched state) -> int32[E, A].
Actor = Callable[[jax.Array, jax.Array, State], jax.Array]

# What each role plays in a comparison: "trained" (the learned policy's greedy actions, or
# the role's configured baseline when it does not learn), "sampled" (actions sampled from a
# stochastic learned policy, IPPO's) or a baseline name ("random", "noop", "chase", "evade").
# name -> (predators, prey)
COMPARISONS = {
    "trained": ("trained", "trained"),
    "sampled_predators": ("sampled", "trained"),
    "random_predators": ("random", "trained"),
    "random_prey": ("trained", "random"),
}
LABELS = {"trained": "trained", "sampled_predators": "sampled predators",
          "random_predators": "random predators", "random_prey": "random prey"}


def eval_params(params: EnvParams, max_steps: int | None) -> EnvParams:
    """``params`` with the evaluation's step cap (None keeps the env's)."""
    if max_steps is None:
        return params
    return params.replace(max_steps=jnp.asarray(max_steps, jnp.int32))


def episode_keys(seed: int, episodes: int) -> jax.Array:
    """The held-out block: one key per episode, ``PRNGKey(seed + j)``."""
    return jax.vmap(jax.random.PRNGKey)(jnp.arange(seed, seed + episodes))


def run_episodes(tc: TrainConfig, actor: Actor, params: EnvParams, keys: jax.Array
                 ) -> dict[str, jax.Array]:
    """Play one episode per key to its end (no auto-reset). Pure and jittable.

    Returns per episode: ``captured`` bool[N] (terminated within the cap), ``length``
    int32[N], ``returns`` float32[N, A, T].
    """
    env = tc.env
    reset_keys = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, params)
    n = keys.shape[0]
    carry = {
        "obs": obs, "state": state, "t": jnp.zeros((), jnp.int32),
        "done": jnp.zeros(n, bool), "captured": jnp.zeros(n, bool),
        "length": jnp.zeros(n, jnp.int32),
        "returns": jnp.zeros((n, env.num_agents, len(env.reward_terms)), jnp.float32),
    }

    def cond(c):
        return ~c["done"].all()

    def body(c):
        step_key = jax.random.fold_in(keys[0], c["t"] + 1)
        actions = actor(step_key, c["obs"], c["state"])
        obs, state, _, term, trunc, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.vmap(lambda k: jax.random.fold_in(k, c["t"] + 1))(keys), c["state"], actions,
            params)
        live = ~c["done"]
        return {
            "obs": obs, "state": state, "t": c["t"] + 1,
            "done": c["done"] | term | trunc,
            "captured": c["captured"] | (live & term),
            "length": c["length"] + live,
            "returns": c["returns"] + jnp.where(live[:, None, None], info["reward_terms"], 0.0),
        }

    out = jax.lax.while_loop(cond, body, carry)
    return {"captured": out["captured"], "length": out["length"], "returns": out["returns"]}


def make_actor(tc: TrainConfig, policy: dict, params: EnvParams, predators: str = "trained",
               prey: str = "trained") -> Actor:
    """The batched actor for one comparison: each role plays ``"trained"``, ``"sampled"`` or a
    baseline name (``"random"``, ``"noop"``, ``"chase"`` for predators, ``"evade"`` for prey)."""
    switch = make_switch_actor(tc, policy, params, ((predators,), (prey,)))
    return lambda key, obs, state: switch(key, obs, state, jnp.zeros(2, jnp.int32))


def make_switch_actor(tc: TrainConfig, policy: dict, params: EnvParams,
                      options: tuple[tuple[str, ...], tuple[str, ...]]):
    """An actor ``(key, obs, state, choice int32[2]) -> actions`` where role ``i`` plays
    ``options[i][choice[i]]``: one compiled program serves every comparison."""
    module = algorithm(tc.algorithm)

    def act(key: jax.Array, obs: jax.Array, state: State, choice: jax.Array) -> jax.Array:
        learned = {"trained": lambda: module.greedy_actions(tc, policy,
                                                            jax.random.fold_in(key, 7), obs),
                   "sampled": lambda: module.sample_actions(tc, policy,
                                                            jax.random.fold_in(key, 8), obs)}
        actions = jnp.zeros(obs.shape[:2], jnp.int32)
        for i, role in enumerate(ROLES):
            rows = tc.agents_of(role)
            if len(rows) == 0:
                continue
            candidates = []
            for name in options[i]:
                if name in learned and tc.roles[i] == LEARN:
                    candidates.append(learned[name]())
                    continue
                baseline = tc.roles[i] if name in learned else name
                candidates.append(common.role_policy_actions(
                    tc, role, baseline, jax.random.fold_in(key, i), obs, state, params,
                    jnp.zeros_like(actions)))
            picked = jnp.stack(candidates)[choice[i]]
            actions = actions.at[:, rows].set(picked[:, rows])
        return actions

    return act


def summarize(tc: TrainConfig, episodes: dict) -> dict[str, float]:
    """Host-side means of :func:`run_episodes` output (any leading axes are pooled)."""
    captured = np.asarray(episodes["captured"]).reshape(-1)
    length = np.asarray(episodes["length"]).reshape(-1)
    returns = np.asarray(episodes["returns"])
    returns = returns.reshape((-1,) + returns.shape[-2:])
    is_pred = np.asarray(tc.env.is_predator, bool)
    out = {
        "episodes": int(captured.size),
        "capture_rate": float(captured.mean()),
        "steps_to_capture": float(length[captured].mean()) if captured.any() else float("nan"),
        "episode_length": float(length.mean()),
    }
    for role, rows in zip(ROLES, (is_pred, ~is_pred)):
        if rows.any():
            per_term = returns[:, rows, :].mean(axis=(0, 1))
            for name, value in zip(tc.env.reward_terms, per_term):
                out[f"return/{role}/{name}"] = float(value)
            out[f"return/{role}/total"] = float(per_term.sum())
    return out


def comparisons(tc: TrainConfig) -> dict[str, tuple[str, str]]:
    """The comparisons worth making for this run: trained predators vs sampled (stochastic
    policies only) and random predators, and vs random prey when the prey learn."""
    names = ["trained"]
    if tc.learns("predator"):
        if hasattr(algorithm(tc.algorithm), "sample_actions"):
            names.append("sampled_predators")
        names.append("random_predators")
    if tc.learns("prey"):
        names.append("random_prey")
    return {name: COMPARISONS[name] for name in names}


def evaluate(tc: TrainConfig, policies: dict, params: EnvParams, seed: int, episodes: int,
             max_steps: int | None = None, which: dict | None = None) -> dict[str, dict]:
    """Evaluate trained policies, stacked on a leading seed axis (``policy_state`` of a
    vmapped ``train``), in each comparison on the held-out block ``[seed, seed + episodes)``.

    ``which`` maps a comparison name to (predators, prey) choices (default: :func:`comparisons`).
    Every comparison runs through one compiled program (cached per ``tc``, choices and
    block). Returns ``{comparison: summary}``: seeds pooled, plus ``per_seed`` (a list of
    summaries).
    """
    which = comparisons(tc) if which is None else which
    options = tuple(tuple(dict.fromkeys(pair[i] for pair in which.values())) for i in range(2))
    run = _compiled(tc, options, seed, episodes, max_steps, bool(jax.tree.leaves(policies)))
    results: dict[str, dict] = {}
    for name, pair in which.items():
        choice = jnp.asarray([options[i].index(pair[i]) for i in range(2)], jnp.int32)
        out = jax.device_get(run(policies, params, choice))
        results[name] = summarize(tc, out)
        results[name]["per_seed"] = [summarize(tc, jax.tree.map(lambda a: a[i], out))
                                     for i in range(np.asarray(out["captured"]).shape[0])]
    return results


@functools.lru_cache(maxsize=32)
def _compiled(tc: TrainConfig, options: tuple, seed: int, episodes: int,
              max_steps: int | None, stacked: bool):
    """jit of ``(policies, params, choice) -> per-episode results [seeds, episodes]``."""
    keys = episode_keys(seed, episodes)

    def play(policy, params, choice):
        params = eval_params(params, max_steps)
        act = make_switch_actor(tc, policy, params, options)
        return run_episodes(tc, lambda k, o, s: act(k, o, s, choice), params, keys)

    if stacked:
        return jax.jit(jax.vmap(play, in_axes=(0, None, None)))
    # nothing learned (algorithm random): one "seed"
    return jax.jit(lambda policy, params, choice: jax.tree.map(
        lambda a: a[None], play(policy, params, choice)))
