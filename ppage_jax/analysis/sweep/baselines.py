"""The sweep's baseline rows: fixed policies on the same held-out layouts as every run, so
each arm's task metric stands beside what no learning and a scripted expert score.

When exactly one role learns, its baselines play against the other role's configured
policy (``experiment.roles``): random and greedy BFS-chase predators, or random and greedy
BFS-evade prey, as the ``random``/``chase`` and ``prey_random``/``prey_evade`` rows of
``ppage-jax run``'s evaluation (:mod:`ppage_jax.train.run.evaluate`). When both roles learn there
is no fixed opponent to play the baselines against, and no rows are written. The rows use
the base config's reward (the reward does not change what a fixed policy does) and the
sweep's evaluation step limit.

``baselines.csv``: ``block, baseline, policy, metric, value`` rows of
:func:`~ppage_jax.analysis.batch.metrics.run_metrics`'s task metrics: ``block`` is ``eval``
(the held-out block every run is scored on) or ``checkpoints`` (the fresh block of the
evaluation curve, ``sweep.checkpoints``), ``baseline`` the row's name (``random``,
``chase``, ``prey_random``, ``prey_evade``) and ``policy`` its label. The normalised score
(:mod:`ppage_jax.analysis.family.endpoints`) reads the ``random`` and ``chase`` rows of a
block.
"""

from __future__ import annotations

import csv
from pathlib import Path

import jax
import numpy as np

from ppage_jax.analysis.batch.metrics import EPISODE_METRICS
from ppage_jax.analysis.batch.output import cell, csv_text, float_value
from ppage_jax.artifacts import write_text
from ppage_jax.env import GridWorld
from ppage_jax.state import EnvParams

BASELINES_FILE = "baselines.csv"
HEADER = ("block", "baseline", "policy", "metric", "value")
EVAL_BLOCK, CHECKPOINT_BLOCK = "eval", "checkpoints"
# (block, baseline, policy label, metric, value)
BaselineRow = tuple[str, str, str, str, float]


def baseline_rows(
    config,
    env: GridWorld,
    params: EnvParams,
    seed: int,
    episodes: int,
    max_steps: int | None,
    block: str = EVAL_BLOCK,
) -> list[BaselineRow]:
    """The rows of each baseline on the held-out block ``[seed, seed + episodes)`` (empty
    unless exactly one role learns), labelled ``block``."""
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
        rows += [(block, name, label, metric, float(summary[metric])) for metric in EPISODE_METRICS]
    return rows


def write_baselines(directory: str | Path, rows: list[BaselineRow]) -> Path:
    """``directory/baselines.csv`` (atomically; NaN as an empty cell)."""
    path = Path(directory) / BASELINES_FILE
    write_text(path, csv_text(HEADER, [(*r[:4], cell(r[4])) for r in rows]))
    return path


def _rows(path: str | Path) -> list[dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def read_baselines(path: str | Path, block: str = EVAL_BLOCK) -> dict[str, dict[str, float]]:
    """baselines.csv -> ``{policy label: {metric: value}}`` of one block (empty when the
    file is absent)."""
    table: dict[str, dict[str, float]] = {}
    for row in _rows(path):
        if row.get("block", EVAL_BLOCK) == block:
            table.setdefault(row["policy"], {})[row["metric"]] = float_value(row["value"])
    return table


def baseline_levels(path: str | Path, block: str = EVAL_BLOCK) -> dict[str, dict[str, float]]:
    """baselines.csv -> ``{baseline name: {metric: value}}`` of one block (``random``,
    ``chase``, ...; empty when the file is absent)."""
    table: dict[str, dict[str, float]] = {}
    for row in _rows(path):
        if row.get("block", EVAL_BLOCK) == block and row.get("baseline"):
            table.setdefault(row["baseline"], {})[row["metric"]] = float_value(row["value"])
    return table
