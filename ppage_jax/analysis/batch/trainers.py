"""The default train and evaluation functions of a sweep, from the config's experiment section.

A sweep runs ``train_fn(key, params) -> (runner_state, metrics)`` and then
``eval_fn(runner_state, params) -> per-episode arrays`` for every (arm, seed); any pair of
functions with this contract can be swept (:func:`ppage_jax.analysis.sweep.run.run_sweep`).
With ``sweep.checkpoints`` the default ``train_fn`` also plays the checkpoint block between
equal segments of the training and returns those episodes as ``metrics["checkpoints"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from ppage_jax.analysis.batch.spec import SweepSpec
from ppage_jax.env import GridWorld
from ppage_jax.episodes.play import episode_keys, play_episodes
from ppage_jax.state import EnvParams

# train_fn(key, params) -> (runner_state, metrics: dict of per-update arrays [U, ...]); a
# sweep whose arms set training hyperparameters calls train_fn(key, params, hyperparams).
TrainFn = Callable[..., tuple[Any, dict]]
# eval_fn(runner_state, params) -> per-episode arrays (ppage_jax.episodes.play_episodes)
EvalFn = Callable[[Any, EnvParams], dict]
# What a checkpoint of the evaluation curve keeps of its episodes (metrics["checkpoints"]:
# [checkpoints, episodes] arrays).
CHECKPOINT_FIELDS = ("terminated", "truncated", "episode_length", "captures")


def trainer_functions(spec: SweepSpec, env: GridWorld) -> tuple[TrainFn, EvalFn, int]:
    """``(train_fn, eval_fn, env_steps_per_update)`` from the config's experiment section:
    ``ppage_jax.train``'s algorithm, then :func:`ppage_jax.episodes.play_episodes` on the
    sweep's held-out block with the trained policy's greedy or sampled actions
    (``eval.policy``); a role that does not learn plays its baseline. The config's
    ``experiment.curriculum`` schedules every arm's params alike (a scheduled leaf overrides
    the arm's value). ``train_fn``'s optional third argument, the arm's traced
    hyperparameters (``{name: float32}``), replaces the config's values."""
    from ppage_jax.train.kit.loop import train_loop, train_segments
    from ppage_jax.train.registry import algorithm
    from ppage_jax.train.run.curriculum import config_curriculum
    from ppage_jax.train.run.evaluate import matchup_policy
    from ppage_jax.train.run.experiment import make_train_config

    tc = make_train_config(spec.config, env)
    module = algorithm(tc.algorithm)
    keys = episode_keys(spec.eval_seed, spec.eval_episodes)
    curriculum = config_curriculum(spec.config)
    points = spec.checkpoints

    def play(runner: Any, params: EnvParams, episode_keys: jax.Array) -> dict:
        policy = matchup_policy(
            tc, module.policy_state(runner), params, spec.eval_policy, spec.eval_policy
        )
        return play_episodes(env, policy, episode_keys, params, spec.eval_max_steps)

    def train_fn(key: jax.Array, params: EnvParams, hyperparams: dict | None = None):
        if points is not None:  # an evaluation curve: the policy scored between segments
            block = episode_keys(points.seed, points.episodes)

            def check(runner: Any) -> dict:
                played = play(runner, params, block)
                return {k: played[k] for k in CHECKPOINT_FIELDS}

            runner, metrics, checks = train_segments(
                module.init,
                module.update,
                key,
                tc,
                params,
                points.count,
                check,
                curriculum,
                hyperparams,
            )
            return runner, dict(metrics, checkpoints=checks)
        if curriculum is None and not hyperparams:
            return module.train(key, tc, params)
        return train_loop(module.init, module.update, key, tc, params, curriculum, hyperparams)

    def eval_fn(runner: Any, params: EnvParams) -> dict:
        return play(runner, params, keys)

    return train_fn, eval_fn, tc.env_steps_per_update
