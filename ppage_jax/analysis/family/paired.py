"""The declared family of a sweep, tested on its files: paired differences by seed, exact
sign-flip p-values, Holm's correction, BCa CIs and effect sizes in the task's units.

Everything here is recomputed from a sweep directory's ``results.csv``, ``baselines.csv``
and (for ``auc``) ``curves.csv``, and from the analysis sweep.json records, so the numbers of
a shipped study can be checked from its files alone:

- :func:`seed_tables`: per endpoint, ``{arm label: {seed: value}}``; the normalised score
  from each seed's RMST and the random and chase baselines of its own directory (a
  scenario's, in a sweep with ``scenarios``);
- :func:`family_results`: each declared comparison's paired differences over the seeds every
  arm of it has: mean with a BCa 95 % CI (in the endpoint's units and, for the score, in
  turns of RMST), the exact two-sided sign-flip p, the Holm-adjusted p over the whole
  family, the standardised effect ``dz`` (mean over SD), and P(improvement) as the share of
  paired seeds on which the first arm is better (ties half) with its Wilson CI;
- :func:`arm_summaries`: per arm the IQM score with its stratified-bootstrap CI and
  P(take-off), the share of seeds whose score reached ``take_off``, with its Wilson CI;
- :func:`power_line`: the power of the family's first Holm step at the seeds it has.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.analysis.batch.metrics import CHECKPOINT_PREFIX
from ppage_jax.analysis.batch.output import csv_text
from ppage_jax.analysis.family.declare import AnalysisSpec, Comparison
from ppage_jax.analysis.family.endpoints import ENDPOINTS, normalised, score_scale
from ppage_jax.analysis.sweep.baselines import (
    BASELINES_FILE,
    CHECKPOINT_BLOCK,
    EVAL_BLOCK,
    baseline_levels,
)
from ppage_jax.analysis.sweep.writer import curves_path, read_curves, read_results
from ppage_jax.artifacts import write_text
from ppage_jax.stats import bootstrap as boot
from ppage_jax.stats.paired import bca_ci, holm, paired_power, sign_flip_p, wilson_ci

COMPARISONS_FILE = "comparisons.csv"
# The RMST table (turns) an endpoint's difference is also given in: the final RMST for the
# score, the mean RMST over the checkpoints for the area under the evaluation curve.
TURNS_OF = {"score": "rmst", "rmst": "rmst", "auc": "auc_rmst"}
# Standardised paired effects the power statement is given for (Cohen's medium and large).
POWER_EFFECTS = (0.5, 0.8)
Table = dict[str, dict[int, float]]  # arm label -> seed -> value


def sweep_dirs(directory: Path) -> list[tuple[str, Path]]:
    """``(label prefix, directory)`` of each sweep directory below ``directory``: itself,
    or its scenarios' (``scenario/``) for a sweep with ``scenarios``."""
    info = json.loads((directory / "sweep.json").read_text())
    if "scenarios" in info and isinstance(info["scenarios"], dict):
        return [(f"{name}/", directory / name) for name in info["scenarios"]]
    return [("", directory)]


def seed_tables(directory: str | Path, endpoints: tuple[str, ...]) -> dict[str, Table]:
    """``{endpoint: {arm label: {seed: value}}}`` for ``endpoints`` and ``rmst`` (always,
    for the effect in turns) from a sweep directory (see the module docstring)."""
    wanted = ("rmst", *endpoints, *(("auc_rmst",) if "auc" in endpoints else ()))
    out: dict[str, Table] = {name: {} for name in dict.fromkeys(wanted)}
    for prefix, path in sweep_dirs(Path(directory)):
        results = read_results(path / "results.csv")
        for name in out:
            if name == "score":
                scale = score_scale(baseline_levels(path / BASELINES_FILE, EVAL_BLOCK))
                for arm, seeds in results.get("rmst", {}).items():
                    out[name][prefix + arm] = {
                        s: float(normalised(v, scale)) for s, v in seeds.items()
                    }
            elif name in ("auc", "auc_rmst"):  # the evaluation curve's mean score, or RMST
                curve = read_curves(curves_path(path)).get(CHECKPOINT_PREFIX + "rmst", {})
                scale = None
                if name == "auc":
                    scale = score_scale(baseline_levels(path / BASELINES_FILE, CHECKPOINT_BLOCK))
                for arm, seeds in curve.items():
                    out[name][prefix + arm] = {
                        s: float(np.mean(_scored(list(points.values()), scale)))
                        for s, points in seeds.items()
                    }
            else:
                for arm, seeds in results.get(name, {}).items():
                    out[name][prefix + arm] = dict(seeds)
    return out


def _scored(rmst: list[float], scale: tuple[float, float] | None) -> np.ndarray:
    """RMSTs as they are (no ``scale``) or normalised between ``scale``."""
    return np.asarray(rmst, np.float64) if scale is None else normalised(rmst, scale)


def scales(directory: str | Path) -> dict[str, tuple[float, float]]:
    """Each label prefix's ``(random, chase)`` RMSTs of the held-out block (none where the
    baselines leave no headroom)."""
    out = {}
    for prefix, path in sweep_dirs(Path(directory)):
        try:
            out[prefix] = score_scale(baseline_levels(path / BASELINES_FILE, EVAL_BLOCK))
        except ValueError:
            continue
    return out


@dataclasses.dataclass(frozen=True)
class Tested:
    """One comparison of the family, tested."""

    comparison: Comparison
    n: int  # paired seeds
    difference: boot.Interval  # mean paired difference, endpoint units, BCa 95 % CI
    turns: boot.Interval | None  # the same difference in turns of RMST
    p: float  # exact two-sided sign-flip p
    p_holm: float  # Holm-adjusted over the family
    better: boot.Interval  # share of paired seeds on which the first arm is better, Wilson
    dz: float  # mean / SD of the paired differences

    def row(self) -> tuple:
        turns = self.turns or boot.Interval(math.nan, math.nan, math.nan)
        return (
            self.comparison.name,
            self.comparison.endpoint,
            self.n,
            self.difference.point,
            self.difference.low,
            self.difference.high,
            turns.point,
            turns.low,
            turns.high,
            self.p,
            self.p_holm,
            self.better.point,
            self.better.low,
            self.better.high,
            self.dz,
        )


HEADER = (
    "comparison",
    "endpoint",
    "seeds",
    "difference",
    "difference_low",
    "difference_high",
    "turns",
    "turns_low",
    "turns_high",
    "p",
    "p_holm",
    "p_better",
    "p_better_low",
    "p_better_high",
    "dz",
)


def paired_differences(comparison: Comparison, table: Table) -> tuple[list[int], np.ndarray]:
    """The seeds every arm of ``comparison`` has (sorted) and its signed sum on each."""
    seeds = sorted(set.intersection(*(set(table.get(label, {})) for label in comparison.labels)))
    diffs = [sum(sign * table[label][s] for label, sign in comparison.terms) for s in seeds]
    return seeds, np.asarray(diffs, np.float64)


def family_results(analysis: AnalysisSpec, tables: dict[str, Table]) -> list[Tested]:
    """Every declared comparison tested (see the module docstring), Holm over all of them."""
    partial = []
    for comparison in analysis.comparisons:
        seeds, diffs = paired_differences(comparison, tables[comparison.endpoint])
        if not seeds:
            continue
        finite = np.isfinite(diffs)
        diffs = diffs[finite]
        if not diffs.size:
            continue
        higher = ENDPOINTS[comparison.endpoint][1]
        signed = diffs if higher else -diffs
        turns = None
        in_units = TURNS_OF.get(comparison.endpoint)
        if in_units is not None:
            _, in_turns = paired_differences(comparison, tables[in_units])
            in_turns = in_turns[np.isfinite(in_turns)]
            turns = bca_ci(in_turns) if in_turns.size else None
        wins = float((signed > 0).sum() + 0.5 * (signed == 0).sum())
        sd = float(diffs.std(ddof=1)) if diffs.size > 1 else math.nan
        dz = float(diffs.mean() / sd) if sd and math.isfinite(sd) and sd > 0 else math.nan
        partial.append(
            (comparison, diffs, turns, sign_flip_p(diffs), wilson_ci(wins, diffs.size), dz)
        )
    adjusted = holm([p[3] for p in partial]) if partial else []
    return [
        Tested(c, int(d.size), bca_ci(d), t, p, float(a), w, dz)
        for (c, d, t, p, w, dz), a in zip(partial, adjusted, strict=True)
    ]


def arm_summaries(tables: dict[str, Table], take_off: float) -> dict[str, dict[str, Any]]:
    """Per arm label with a score: ``n``, ``score`` (IQM with a stratified-bootstrap 95 %
    CI), ``mean_score``, ``take_off`` (Wilson CI of the share of seeds with a score of at
    least ``take_off``) and ``rmst`` (IQM with CI)."""
    out = {}
    for label, seeds in tables.get("score", {}).items():
        values = np.asarray([v for v in seeds.values() if math.isfinite(v)], np.float64)
        if not values.size:
            continue
        rmst = np.asarray([v for v in tables["rmst"].get(label, {}).values()], np.float64)
        rmst = rmst[np.isfinite(rmst)]
        out[label] = {
            "n": int(values.size),
            "score": boot.bootstrap_ci(values, "iqm", reps=2000),
            "mean_score": float(values.mean()),
            "take_off": wilson_ci(float((values >= take_off).sum()), int(values.size)),
            "rmst": boot.bootstrap_ci(rmst, "iqm", reps=2000) if rmst.size else None,
        }
    return out


def power_line(tested: list[Tested], alpha: float) -> str:
    """The power of the family's first Holm step (level ``alpha / m``) at the smallest
    number of paired seeds, for :data:`POWER_EFFECTS`."""
    if not tested:
        return ""
    n = min(t.n for t in tested)
    level = alpha / len(tested)
    parts = [f"dz = {dz:g}: {paired_power(n, dz, level):.2f}" for dz in POWER_EFFECTS]
    return (
        f"Power of the family's first Holm step (two-sided, level {alpha:g}/{len(tested)} = "
        f"{level:.3g}) with {n} paired seeds, by the standardised paired effect dz (mean "
        f"difference over its SD; noncentral t): " + ", ".join(parts) + "."
    )


def write_comparisons(directory: str | Path, tested: list[Tested]) -> Path:
    """``directory/comparisons.csv`` (atomically): one row per tested comparison."""
    path = Path(directory) / COMPARISONS_FILE
    write_text(path, csv_text(HEADER, [tuple(_cell(v) for v in t.row()) for t in tested]))
    return path


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return value
