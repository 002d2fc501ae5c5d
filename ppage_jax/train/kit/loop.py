"""Progress counters, per-update episode metrics and the update loop that turns an
algorithm's ``init`` + ``update`` into a pure ``train(key, config, params)``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit.schedules import Curriculum, apply_schedules
from ppage_jax.train.kit.traced import TracedHyperparams, bind
from ppage_jax.types import Replaceable, pytree_dataclass


@pytree_dataclass
class Progress(Replaceable):
    """Counters every runner state carries (per seed)."""

    env_steps: jax.Array  # int32: turns taken over all grids
    episodes: jax.Array  # int32: episodes finished over all grids
    updates: jax.Array  # int32: updates done


def progress_init() -> Progress:
    zero = jnp.zeros((), jnp.int32)
    return Progress(zero, zero, zero)


def episode_metrics(tc: TrainConfig, finished: Mapping[str, jax.Array]) -> dict[str, Any]:
    """Reduce a rollout's stacked ``finished`` dicts ([T, E, ...]) to one metrics row.

    ``capture_rate`` is the fraction of finished episodes that ended by capture (terminated)
    within the step limit; ``steps_to_capture`` the mean length of those episodes;
    ``captures`` the mean number of prey captured per finished episode; ``hover_share`` the
    share of their turns that hovered (a predator near uncaptured prey, no capture:
    :func:`ppage_jax.episodes.stats.hovering`);
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
        "steps_to_capture": mean(
            jnp.where(captured, finished["length"], 0).sum().astype(jnp.float32), n_captured
        ),
        "captures": mean(finished["captures"].sum().astype(jnp.float32), n_done),
        "hover_share": mean(
            finished["hover"].sum().astype(jnp.float32),
            finished["length"].sum().astype(jnp.float32),
        ),
        "returns": jnp.stack(returns),
    }


def advance(progress: Progress, tc: TrainConfig, row: dict) -> Progress:
    """The counters after one update that produced metrics ``row``."""
    return Progress(
        env_steps=progress.env_steps + tc.env_steps_per_update,
        episodes=progress.episodes + row["episodes"],
        updates=progress.updates + 1,
    )


InitFn = Callable[[jax.Array, TrainConfig, EnvParams], Any]
UpdateFn = Callable[[Any, TrainConfig, EnvParams], tuple[Any, dict]]


def with_extras(row: dict, extras: dict) -> dict:
    """``row`` with ``extras`` merged into its ``extras`` dict (scalar columns)."""
    if not extras:
        return row
    return dict(row, extras={**row.get("extras", {}), **extras})


def run_updates(
    update: UpdateFn,
    runner: Any,
    tc: TrainConfig,
    params: EnvParams,
    num_updates: int,
    curriculum: Curriculum | None = None,
    hyperparams: TracedHyperparams | None = None,
) -> tuple[Any, dict]:
    """``num_updates`` updates in a ``lax.scan``; metrics stacked per update.

    With an episode budget (``tc.episodes``) an update whose run has already finished that
    many episodes is skipped: the runner passes through unchanged and its metrics row has
    ``active = False`` (and NaN/zero values). With a ``curriculum`` each update uses the
    params and hyperparameters scheduled for the env steps taken so far, logged as
    ``extras`` columns. ``hyperparams`` (traced, :mod:`ppage_jax.train.kit.traced`) replace
    the values of ``tc.hp`` they name."""

    def one(runner, _):
        now, hyper, scheduled = apply_schedules(
            curriculum, params, hyperparams, runner.progress.env_steps
        )
        runner, row = one_update(runner, bind(tc, hyper), now)
        return runner, with_extras(row, scheduled)

    def one_update(runner, tc, params):
        if tc.episodes is None:
            runner, row = update(runner, tc, params)
            return runner, dict(row, active=jnp.bool_(True))

        def skip(runner):
            shapes = jax.eval_shape(lambda r: update(r, tc, params)[1], runner)
            blank = jax.tree.map(
                lambda s: (
                    jnp.full(s.shape, jnp.nan, s.dtype)
                    if jnp.issubdtype(s.dtype, jnp.floating)
                    else jnp.zeros(s.shape, s.dtype)
                ),
                shapes,
            )
            return runner, blank

        active = runner.progress.episodes < tc.episodes
        runner, row = lax.cond(active, lambda r: update(r, tc, params), skip, runner)
        return runner, dict(row, active=active)

    return lax.scan(one, runner, None, length=num_updates)


def train_loop(
    init: InitFn,
    update: UpdateFn,
    key: jax.Array,
    tc: TrainConfig,
    params: EnvParams,
    curriculum: Curriculum | None = None,
    hyperparams: TracedHyperparams | None = None,
) -> tuple[Any, dict]:
    """The whole run as one pure function: ``init`` then ``tc.num_updates`` updates (under
    ``curriculum``'s schedules when given; ``init`` sees the params and hyperparameters of
    step 0), with the traced ``hyperparams`` in place of ``tc.hp``'s values they name."""
    now, hyper, _ = apply_schedules(curriculum, params, hyperparams, jnp.int32(0))
    runner = init(key, bind(tc, hyper), now)
    return run_updates(update, runner, tc, params, tc.num_updates, curriculum, hyperparams)


def train_segments(
    init: InitFn,
    update: UpdateFn,
    key: jax.Array,
    tc: TrainConfig,
    params: EnvParams,
    segments: int,
    between: Callable[[Any], Any],
    curriculum: Curriculum | None = None,
    hyperparams: TracedHyperparams | None = None,
) -> tuple[Any, dict, Any]:
    """:func:`train_loop` in ``segments`` equal parts (``tc.num_updates`` must divide by
    it), calling ``between(runner)`` after each: ``(runner, metrics, checks)`` with the
    metrics stacked per update as :func:`train_loop` gives them and ``between``'s outputs
    stacked per segment (an evaluation curve: the policy scored at evenly spaced points of
    its training). The runner passes through ``between`` unchanged, so the run is the same
    as without it."""
    if segments < 1 or tc.num_updates % segments:
        raise ValueError(f"{tc.num_updates} updates do not split into {segments} equal segments")
    now, hyper, _ = apply_schedules(curriculum, params, hyperparams, jnp.int32(0))
    runner = init(key, bind(tc, hyper), now)
    per = tc.num_updates // segments

    def segment(runner, _):
        runner, metrics = run_updates(update, runner, tc, params, per, curriculum, hyperparams)
        return runner, (metrics, between(runner))

    runner, (metrics, checks) = lax.scan(segment, runner, None, length=segments)
    metrics = jax.tree.map(lambda a: a.reshape((segments * per,) + a.shape[2:]), metrics)
    return runner, metrics, checks


def trainer(init: InitFn, update: UpdateFn, what: str) -> Callable[..., tuple[Any, dict]]:
    """An algorithm module's ``train(key, config, params, hyperparams=None)``: its ``init``
    and ``update`` through :func:`train_loop` (``what`` names it in the docstring)."""

    def train(
        key: jax.Array,
        config: TrainConfig,
        params: EnvParams,
        hyperparams: TracedHyperparams | None = None,
    ) -> tuple[Any, dict]:
        return train_loop(init, update, key, config, params, hyperparams=hyperparams)

    train.__doc__ = (
        f"Train {what}: pure, jittable, vmappable over ``key``, ``params`` and the traced "
        f"``hyperparams`` (``{{name: float32}}``, :mod:`ppage_jax.train.kit.traced`)."
    )
    return train
