"""report.md, the pictures and the selected ``rewards.yaml`` of a search directory, from its
files alone (so a resumed search writes the same bytes).

- the search: base design, space, strategy, budget, held-out layouts, metric, constraint;
- per generation: best and median task metric, feasible share (``progress.png``), and the
  searched values of every candidate with the strategy's mean (``weights.png``);
- the landscape: each searched key's rank correlation with the task metric, the best
  candidates, the infeasible candidates and why, the audit's flags per candidate;
- the selected design as a ready-to-use ``rewards.yaml``;
- the re-evaluation on fresh seeds and layouts: time to capture censored at the step limit
  (RMST, IQM over seeds with a 95 % stratified-bootstrap CI), capture rate, and
  P(improvement) in time to capture against each reference arm, paired over layouts (each
  layout a stratum, runs resampled within it), with its 95 % CI; and the selection bias:
  the search's own score of the selected design beside its re-evaluated one.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.analysis.batch.output import float_value
from ppage_jax.analysis.search.constraint import selection_order
from ppage_jax.analysis.search.reevaluate import replay_command
from ppage_jax.analysis.search.space import bound_lines
from ppage_jax.analysis.search.spec import SearchSpec
from ppage_jax.analysis.search.writer import (
    DESCRIPTION,
    REEVAL,
    REPORT,
    REWARDS,
    SELECTED,
    load_candidates,
    load_means,
    read_csv,
    read_manifest,
    rewards_yaml,
)
from ppage_jax.artifacts import save_figure, write_text
from ppage_jax.episodes.metrics import METRICS
from ppage_jax.stats import bootstrap as stats

BOOTSTRAP_REPS = 2000


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def _rank_correlation(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    from scipy.stats import spearmanr

    result: Any = spearmanr(x, y)  # scipy's result type hides its statistic
    return float(result.statistic)


def reevaluation_stats(out_dir: Path, references: list[str]) -> dict[str, Any] | None:
    """Per arm: RMST and capture rate (IQM over seeds, CI) and P(improvement) in time to
    capture against each reference, paired over layouts."""
    path = Path(out_dir) / REEVAL / "results.csv"
    if not path.is_file() or not read_manifest(out_dir).get("reevaluated"):
        return None
    per: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in read_csv(path):
        per[row["arm"]][row["metric"]][int(row["seed"])] = float_value(row["value"])
    times: dict[str, dict[int, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for row in read_csv(Path(out_dir) / REEVAL / "episodes.csv"):
        times[row["arm"]][int(row["seed"])][int(row["episode"])] = int(row["length"])
    arms = list(per)
    out: dict[str, Any] = {"arms": arms, "rows": {}}
    matrices = {
        arm: np.array([[t[e] for e in sorted(t)] for _, t in sorted(times[arm].items())], float)
        for arm in arms
    }
    for arm in arms:
        row: dict[str, Any] = {"n": len(per[arm]["rmst"])}
        for metric in ("rmst", "capture_rate"):
            values = np.array([per[arm][metric][s] for s in sorted(per[arm][metric])])
            row[metric] = stats.bootstrap_ci(values, "iqm", reps=BOOTSTRAP_REPS)
        row["monitor_flagged"] = sum(
            1
            for s in sorted(per[arm]["rmst"])
            if any(per[arm][k].get(s) == 1.0 for k in per[arm] if k.startswith("monitor/"))
        )
        for ref in references:
            if ref == arm or ref not in matrices:
                continue
            # higher is better: minus the censored time to capture, one stratum per layout
            row[f"poi/{ref}"] = stats.probability_of_improvement_ci(
                -matrices[arm], -matrices[ref], reps=BOOTSTRAP_REPS, joint=True
            )
        out["rows"][arm] = row
    return out


def scored_on(spec: SearchSpec) -> str:
    """The search's metric as the report names it: its label (the metric table's) and which
    way is better."""
    better = "higher" if spec.direction > 0 else "lower"
    return f"**{METRICS[spec.metric].text}** ({better} is better; mean over its seeds)"


def write_report(output_dir: str | Path, spec: SearchSpec) -> Path:
    """report.md, progress.png, weights.png and rewards.yaml in ``output_dir``: report.md's
    opening, then one function per section."""
    out = Path(output_dir)
    description = json.loads((out / DESCRIPTION).read_text())
    cands = load_candidates(out)
    order = selection_order(cands)
    best = cands[order[0]]
    lines = opening_lines(spec, description, cands)
    lines += space_lines(spec)
    lines += generation_lines(out, spec, cands, best)
    lines += landscape_lines(spec, cands, order)
    lines += infeasible_lines(spec, cands, best)
    lines += audit_lines(spec, cands)
    lines += selected_lines(out, spec, best)
    lines += reevaluation_lines(out, spec, best["metric"], len(cands), spec.seeds)
    lines.append("")
    return write_text(out / REPORT, "\n".join(lines))


def opening_lines(spec: SearchSpec, description: dict, cands: list[dict]) -> list[str]:
    """The title, the search (design, strategy, budget, scoring) and its constraint."""
    lines = [f"# Reward search: {Path(spec.path).name}", ""]
    budget = spec.config["experiment"]["total_timesteps"]
    lines.append(
        f"Base design `{description['config']}` (config hash {description['config_hash']}); "
        f"terms {', '.join(description['terms'])}. Strategy **{spec.strategy}** (evosax), "
        f"{spec.population} candidates x {spec.seeds} training seeds x {spec.generations} "
        f"generations = {spec.population * spec.seeds * spec.generations} training runs of "
        f"{budget} env steps each; each candidate is scored on {scored_on(spec)} on held-out "
        "layouts "
        f"{description['eval_seeds'][0]}-{description['eval_seeds'][1]} with the "
        f"{spec.eval_policy} policy, never on the shaped return."
    )
    lines.append("")
    if spec.constraint.monitor:
        lines.append(
            "Constraint: a candidate that the reward-hacking monitor flags "
            f"({', '.join(spec.constraint.checks)}) in the majority of its seeds is "
            "infeasible and ranks after every feasible candidate."
        )
    else:
        lines.append("Constraint: **off** (the monitor's flags are recorded, not used).")
    audit_constraint = getattr(spec.constraint, "audit", ())
    if audit_constraint:
        lines.append(
            "A candidate whose reward audit raises "
            f"{', '.join(f'`{c}`' for c in audit_constraint)} is infeasible too."
        )
    limit = spec.constraint.stall_margin
    if limit is not None:
        refused = sum(1 for c in cands if not c.get("trained", True))
        lines.append(
            f"A candidate whose predators' analytic stall margin (the largest direct payment a "
            f"sub-step minus the turn cost, from the terms' declared bounds) is above "
            f"{limit:+.4g} is not trained: it is recorded and ranks last ({refused} of "
            f"{len(cands)} candidates)."
        )
    return lines


def space_lines(spec: SearchSpec) -> list[str]:
    """``## Search space``: each searched key's bounds, scale and the base design's value."""
    lines = ["", "## Search space", "", "| key | low | high | scale | base design |"]
    lines.append("|---|---|---|---|---|")
    for d in spec.dims:
        lines.append(
            f"| `{d.key}` | {_fmt(d.low)} | {_fmt(d.high)} | {d.scale} | "
            f"{_fmt(d.current(spec.design))} |"
        )
    return lines


def generation_lines(out: Path, spec: SearchSpec, cands: list[dict], best: dict) -> list[str]:
    """``## Generations``: best and median task metric and feasible share per generation,
    then the pictures (progress.png, weights.png, written here)."""
    metric, direction = spec.metric, spec.direction
    lines = ["", "## Generations", ""]
    lines.append(
        f"| generation | best {metric} (feasible) | median {metric} | feasible | best candidate |"
    )
    lines.append("|---|---|---|---|---|")
    per_gen = {}
    for g in sorted({c["generation"] for c in cands}):
        gc = [c for c in cands if c["generation"] == g]
        feas = [c for c in gc if c["feasible"]]
        pick = max if direction > 0 else min
        top = pick(feas, key=lambda c: c["metric"]) if feas else None
        med = float(np.nanmedian([c["metric"] for c in gc]))
        per_gen[g] = (top["metric"] if top else math.nan, med, len(feas) / len(gc))
        lines.append(
            f"| {g} | {_fmt(per_gen[g][0])} | {_fmt(med)} | {len(feas)}/{len(gc)} | "
            f"{top['name'] if top else 'none'} |"
        )
    figures = _plot(out, spec, cands, per_gen, best)
    lines.append("")
    for name in figures:
        lines.append(f"![{name.stem}]({name.name})")
    return lines


def landscape_lines(spec: SearchSpec, cands: list[dict], order: list[int]) -> list[str]:
    """``## Landscape``: each searched key's rank correlation with the task metric (random
    search only: an adapting strategy's values are confounded with time), then the best
    candidates in selection ``order``."""
    metric, direction = spec.metric, spec.direction
    lines = ["", "## Landscape", ""]
    values = np.array([c["values"] for c in cands], float)
    scores = np.array([c["metric"] for c in cands], float)
    feasible = np.array([c["feasible"] for c in cands], bool)
    scored = np.isfinite(scores)  # candidates the constraint did not train have no score
    if spec.strategy == "random":  # draws that do not depend on the generation
        lines.append(
            f"Spearman rank correlation of each searched value with {metric} over all "
            f"{int(scored.sum())} trained candidates (feasible ones only in the second "
            f"column); {'positive' if direction < 0 else 'negative'} means larger values did "
            "worse. Random search draws every generation from the same distribution, so the "
            "values are not confounded with the generation."
        )
        lines += ["", "| key | all candidates | feasible |", "|---|---|---|"]
        for k, d in enumerate(spec.dims):
            rho_all = _rank_correlation(values[scored, k], scores[scored])
            rho_f = _rank_correlation(values[feasible & scored, k], scores[feasible & scored])
            lines.append(f"| `{d.key}` | {_fmt(rho_all, 2)} | {_fmt(rho_f, 2)} |")
    else:
        lines.append(
            f"Which weights mattered is not read from {spec.strategy}'s candidates: an "
            "adapting strategy's values move with the generation, so their correlation with "
            "the metric is confounded with time. The random search's samples answer it "
            "(`--strategy random`, or `--searches`: comparison.md)."
        )
    lines += ["", "Best candidates (feasible first):", ""]
    head = " | ".join(f"`{d.key}`" for d in spec.dims)
    lines.append(f"| candidate | {head} | {metric} | feasible | audit flags |")
    lines.append("|---" * (len(spec.dims) + 4) + "|")
    for i in order[:8]:
        c = cands[i]
        cells = " | ".join(_fmt(v, 3) for v in c["values"])
        lines.append(
            f"| {c['name']} | {cells} | {_fmt(c['metric'])} | "
            f"{'yes' if c['feasible'] else 'no'} | {', '.join(c['audit_flags']) or '-'} |"
        )
    return lines


def infeasible_lines(spec: SearchSpec, cands: list[dict], best: dict) -> list[str]:
    """``### Infeasible candidates``: each one and why, how many the monitor flagged at all,
    and what ranking on the task metric alone would have selected."""
    metric = spec.metric
    infeasible = [c for c in cands if not c["feasible"]]
    lines = ["", "### Infeasible candidates", ""]
    if infeasible:
        for c in infeasible:
            cells = ", ".join(
                f"{d.key}={_fmt(v)}" for d, v in zip(spec.dims, c["values"], strict=True)
            )
            lines.append(f"- {c['name']} ({cells}; {metric} {_fmt(c['metric'])}): {c['reason']}")
    else:
        lines.append("None: the monitor flagged no candidate in the majority of its seeds.")
    flagged_any = sum(1 for c in cands if c["flagged_seeds"])
    lines.append("")
    lines.append(
        f"The monitor flagged at least one seed of {flagged_any} of {len(cands)} candidates."
    )
    free = cands[selection_order([dict(c, feasible=True) for c in cands])[0]]
    if free["name"] == best["name"]:
        lines.append(
            f"Ranked on {metric} alone, ignoring the constraint, the search would have "
            f"selected the same candidate ({best['name']})."
        )
    else:
        lines.append(
            f"Ranked on {metric} alone, ignoring the constraint, the search would have "
            f"selected {free['name']} ({metric} {_fmt(free['metric'])}), infeasible because "
            f"{free['reason']}; the constraint selected {best['name']} instead."
        )
    return lines


def audit_lines(spec: SearchSpec, cands: list[dict]) -> list[str]:
    """``### Audit flags per candidate``: the candidates per flag of the reward audit."""
    lines = ["", "### Audit flags per candidate", ""]
    if not spec.audit_episodes:
        lines.append("The audit was off (`audit: false`).")
        return lines
    counts: dict[str, list[str]] = defaultdict(list)
    for c in cands:
        for flag in c["audit_flags"]:
            counts[flag].append(c["name"])
    lines.append(
        f"The reward audit ({spec.audit_episodes} episodes per baseline policy pair) of "
        "every candidate before training; audit.csv has every row. Candidates per flag:"
    )
    lines.append("")
    for flag, names in sorted(counts.items()):
        lines.append(f"- `{flag}`: {len(names)} of {len(cands)}")
    return lines


def selected_lines(out: Path, spec: SearchSpec, best: dict) -> list[str]:
    """``## Selected design``: its values, search score, the bounds it sits on, and the
    design as ``rewards.yaml`` (written here)."""
    lines = ["", "## Selected design", ""]
    cells = ", ".join(
        f"`{d.key}` = {_fmt(v, 4)}" for d, v in zip(spec.dims, best["values"], strict=True)
    )
    lines.append(
        f"{best['name']} ({cells}): {spec.metric} {_fmt(best['metric'])} in the search "
        f"({'feasible' if best['feasible'] else 'INFEASIBLE: ' + best['reason']})."
    )
    on_bounds = bound_lines(spec.dims, best["values"])
    lines += [""] + [f"- **On a bound:** {line}" for line in on_bounds] + [""] * bool(on_bounds)
    lines.append("As `rewards.yaml`:")
    text = rewards_yaml(spec, best["values"])
    write_text(out / REWARDS, text)
    lines += ["", "```yaml", text.rstrip(), "```"]
    return lines


def reevaluation_lines(
    out: Path, spec: SearchSpec, search_score: float, scores: int, search_seeds: int
) -> list[str]:
    """The report's re-evaluation section: the selected design and the references on fresh
    seeds and layouts, the verdict against each reference, and the selection bias (its
    ``search_score``, the best of ``scores`` noisy scores on ``search_seeds`` seed(s), beside
    its re-evaluated score)."""
    metric = spec.metric
    refs = [r.name for r in spec.references]
    lines: list[str] = []
    re = reevaluation_stats(out, refs)
    lines += ["", "## Re-evaluation on fresh seeds and layouts", ""]
    if re is None:
        lines.append("Not run yet.")
    else:
        r = spec.reevaluate
        lines.append(
            f"The selected design (`{SELECTED}`) and the reference arms re-trained on fresh "
            f"training seeds {r.train_seed}-{r.train_seed + r.seeds - 1} (the search trained "
            f"on {spec.train_seed}-{spec.train_seed + spec.train_block - 1}) and evaluated on "
            f"{r.episodes} fresh held-out layouts ({r.eval_seed}-{r.eval_seed + r.episodes - 1}; "
            f"the search's were {spec.eval_seed}-{spec.eval_seed + spec.eval_episodes - 1}), "
            "the same budget per run as the search. IQM over seeds "
            "[95 % stratified-bootstrap CI]; P(improvement vs X) = probability that a run of "
            "the arm captures sooner than a run of X on the same layout (censored at the step "
            "limit; ties count half), averaged over layouts, [95 % CI] (a bootstrap replicate "
            "resamples whole runs, each keeping all its layouts)."
        )
        lines.append("")
        poi_cols = [f"P(improvement vs {ref})" for ref in refs]
        lines.append(
            "| arm | seeds | RMST (lower is better) | capture rate | monitor-flagged seeds | "
            + " | ".join(poi_cols)
            + " |"
        )
        lines.append("|---" * (5 + len(refs)) + "|")
        for arm in re["arms"]:
            row = re["rows"][arm]
            pois = [str(row[f"poi/{ref}"]) if f"poi/{ref}" in row else "reference" for ref in refs]
            lines.append(
                f"| {arm} | {row['n']} | {row['rmst']} | {row['capture_rate']} | "
                f"{row['monitor_flagged']}/{row['n']} | " + " | ".join(pois) + " |"
            )
        sel = re["rows"].get(SELECTED)
        lines.append("")
        if sel is not None:
            verdicts = []
            for ref in refs:
                p = sel.get(f"poi/{ref}")
                if p is None:
                    continue
                if p.low > 0.5:
                    verdicts.append(f"**better than `{ref}`** (P(improvement) {p}, CI above 0.5)")
                elif p.high < 0.5:
                    verdicts.append(f"**worse than `{ref}`** (P(improvement) {p}, CI below 0.5)")
                else:
                    verdicts.append(
                        f"**not shown better than `{ref}`** (P(improvement) {p}, CI spans 0.5)"
                    )
            if verdicts:
                lines.append("Verdict: the selected design is " + "; ".join(verdicts) + ".")
                lines.append("")
            lines.append(
                f"Selection bias: the search scored the selected design {metric} "
                f"{_fmt(search_score)} on {search_seeds} seed(s) and the search's layouts; "
                f"that is the best of {scores} noisy scores, so it is biased towards luck "
                f"(the winner's curse). Re-trained on fresh seeds and layouts its RMST is "
                f"{sel['rmst']} (IQM over {sel['n']} seeds). Only the re-evaluation is a fair "
                "comparison with the reference arms."
            )
    return lines


def _plot(out: Path, spec: SearchSpec, cands: list[dict], per_gen: dict, best: dict) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    gens = sorted(per_gen)
    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(6.4, 5.2), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for c in cands:
        ax.scatter(
            c["generation"],
            c["metric"],
            marker="o" if c["feasible"] else "x",
            color="0.6" if c["feasible"] else "tab:red",
            s=18,
            zorder=1,
        )
    ax.plot(gens, [per_gen[g][0] for g in gens], "-o", color="tab:blue", label="best feasible")
    ax.plot(gens, [per_gen[g][1] for g in gens], "--s", color="tab:orange", label="median")
    ax.scatter([], [], marker="x", color="tab:red", label="infeasible candidate")
    ax.scatter([], [], marker="o", color="0.6", label="feasible candidate")
    ax.set_ylabel(spec.metric + (" (lower is better)" if spec.direction < 0 else ""))
    ax.legend(fontsize=7)
    ax.set_title(f"reward search ({spec.strategy})")
    ax2.bar(gens, [per_gen[g][2] for g in gens], color="tab:green")
    ax2.set_ylim(0, 1)
    ax2.set_ylabel("feasible share")
    ax2.set_xlabel("generation")
    ax2.set_xticks(gens)
    fig.tight_layout()
    paths.append(save_figure(fig, out / "progress.png", dpi=110))
    plt.close(fig)

    means = load_means(out)
    d = len(spec.dims)
    fig, axes = plt.subplots(1, d, figsize=(3.0 * d, 3.0), squeeze=False)
    for k, dim in enumerate(spec.dims):
        a = axes[0, k]
        for c in cands:
            a.scatter(
                c["generation"],
                c["values"][k],
                marker="o" if c["feasible"] else "x",
                color="0.6" if c["feasible"] else "tab:red",
                s=16,
            )
        if any(m is not None for m in means):
            mean_vals = [dim.value(m[k]) if m is not None else math.nan for m in means]
            a.plot(gens, mean_vals[: len(gens)], "-", color="tab:blue", label="strategy mean")
        a.scatter(
            [best["generation"]],
            [best["values"][k]],
            marker="*",
            s=120,
            color="gold",
            edgecolor="k",
            zorder=3,
            label="selected",
        )
        a.axhline(dim.current(spec.design), color="k", lw=0.6, ls=":", label="base design")
        if dim.scale == "log":
            a.set_yscale("log")
        a.set_title(dim.key, fontsize=8)
        a.set_xlabel("generation")
        a.set_xticks(gens)
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    paths.append(save_figure(fig, out / "weights.png", dpi=110))
    plt.close(fig)
    return paths


def write_pbt_report(output_dir: str | Path, spec: SearchSpec) -> Path:
    """report.md and schedule.png of a PBT search (:mod:`.pbt`): the population per interval,
    the final evaluation of every member, the selected member's schedule, its re-evaluation
    and the selection bias."""
    out = Path(output_dir)
    pbt = spec.pbt
    assert pbt is not None, "a PBT report needs the pbt settings"
    cands = load_candidates(out)
    final = json.loads((out / "final.json").read_text())
    best = final["members"][final["pick"]]
    metric = spec.metric
    budget = spec.config["experiment"]["total_timesteps"]
    lines = [f"# Reward search (PBT): {Path(spec.path).name}", ""]
    lines.append(
        f"Population-based training: {pbt.population} members, each one run of {budget} env "
        f"steps ({pbt.updates} updates) from its own training seed "
        f"({spec.train_seed}-{spec.train_seed + pbt.population - 1}); every {pbt.interval} "
        f"updates ({pbt.intervals} intervals) the worst {pbt.movers} members (a quarter of "
        f"{pbt.quarter:g}) copy the learner (network, optimiser state, return scale) of one "
        f"of the best {pbt.movers} and multiply each copied value by {pbt.perturb:g} or "
        f"1/{pbt.perturb:g}, clipped to the box. Members are ranked on the {metric} of their "
        "rolling block of training episodes (the interval's, episode-weighted), never on the "
        "shaped return; a member whose lineage the reward-hacking monitor flags ranks last "
        "and cannot be selected."
    )
    lines += ["", "## Intervals", ""]
    lines.append(f"| interval | best block {metric} (feasible) | median | feasible | replaced |")
    lines.append("|---|---|---|---|---|")
    direction = spec.direction
    for g in sorted({c["generation"] for c in cands}):
        gc = [c for c in cands if c["generation"] == g]
        feas = [c["metric"] for c in gc if c["feasible"] and math.isfinite(c["metric"])]
        top = (max if direction > 0 else min)(feas) if feas else math.nan
        moved = sum(1 for c in gc if c["source"] != c["member"])
        lines.append(
            f"| {g} | {_fmt(top)} | {_fmt(float(np.nanmedian([c['metric'] for c in gc])))} | "
            f"{sum(c['feasible'] for c in gc)}/{len(gc)} | {moved} |"
        )
    lines += ["", "## Final evaluation on the search's held-out layouts", ""]
    lines.append(f"| member | lineage of | {metric} | feasible | final values |")
    lines.append("|---|---|---|---|---|")
    for i in final["order"][:8]:
        m = final["members"][i]
        cells = ", ".join(_fmt(v, 3) for v in m["values"])
        lines.append(
            f"| {m['name']} | m{m['root']:02d} | {_fmt(m['metric'])} | "
            f"{'yes' if m['feasible'] else 'no: ' + m['reason']} | {cells} |"
        )
    lines += ["", "## Selected schedule", ""]
    verdict = "feasible" if best["feasible"] else "INFEASIBLE: " + best["reason"]
    lines.append(
        f"{best['name']} (a lineage of m{best['root']:02d}): {metric} {_fmt(best['metric'])} on "
        f"the search's layouts ({verdict}). "
        "Its values per interval, replayed by `ppage-jax run config.yaml` (the search's config "
        "with this `experiment.curriculum`); on the re-evaluation's seeds and layouts, "
        f"`{replay_command(spec, 'config.yaml')}` trains and scores it bit for bit as the "
        "re-evaluation below did:"
    )
    lines += ["", "| interval | " + " | ".join(f"`{d.key}`" for d in spec.dims) + " |"]
    lines.append("|---" * (len(spec.dims) + 1) + "|")
    for i, values in enumerate(best["schedule"]):
        lines.append(f"| {i} | " + " | ".join(_fmt(v, 4) for v in values) + " |")
    lines.append("")
    lines += [f"- **On a bound:** {line}" for line in bound_lines(spec.dims, best["values"])]
    lines.append(
        "Which weights mattered is not read from PBT's population: its values follow its own "
        "selection (confounded with time); the random search's samples answer that."
    )
    lines += reevaluation_lines(out, spec, best["metric"], len(final["members"]), 1)
    figure = _plot_schedule(out, spec, cands, best)
    lines += ["", f"![{figure.stem}]({figure.name})", ""]
    return write_text(out / REPORT, "\n".join(lines))


def _plot_schedule(out: Path, spec: SearchSpec, cands: list[dict], best: dict) -> Path:
    """schedule.png: every member's values per interval, the selected lineage's in colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = len(spec.dims)
    fig, axes = plt.subplots(1, d, figsize=(3.0 * d, 3.0), squeeze=False)
    for k, dim in enumerate(spec.dims):
        a = axes[0, k]
        a.scatter(
            [c["generation"] for c in cands], [c["values"][k] for c in cands], s=10, color="0.6"
        )
        a.plot(
            range(len(best["schedule"])),
            [v[k] for v in best["schedule"]],
            "-o",
            color="tab:blue",
            label="selected lineage",
        )
        if dim.scale == "log":
            a.set_yscale("log")
        a.set_title(dim.key, fontsize=8)
        a.set_xlabel("interval")
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    path = save_figure(fig, out / "schedule.png", dpi=110)
    plt.close(fig)
    return path
