"""Strategies compared at an equal budget: finished search directories of the same scenario
(same search file but the strategy, so the same generations x population x seeds and the
same re-evaluation seeds and layouts) side by side.

Per search: its best feasible search score after each generation, and its selected design's
re-evaluated RMST and capture rate (IQM over seeds, 95 % CI). Between each pair: P(the
first's selected design captures sooner than the second's), paired over the shared
re-evaluation layouts, with its 95 % CI. :func:`compare_searches` returns the Markdown and
writes ``compare.png`` (best feasible score against generation) into ``out_dir``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ppage_jax.analysis.search.report import BOOTSTRAP_REPS, SELECTED, load_candidates
from ppage_jax.analysis.search.writer import DESCRIPTION, REEVAL, read_csv
from ppage_jax.artifacts import save_figure
from ppage_jax.stats import bootstrap as stats


def _selected_times(directory: Path) -> np.ndarray:
    """float[seeds, layouts]: the selected design's turns to capture (censored)."""
    runs: dict[int, dict[int, int]] = {}
    for row in read_csv(directory / REEVAL / "episodes.csv"):
        if row["arm"] == SELECTED:
            runs.setdefault(int(row["seed"]), {})[int(row["episode"])] = int(row["length"])
    return np.array([[t[e] for e in sorted(t)] for _, t in sorted(runs.items())], float)


def _selected_metric(directory: Path, metric: str) -> np.ndarray:
    return np.array(
        [
            float(row["value"])
            for row in read_csv(directory / REEVAL / "results.csv")
            if row["arm"] == SELECTED and row["metric"] == metric
        ]
    )


def best_so_far(directory: Path, direction: int) -> list[float]:
    """The best feasible search score after each generation (NaN until one is feasible)."""
    cands = load_candidates(directory)
    out, best = [], math.nan
    for g in sorted({c["generation"] for c in cands}):
        for c in cands:
            if c["generation"] == g and c["feasible"] and math.isfinite(c["metric"]):
                if math.isnan(best) or direction * (c["metric"] - best) > 0:
                    best = c["metric"]
        out.append(best)
    return out


def compare_searches(searches: Mapping[str, str | Path], out_dir: str | Path) -> str:
    """Markdown comparing finished searches ``{label: directory}`` (see the module
    docstring); ValueError when they did not share the budget and re-evaluation block."""
    dirs = {name: Path(d) for name, d in searches.items()}
    described = {n: json.loads((d / DESCRIPTION).read_text()) for n, d in dirs.items()}
    shared = ("population", "seeds", "generations", "reevaluate", "config_hash", "space", "metric")
    first = next(iter(described.values()))
    for name, desc in described.items():
        for key in shared:
            if desc[key] != first[key]:
                raise ValueError(f"search {name} differs in {key}: not an equal-budget comparison")
    direction = -1 if first["metric"] != "capture_rate" else 1
    lines = [
        f"Equal budget: {first['generations']} generations x {first['population']} "
        f"candidates x {first['seeds']} seeds each; the selected designs re-evaluated on the "
        f"same {first['reevaluate']['seeds']} fresh seeds and "
        f"{first['reevaluate']['episodes']} fresh layouts.",
        "",
        f"| strategy | best feasible {first['metric']} per generation (search score) | "
        "re-evaluated RMST [95 % CI] | re-evaluated capture rate [95 % CI] |",
        "|---|---|---|---|",
    ]
    curves = {}
    for name, d in dirs.items():
        curves[name] = best_so_far(d, direction)
        rmst = stats.bootstrap_ci(_selected_metric(d, "rmst"), "iqm", reps=BOOTSTRAP_REPS)
        rate = stats.bootstrap_ci(_selected_metric(d, "capture_rate"), "iqm", reps=BOOTSTRAP_REPS)
        trail = ", ".join(f"{v:.3g}" for v in curves[name])
        lines.append(f"| {name} | {trail} | {rmst} | {rate} |")
    names = list(dirs)
    lines += ["", "| selected design of | vs selected design of | P(improvement) [95 % CI] |"]
    lines.append("|---|---|---|")
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            poi = stats.probability_of_improvement_ci(
                -_selected_times(dirs[a]),
                -_selected_times(dirs[b]),
                reps=BOOTSTRAP_REPS,
                joint=True,
            )
            lines.append(f"| {a} | {b} | {poi} |")
    lines.append("")
    lines.append(
        "P(improvement): probability that a run of the first captures sooner than a run of "
        "the second on the same layout (censored at the step limit; ties count half), "
        "averaged over layouts."
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for name, curve in curves.items():
        ax.plot(range(len(curve)), curve, "-o", label=name)
    ax.set_xlabel("generation")
    ax.set_ylabel(f"best feasible {first['metric']} so far")
    ax.set_xticks(range(first["generations"]))
    ax.legend()
    fig.tight_layout()
    save_figure(fig, Path(out_dir) / "compare.png", dpi=110)
    plt.close(fig)
    return "\n".join(lines) + "\n"
