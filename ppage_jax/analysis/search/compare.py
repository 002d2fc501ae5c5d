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

import dataclasses
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.analysis.batch.output import cell, csv_text
from ppage_jax.analysis.search.report import BOOTSTRAP_REPS
from ppage_jax.analysis.search.writer import (
    DESCRIPTION,
    REEVAL,
    SELECTED,
    load_candidates,
    read_csv,
)
from ppage_jax.artifacts import save_figure, write_text
from ppage_jax.episodes.metrics import METRICS
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
    direction = METRICS[first["metric"]].sign
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


# --------------------------------------------------------------------------- strategies compared
def permutation_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided permutation p of equal means of two independent samples: the share of
    all ``C(n_a + n_b, n_a)`` relabellings whose difference of means is at least as large in
    magnitude as the observed one (3 against 3 searches: 20 relabellings, so p >= 0.1)."""
    x = np.asarray([*a, *b], np.float64)
    n = len(a)
    if n == 0 or n == len(x):
        raise ValueError("a permutation test needs two non-empty samples")
    observed = abs(x[:n].mean() - x[n:].mean())
    tol = 1e-9 * max(1.0, float(np.abs(x).sum()))
    hits = total = 0
    for chosen in itertools.combinations(range(len(x)), n):
        mask = np.zeros(len(x), bool)
        mask[list(chosen)] = True
        hits += abs(x[mask].mean() - x[~mask].mean()) >= observed - tol
        total += 1
    return hits / total


@dataclasses.dataclass(frozen=True)
class Pick:
    """One search's pick: its strategy, search index, search score and re-evaluated metric
    per training seed."""

    strategy: str
    k: int
    name: str
    values: list[float]
    search_score: float
    reevaluated: dict[int, float]
    runs: int

    @property
    def score(self) -> float:
        """The re-evaluated score: the mean over the re-evaluation's training seeds."""
        return float(np.mean(list(self.reevaluated.values())))


def _per_seed(path: Path, arm: str, metric: str) -> dict[int, float]:
    return {
        int(row["seed"]): float(row["value"])
        for row in read_csv(path)
        if row["arm"] == arm and row["metric"] == metric
    }


def load_picks(root: Path, strategies: Sequence[str], metric: str) -> list[Pick]:
    """Every finished search's pick under ``root`` (``<strategy>/search_<k>/pick.json`` and
    its re-evaluation)."""
    picks = []
    for strategy in strategies:
        for directory in sorted((root / strategy).glob("search_*"), key=lambda p: int(p.name[7:])):
            if not (directory / "pick.json").is_file():
                continue
            pick = json.loads((directory / "pick.json").read_text())
            seeds = _per_seed(directory / REEVAL / "results.csv", SELECTED, metric)
            picks.append(
                Pick(
                    strategy,
                    int(directory.name[7:]),
                    pick["name"],
                    pick["values"],
                    float(pick["search_score"]),
                    seeds,
                    int(pick["runs"]),
                )
            )
    return picks


def _paired(pick: dict[int, float], ref: dict[int, float]) -> np.ndarray:
    seeds = sorted(set(pick) & set(ref))
    return np.asarray([pick[s] - ref[s] for s in seeds], np.float64)


def compare_strategies(root: str | Path, spec: Any, strategies: Sequence[str]) -> str:
    """``comparison.md`` and ``comparison.csv`` in ``root`` (a repeated search,
    :mod:`.repeat`): each pick's search score against its re-evaluated score (the selection
    bias), each pick against the reference arm paired by training seed, each strategy's picks
    against the reference (the per-seed mean over its searches, paired by seed), the
    declared strategy pairs (each search's re-evaluated score a unit: exact permutation p),
    the best pick by search score against the reference, Holm over that family, and which
    weights mattered from the random searches' samples. Returns the Markdown: its opening,
    then one function per section."""
    root = Path(root)
    declared = spec.compare
    reference = declared.reference if declared else spec.references[0].name
    picks = load_picks(root, strategies, spec.metric)
    if not picks:
        raise ValueError(f"{root}: no finished search to compare")
    ref = _per_seed(root / "references" / REEVAL / "results.csv", reference, spec.metric)
    lines = opening_lines(spec, strategies, picks, reference)
    section, csv_rows = pick_lines(picks, ref, reference)
    lines += section
    family = declared_family(spec, strategies, picks, ref, reference)
    section, family_rows = family_lines(spec.direction, picks, family, reference)
    lines += section + landscape_lines(root, spec, spec.metric)
    text = "\n".join(lines) + "\n"
    write_text(root / "comparison.md", text)
    write_text(
        root / "comparison.csv",
        csv_text(
            ("kind", "name", "n", "score", "difference", "low", "high", "p", "p_holm"),
            [
                tuple(cell(v) if isinstance(v, float) else v for v in row)
                for row in csv_rows + family_rows
            ],
        ),
    )
    return text


def opening_lines(
    spec: Any, strategies: Sequence[str], picks: list[Pick], reference: str
) -> list[str]:
    """The title and the searches compared: how many per strategy, their budget (equal or
    not), the re-evaluation and the reference."""
    budgets = {p.runs for p in picks}
    better = "lower" if spec.direction < 0 else "higher"
    lines = [f"# Strategies compared: {Path(spec.path).name}", ""]
    runs = budgets.pop() if len(budgets) == 1 else None
    budget = spec.config["experiment"]["total_timesteps"]
    counts = ", ".join(f"{s}: {sum(p.strategy == s for p in picks)}" for s in strategies)
    lines.append(
        f"{len(picks)} searches ({counts}), "
        + (
            f"each {runs} training runs of {budget:,} env steps ({runs * budget:,} env steps): "
            "an equal budget."
            if runs is not None
            else "**at unequal budgets** (runs per search differ): not a fair comparison."
        )
        + f" Each pick re-evaluated on {spec.reevaluate.seeds} fresh training seeds and "
        f"{spec.reevaluate.episodes} fresh layouts, paired by seed with `{reference}` "
        f"re-trained on the same seeds and layouts. {spec.metric}: {better} is better; "
        "differences are pick minus reference."
    )
    return lines


def pick_lines(
    picks: list[Pick], ref: dict[int, float], reference: str
) -> tuple[list[str], list[tuple]]:
    """``## Every pick``: each pick's search and re-evaluated score, and its paired
    difference from the ``reference`` arm (``ref``: its score per seed); and the CSV rows."""
    from ppage_jax.stats.paired import bca_ci, sign_flip_p

    lines = ["", "## Every pick: selection bias and the reference", ""]
    lines.append(
        f"| strategy | search | pick | search score | re-evaluated (mean over seeds) | "
        f"re-evaluated - search | vs `{reference}`: mean difference [BCa 95 % CI] | "
        "sign-flip p |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    csv_rows = []
    for p in picks:
        diffs = _paired(p.reevaluated, ref)
        ci = bca_ci(diffs) if diffs.size else None
        pval = sign_flip_p(diffs) if diffs.size else math.nan
        lines.append(
            f"| {p.strategy} | {p.k} | {p.name} | {p.search_score:.4g} | {p.score:.4g} | "
            f"{p.score - p.search_score:+.4g} | {ci} | {pval:.3g} |"
        )
        csv_rows.append(("pick", p.strategy, p.k, p.search_score, p.score, *(_cells(ci)), pval, ""))
    lines.append("")
    lines.append(
        "The search score is the best of many noisy scores on the search's own seeds and "
        "layouts (the winner's curse); only the re-evaluated score is compared."
    )
    return lines, csv_rows


# One comparison of the declared family: its name, differences, exact p and detail.
Member = tuple[str, np.ndarray, float, str]


def declared_family(
    spec: Any, strategies: Sequence[str], picks: list[Pick], ref: dict[int, float], reference: str
) -> list[Member]:
    """The declared family, in order: each strategy's picks against the reference (the
    per-seed mean over its searches), the declared strategy pairs (exact permutation p),
    and the best pick by search score against the reference."""
    from ppage_jax.stats.paired import sign_flip_p

    family: list[Member] = []
    for s in strategies:
        own = [p for p in picks if p.strategy == s]
        if not own:
            continue
        seeds = sorted(set.intersection(*(set(p.reevaluated) for p in own)) & set(ref))
        diffs = np.asarray(
            [np.mean([p.reevaluated[t] for p in own]) - ref[t] for t in seeds], np.float64
        )
        if diffs.size:
            family.append(
                (f"{s} picks vs {reference}", diffs, sign_flip_p(diffs), f"{len(own)} searches")
            )
    for a, b in list(spec.compare.pairs) if spec.compare else []:
        xa = [p.score for p in picks if p.strategy == a]
        xb = [p.score for p in picks if p.strategy == b]
        if xa and xb:
            detail = (
                f"{a} {np.mean(xa):.4g} ({', '.join(f'{v:.4g}' for v in xa)}) vs {b} "
                f"{np.mean(xb):.4g} ({', '.join(f'{v:.4g}' for v in xb)})"
            )
            diff = np.asarray([np.mean(xa) - np.mean(xb)])
            family.append((f"{a} vs {b}", diff, permutation_p(xa, xb), detail))
    best = min(picks, key=lambda p: (-spec.direction * p.search_score, p.strategy, p.k))
    diffs = _paired(best.reevaluated, ref)
    if diffs.size:
        name = f"best pick by search score ({best.strategy} search {best.k}) vs {reference}"
        family.append((name, diffs, sign_flip_p(diffs), best.name))
    return family


def family_lines(
    direction: int, picks: list[Pick], family: list[Member], reference: str
) -> tuple[list[str], list[tuple]]:
    """``## The declared family (Holm)``: each comparison's mean difference, exact and Holm
    p and verdict; and the CSV rows."""
    from ppage_jax.stats.paired import bca_ci, holm

    adjusted = holm([f[2] for f in family]) if family else []
    lines = ["", "## The declared family (Holm)", ""]
    lines.append(
        "| comparison | n | mean difference [BCa 95 % CI] | exact p | Holm p | verdict | detail |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    csv_rows = []
    for (name, d, pval, detail), padj in zip(family, adjusted, strict=True):
        paired = " vs " + reference in name
        ci = bca_ci(d) if paired and d.size > 1 else None
        mean = float(d.mean())
        good = direction * mean > 0  # lower is better: a negative difference
        verdict = (
            ("better" if good else "worse") + " (Holm p < 0.05)" if padj < 0.05 else "not shown"
        )
        n = d.size if paired else sum(1 for p in picks if p.strategy in name.split(" vs "))
        lines.append(
            f"| {name} | {n} | {ci if ci else f'{mean:+.4g}'} | {pval:.3g} | {padj:.3g} | "
            f"{verdict} | {detail} |"
        )
        csv_rows.append(("family", name, n, mean, *(_cells(ci)), pval, padj))
    lines.append("")
    lines.append(
        "Picks against the reference: paired by training seed (exact sign-flip p over the "
        "seeds; a strategy's picks enter as their per-seed mean over its searches). Strategy "
        "pairs: each search's re-evaluated score is one unit (the searches are independent), "
        "exact permutation p over every relabelling; with 3 searches a side the smallest "
        "two-sided p is 0.1, so a strategy pair can only be declared different with more "
        "searches."
    )
    return lines, csv_rows


def _cells(ci: Any) -> tuple[float, float, float]:
    if ci is None:
        return (math.nan, math.nan, math.nan)
    return (float(ci.point), float(ci.low), float(ci.high))


def landscape_lines(root: Path, spec: Any, metric: str) -> list[str]:
    """``## Which weights mattered``: Spearman correlation of each searched key with the task
    metric over every trained random-search candidate (their samples do not depend on the
    generation, unlike an adapting strategy's)."""
    from scipy.stats import spearmanr

    head = ["", "## Which weights mattered (random-search samples)", ""]

    cands = []
    for directory in sorted((root / "random").glob("search_*")):
        if (directory / "manifest.json").is_file():
            cands.extend(load_candidates(directory))
    cands = [c for c in cands if math.isfinite(c["metric"])]
    if len(cands) < 3:
        return [*head, "Not computed: fewer than 3 trained random-search candidates."]
    values = np.asarray([c["values"] for c in cands], np.float64)
    scores = np.asarray([c["metric"] for c in cands], np.float64)
    out = [
        *head,
        f"Spearman rank correlation of each searched value with {metric} over the "
        f"{len(cands)} trained candidates of the random searches (drawn from the start "
        "distribution, independent of the generation), with its two-sided p; never from an "
        "adapting strategy's trajectory, whose values move with the generation.",
        "",
        "| key | rho | p |",
        "|---|---|---|",
    ]
    for k, dim in enumerate(spec.dims):
        if np.ptp(values[:, k]) == 0 or np.ptp(scores) == 0:
            out.append(f"| `{dim.key}` | n/a | n/a |")
            continue
        result: Any = spearmanr(values[:, k], scores)
        out.append(f"| `{dim.key}` | {result.statistic:+.2f} | {result.pvalue:.3g} |")
    return out
