"""Shared setup of the training tests: a tiny task every algorithm must learn.

Two speed-1 predators start at (0, 0) and (1, 0) on an empty 5x5 grid; the prey starts at
(3, 4) with stamina 0, so it can never move (while still being a learning agent). The nearest
predator needs 6 turns; an episode is cut at 20. Observations are ``local_only`` (own x, y,
captured flag), enough for a fixed start. Untrained greedy policies wander or stand still
(zero Q-tables pick action 0, "right", forever) and never capture within 20 turns.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np

import ppage_jax as pj
from ppage_jax.episodes import episode_keys, play_episodes
from ppage_jax.train import algorithm, make_train_config
from ppage_jax.train.kit.loop import train_loop
from ppage_jax.train.kit.traced import traced_values
from ppage_jax.train.run.evaluate import matchup_policy

OPTIMAL_STEPS = 6
MAX_STEPS = 20
# The losses of the actor-critic learners, per role.
ACTOR_CRITIC_LOSSES = ("actor_loss", "value_loss", "entropy")


def tiny_config(algo: str, params: dict | None = None, total_timesteps: int = 20_000, **overrides):
    """The tiny task's Config for ``algo`` with hyperparameters ``params``."""
    base = {
        "env.size": 5,
        "env.obstacle_percentage": 0.0,
        "env.termination.capture_threshold": 1,
        "env.termination.max_steps": MAX_STEPS,
        "env.starts": [[0, 0], [1, 0], [3, 4]],
        "agents.predators": {"count": 2, "speed": 1, "stamina": None},
        "agents.preys": {"count": 1, "speed": 1, "stamina": 0},
        "observations.type": "local_only",
        "observations.params": {},
        "experiment.algorithm": {"name": algo, "params": dict(params or {})},
        "experiment.num_envs": 16,
        "experiment.total_timesteps": total_timesteps,
        "experiment.eval": {"episodes": 4, "seed": 1000, "max_steps": None},
    }
    base.update(overrides)
    return pj.load_config(None, base)


def traced_train(tc):
    """``tc``'s training jitted once (a second trace fails) with its traced hyperparameters
    as an argument: ``run(key, hyper)``, and ``run.with_values(**values)`` (key 0, the other
    values as configured)."""
    module = algorithm(tc.algorithm)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(key, hyper):
        return train_loop(module.init, module.update, key, tc, tc.env.default_params, None, hyper)

    def with_values(**values):
        chosen = {name: jnp.float32(value) for name, value in values.items()}
        return run(jax.random.PRNGKey(0), dict(traced_values(tc.hp), **chosen))

    run.with_values = with_values
    return run


def seeds(n: int = 2) -> jax.Array:
    return jax.vmap(jax.random.PRNGKey)(jnp.arange(n))


def train_seeds(tc, n: int = 2, params=None, keys=None):
    """``jit(vmap(train))`` over ``n`` seeds (or the PRNG ``keys``): (runner_state, metrics),
    leading seed axis. ``params`` (default: the env's) is traced: new values reuse the
    compiled program."""
    params = tc.env.default_params if params is None else params
    return vmapped_train(tc.algorithm)(seeds(n) if keys is None else keys, tc, params)


def assert_seeds_kept_apart(tc, metrics, rtol: float = 1e-6) -> None:
    """The two-seed run ``metrics`` of :func:`train_seeds`, trained again with its seeds in
    the other order (the same compiled program), gives each seed's metrics unchanged: vmap
    keeps the seeds apart (and the two seeds did train differently)."""
    length = np.asarray(metrics["episode_length"])
    assert not np.allclose(length[0], length[1], equal_nan=True)
    _, swapped = train_seeds(tc, keys=seeds(2)[::-1])
    for key in ("capture_rate", "episode_length", "episodes", "returns"):
        np.testing.assert_allclose(swapped[key][::-1], metrics[key], rtol=rtol, err_msg=key)
    for name, values in swapped["losses"].items():
        np.testing.assert_allclose(
            values[::-1], metrics["losses"][name], rtol=rtol, atol=1e-6, err_msg=name
        )


def assert_matches_separate_run(
    tc, metrics, first: int | None = None, rtol: float = 1e-5, loss_rtol: float = 1e-3
) -> None:
    """Seed 1 of the vmapped run ``metrics`` equals a separate ``jit(train)`` of seed 1 over
    its ``first`` updates (default: all). The two programs batch their matrix products
    differently, so float rounding differs in the last bits, and once a sampled action flips
    the runs part."""
    train = algorithm(tc.algorithm).train
    _, single = jax.jit(train)(jax.random.PRNGKey(1), tc, tc.env.default_params)
    head = slice(0, first)
    for key in ("capture_rate", "episode_length", "episodes", "returns"):
        np.testing.assert_allclose(single[key][head], metrics[key][1, head], rtol=rtol)
    for name, values in single["losses"].items():
        np.testing.assert_allclose(
            values[head], metrics["losses"][name][1, head], rtol=loss_rtol, atol=1e-6
        )


@functools.cache
def vmapped_train(name: str):
    return jax.jit(jax.vmap(algorithm(name).train, in_axes=(0, None, None)))


def greedy_lengths(tc, policies) -> tuple[jax.Array, jax.Array]:
    """Per seed (leading axis of ``policies``): mean episode length and capture rate of the
    greedy policy on 4 evaluation episodes."""
    return _greedy_evaluator(tc)(policies)


@functools.cache
def _greedy_evaluator(tc):
    params = tc.env.default_params
    keys = episode_keys(1000, 4)

    def one(policy):
        greedy = matchup_policy(tc, policy, params, "greedy", "greedy")
        out = play_episodes(tc.env, greedy, keys, params)
        return out["episode_length"].astype(jnp.float32).mean(), out["captured"].astype(
            jnp.float32
        ).mean()

    return jax.jit(jax.vmap(one))


def loss_names(losses, roles=("predator", "prey")) -> set[str]:
    """``{"<loss>/<role>"}`` of every loss and role."""
    return {f"{loss}/{role}" for loss in losses for role in roles}


def assert_learned(
    tc,
    policies,
    metrics,
    losses: set[str] | None = None,
    optimal: int = OPTIMAL_STEPS,
    slack: int = 0,
) -> None:
    """A two-seed run of the tiny task learned it: its losses are exactly ``losses`` (when
    given) and finite, the untrained greedy policy never captures within ``MAX_STEPS``
    turns, and the trained greedy ``policies`` capture every evaluation episode in
    ``optimal`` turns (at most ``optimal + slack``)."""
    if losses is not None:
        assert set(metrics["losses"]) == losses
    for name, values in metrics["losses"].items():
        assert np.isfinite(np.asarray(values)).all(), name
    before_len, before_cap = greedy_lengths(tc, untrained_policies(tc))
    after_len, after_cap = greedy_lengths(tc, policies)
    np.testing.assert_array_equal(before_cap, [0.0, 0.0])  # untrained: never within 20
    np.testing.assert_array_equal(before_len, [MAX_STEPS, MAX_STEPS])
    np.testing.assert_array_equal(after_cap, [1.0, 1.0])  # trained: every episode
    if slack:
        assert (np.asarray(after_len) <= optimal + slack).all(), after_len
    else:
        np.testing.assert_array_equal(after_len, [optimal, optimal])  # the shortest path


def untrained_policies(tc, n: int = 2):
    module = algorithm(tc.algorithm)
    params = tc.env.default_params
    return jax.jit(jax.vmap(lambda k: module.policy_state(module.init(k, tc, params))))(seeds(n))


def stall_rows(capture, closeness, episodes=40, n=160) -> list[dict]:
    """Updates of one seed with ``episodes`` finished each: capture rate ``capture(u)``,
    the base return its captures (10 each), a closeness payment ``closeness(u)``."""
    return [
        {
            "seed": 0,
            "update": u,
            "env_steps": 2048 * u,
            "active": True,
            "episodes": episodes,
            "capture_rate": capture(u),
            "steps_to_capture": 60.0,
            "episode_length": 150.0,
            "return/predator/base": 10.0 * capture(u),
            "return/predator/predator_distance": closeness(u),
        }
        for u in range(1, n + 1)
    ]


__all__ = [
    "stall_rows",
    "ACTOR_CRITIC_LOSSES",
    "MAX_STEPS",
    "OPTIMAL_STEPS",
    "assert_learned",
    "assert_matches_separate_run",
    "assert_seeds_kept_apart",
    "greedy_lengths",
    "loss_names",
    "make_train_config",
    "seeds",
    "tiny_config",
    "train_seeds",
    "untrained_policies",
]
