"""The reward-hacking monitor of a sweep: :class:`ppage_jax.train.run.monitor.Monitor` (what
``ppage-jax run`` watches) run host-side over each finished run's training curve, so it
costs no compile. Each arm is watched for the checks its own reward calls for (its learning
roles and the shaping terms paid to them, from its ``EnvParams``, as
:meth:`Monitor.for_run`); an arm that pays a learning role no shaping term has no checks.

A run's result gains, per check of its arm, ``monitor/<check>/<role>[/<term>]`` (1 when
flagged, else 0) and ``monitor_first/<check>/<role>[/<term>]`` (the env step of the first
flag, NaN when none). The monitor sees only the curve, so it gives the same columns for a
run read back from a finished chunk as for one just trained.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams
from ppage_jax.train.run.monitor import PREFIX, Monitor, MonitorConfig, watch_run

FIRST = "monitor_first/"


def first_column(column: str) -> str:
    """``monitor/<check>/...`` -> ``monitor_first/<check>/...``."""
    return FIRST + column[len(PREFIX) :]


def arm_monitors(
    config: Any,
    env: GridWorld,
    arm_params: Sequence[EnvParams],
    names: Sequence[str],
    eval_seed: int,
) -> dict[str, Monitor | None]:
    """Each arm's monitor (``experiment.monitor`` of ``config``), None when the monitor is
    disabled or the arm has nothing to watch. Its start is the arm's untrained run on the
    held-out block from ``eval_seed`` (:func:`watch_run`), measured once per arm (the seeds
    of an arm share it)."""
    from ppage_jax.train.run.experiment import make_train_config

    cfg = MonitorConfig.from_experiment(config["experiment"])
    if not cfg.enabled:
        return {name: None for name in names}
    tc = make_train_config(config, env)
    out: dict[str, Monitor | None] = {}
    for name, params in zip(names, arm_params, strict=True):
        monitor = watch_run(cfg, tc, params, eval_seed)
        out[name] = monitor if monitor.columns else None
    return out


def curve_to_rows(seed: int, curve: Sequence[tuple[int, int, str, float]]) -> list[dict]:
    """A run's ``(update, env_steps, metric, value)`` curve as one row per update, in
    update order (the rows :meth:`Monitor.observe` reads)."""
    rows: dict[int, dict] = {}
    for update, env_steps, metric, value in curve:
        row = rows.setdefault(update, {"seed": seed, "update": update, "env_steps": env_steps})
        row[metric] = value
    return [rows[u] for u in sorted(rows)]


def monitor_run(
    monitor: Monitor | None, seed: int, curve: Sequence[tuple[int, int, str, float]]
) -> dict[str, float]:
    """The monitor columns of one run (empty when its arm is not watched)."""
    if monitor is None:
        return {}
    watcher = monitor.fresh()
    watcher.observe(curve_to_rows(seed, curve))
    first = {f.column: f.env_steps for f in watcher.flags}
    out: dict[str, float] = {}
    for column in watcher.columns:
        out[column] = 1.0 if column in first else 0.0
    for column in watcher.columns:
        out[first_column(column)] = float(first[column]) if column in first else math.nan
    return out


def describe_monitors(config: Any, monitors: dict[str, Monitor | None]) -> dict[str, Any]:
    """sweep.json's ``monitor``: the config's ``experiment.monitor``, the columns watched per
    arm, the longest warm-up (updates) and, per watched arm with an untrained start, where
    the checks start (``untrained``: its capture rate, episode length and each watched
    term's share of the return, ``share/<role>/<term>``), and per watched arm what rebuilds
    its monitor without the env (``arms``: :meth:`Monitor.describe`, read back by
    :meth:`Monitor.from_description`)."""
    untrained = {}
    for name, m in monitors.items():
        if m is not None and m.baseline is not None:
            levels = {k: m.baseline.get(k) for k in ("capture_rate", "episode_length")}
            shares = {
                f"share/{k}": v if math.isfinite(v) else None  # None: it paid nothing
                for k, v in m.untrained_shares().items()
            }
            untrained[name] = {**levels, **shares}
    return {
        "config": config["experiment"].get("monitor") or {},
        "watched": {n: list(m.columns) if m else [] for n, m in monitors.items()},
        "warmup_updates": max((m.warmup for m in monitors.values() if m), default=0),
        "untrained": untrained,
        "arms": {n: m.describe() for n, m in monitors.items() if m is not None},
    }
