"""What a sweep records per run: evaluation metrics of the held-out episodes (censored time
to capture included) and the rows of the per-update training curves."""

from __future__ import annotations

from typing import Any

import numpy as np

from ppage_jax.defaults import ROLES
from ppage_jax.env import GridWorld
from ppage_jax.episodes.metrics import METRICS
from ppage_jax.episodes.summary import summarize_episodes

# Evaluation metrics kept from ppage_jax.episodes.summarize_episodes (one value per run): the
# metric table's task metrics (no role's own) and the mean captures per episode.
EPISODE_METRICS = tuple(
    dict.fromkeys([*(name for name, m in METRICS.items() if m.role is None), "captures"])
)
# The evaluation curve's metrics (sweep.checkpoints), as curve rows ``checkpoint/<metric>``.
CHECKPOINT_METRICS = ("rmst", "capture_rate", "episode_length", "captures")
CHECKPOINT_PREFIX = "checkpoint/"


def run_metrics(
    env: GridWorld, episodes: dict[str, np.ndarray], horizon: float
) -> dict[str, float]:
    """Evaluation metrics of one run from :func:`ppage_jax.episodes.play_episodes` output:
    ``EPISODE_METRICS`` (time to capture censored at ``horizon``, the step limit;
    ``km_median`` is ``inf`` when under half the episodes end in a capture),
    ``base_return/<role>`` (the base term's return per agent at unit weight) and
    ``return/<role>/<term>`` (as paid) with ``return/<role>/total``."""
    summary = summarize_episodes(episodes, env, horizon=horizon, reps=0)
    out = {name: float(summary[name]) for name in EPISODE_METRICS}
    is_pred = np.asarray(env.is_predator, bool)
    terms = env.reward_terms
    unit = np.asarray(episodes["unit_returns"], np.float64)
    for role, rows in zip(ROLES, (is_pred, ~is_pred), strict=True):
        if not rows.any():
            continue
        if "base" in terms:
            out[f"base_return/{role}"] = float(unit[:, rows, terms.index("base")].mean())
        for name in (*terms, "total"):
            out[f"return/{role}/{name}"] = summary[f"return/{role}/{name}"]
    return out


def curve_rows(
    env: GridWorld, metrics: dict[str, Any], env_steps_per_update: int
) -> list[tuple[int, int, str, float]]:
    """``(update, env_steps, metric, value)`` rows of one run's per-update training metrics.

    Scalar-per-update entries keep their name (nested dicts such as ``losses`` become
    ``losses/<name>``); ``returns`` [U, 2, T] becomes ``return/<role>/<term>``. Rows of
    updates marked inactive (``active`` False) are dropped.
    """
    flat: dict[str, np.ndarray] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}/{key}" if prefix else key, value)
        else:
            flat[prefix] = np.asarray(node)

    walk("", {k: v for k, v in metrics.items() if k != "checkpoints"})
    active = flat.pop("active", None)
    returns = flat.pop("returns", None)
    updates = (
        next(iter(flat.values())).shape[0]
        if flat
        else (returns.shape[0] if returns is not None else 0)
    )
    rows = []
    for u in range(updates):
        if active is not None and not bool(active[u]):
            continue
        steps = (u + 1) * env_steps_per_update
        for name, values in flat.items():
            if values.ndim == 1:
                rows.append((u + 1, steps, name, float(values[u])))
        if returns is not None and returns.ndim == 3:
            for r, role in enumerate(ROLES):
                for t, term in enumerate(env.reward_terms):
                    rows.append((u + 1, steps, f"return/{role}/{term}", float(returns[u, r, t])))
    return rows


def checkpoint_rows(
    checks: dict[str, Any], horizon: float, updates: int, env_steps_per_update: int
) -> list[tuple[int, int, str, float]]:
    """``(update, env_steps, "checkpoint/<metric>", value)`` rows of one run's evaluation
    curve: ``checks`` holds [checkpoints, episodes] arrays (``metrics["checkpoints"]``) of a
    run of ``updates`` updates, checkpoint ``k`` taken after update ``(k + 1) * updates /
    checkpoints``; RMST censored at ``horizon``."""
    from ppage_jax.stats.survival import rmst

    terminated = np.asarray(checks["terminated"], bool)
    lengths = np.asarray(checks["episode_length"], np.float64)
    captures = np.asarray(checks["captures"], np.float64)
    count = terminated.shape[0]
    rows = []
    for k in range(count):
        update = (k + 1) * updates // count
        values = {
            "rmst": float(rmst(lengths[k], terminated[k], horizon)),
            "capture_rate": float(terminated[k].mean()),
            "episode_length": float(lengths[k].mean()),
            "captures": float(captures[k].mean()),
        }
        steps = update * env_steps_per_update
        rows += [(update, steps, CHECKPOINT_PREFIX + m, values[m]) for m in CHECKPOINT_METRICS]
    return rows
