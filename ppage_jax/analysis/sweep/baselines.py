"""The sweep's baseline rows: fixed policies on the same held-out layouts as every run, so
each arm's task metric stands beside what no learning and a scripted expert score.

When exactly one role learns, its baselines play against the other role's configured
policy (``experiment.roles``): random and greedy BFS-chase predators, or random and greedy
BFS-evade prey, as the ``random``/``chase`` and ``prey_random``/``prey_evade`` rows of
``ppage-jax run``'s evaluation (:mod:`ppage_jax.train.run.evaluate`). When both roles learn there
is no fixed opponent to play the baselines against, and no rows are written. The rows use
the base config's reward (the reward does not change what a fixed policy does) and the
sweep's evaluation step limit. ``baselines.csv``: ``policy, metric, value`` rows of
:func:`~ppage_jax.analysis.sweep.metrics.run_metrics`'s task metrics.
"""

from __future__ import annotations

import csv
from pathlib import Path

import jax
import numpy as np

from ppage_jax.analysis.sweep.metrics import EPISODE_METRICS
from ppage_jax.analysis.sweep.writer import cell, csv_text, float_value
from ppage_jax.artifacts import write_text
from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams

BASELINES_FILE = "baselines.csv"
HEADER = ("policy", "metric", "value")


def baseline_rows(
    config, env: GridWorld, params: EnvParams, seed: int, episodes: int, max_steps: int | None
) -> list[tuple[str, str, float]]:
    """``(policy, metric, value)`` rows of each baseline on the held-out block
    ``[seed, seed + episodes)`` (empty unless exactly one role learns)."""
    from ppage_jax.episodes.summary import summarize_episodes
    from ppage_jax.train.run.evaluate import ROWS, describe, evaluate_episodes, step_limit
    from ppage_jax.train.run.experiment import make_train_config

    tc = make_train_config(config, env)
    if tc.learns("predator") == tc.learns("prey"):
        return []
    names = ("random", "chase") if tc.learns("predator") else ("prey_random", "prey_evade")
    which = {name: ROWS[name] for name in names}
    played = evaluate_episodes(tc, {}, params, seed, episodes, max_steps, which)
    horizon = step_limit(tc, params, max_steps)
    rows = []
    for name, pair in which.items():
        label = describe(tc, "predator", pair[0]) + " vs " + describe(tc, "prey", pair[1])
        episodes_of = jax.tree.map(lambda a: np.asarray(a)[0], played[name])
        summary = summarize_episodes(episodes_of, env, horizon=horizon, reps=0)
        rows += [(label, metric, float(summary[metric])) for metric in EPISODE_METRICS]
    return rows


def write_baselines(directory: str | Path, rows: list[tuple[str, str, float]]) -> Path:
    """``directory/baselines.csv`` (atomically; NaN as an empty cell)."""
    path = Path(directory) / BASELINES_FILE
    write_text(path, csv_text(HEADER, [(p, m, cell(v)) for p, m, v in rows]))
    return path


def read_baselines(path: str | Path) -> dict[str, dict[str, float]]:
    """baselines.csv -> ``{policy: {metric: value}}`` (empty when the file is absent)."""
    path = Path(path)
    if not path.is_file():
        return {}
    table: dict[str, dict[str, float]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            table.setdefault(row["policy"], {})[row["metric"]] = float_value(row["value"])
    return table
