"""Repeated searches: strategies compared as strategies.

``search.compare`` declares the strategies (CMA-ES, SNES, random search, PBT, ...), how many
independent searches each runs (``searches``), the reference arm and the strategy pairs to
test. :func:`run_searches` runs every search of every strategy into
``<root>/<strategy>/search_<k>``: search ``k`` draws its proposals from ``seed + k`` and
trains on its own block of training seeds (``train_seed + k * block``, ``block`` the largest
training-seed block of a strategy), at the same budget in training env steps for every
strategy (PBT's members default to the evolution strategies' runs). Each search re-evaluates
only its pick, on the file's fresh re-evaluation seeds and layouts; the reference arms are
re-evaluated once, on the same seeds and layouts, into ``<root>/references``. Then
:func:`ppage_jax.analysis.search.compare.compare_strategies` writes ``comparison.md``.

Every search keeps its own resume: after a kill, the same call with ``resume=True``
continues the unfinished search and skips the finished ones.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppage_jax.analysis.batch.output import cell, csv_text
from ppage_jax.analysis.batch.spec import Arm
from ppage_jax.analysis.search.spec import SearchSpec, load_search
from ppage_jax.analysis.search.writer import EPISODE_HEADER, REEVAL_HEADER
from ppage_jax.artifacts import prepare_output_dir, write_json, write_text

REFERENCES = "references"
DONE = "done.json"


def search_dir(root: str | Path, strategy: str, k: int) -> Path:
    """Where search ``k`` of ``strategy`` writes."""
    return Path(root) / strategy / f"search_{k}"


def seed_block(spec: SearchSpec) -> int:
    """Training seeds one search of any strategy uses (the larger of the evolution
    strategies' ``seeds`` and PBT's members)."""
    return max(spec.seeds, spec.pbt.population if spec.pbt is not None else 0)


def repeated_spec(
    path: str | Path, strategy: str, k: int, setting: str | None = None
) -> SearchSpec:
    """Search ``k`` of ``strategy``: the file (under ``setting``) with the strategy, the
    search seed ``seed + k`` and the training seeds from ``train_seed + k * block``."""
    base = load_search(path, None, setting)
    overrides = {
        "strategy": strategy,
        "seed": base.seed + k,
        "train_seed": base.train_seed + k * seed_block(base),
    }
    return load_search(path, overrides, setting)


def run_searches(
    path: str | Path,
    root: str | Path | None = None,
    *,
    strategies: Sequence[str] | None = None,
    searches: int | None = None,
    setting: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    compare: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run ``searches`` searches of each strategy (defaults: the file's ``compare``, else its
    strategy and 3), the references' re-evaluation, and (``compare``) the comparison.
    Returns ``{"root", "searches": {strategy: [output dirs]}, "comparison"}``."""
    from ppage_jax.analysis.search.run import search_rewards

    say = log or (lambda m: print(m, file=sys.stderr))
    base = load_search(path, None, setting)
    declared = base.compare
    strategies = list(strategies or (declared.strategies if declared else (base.strategy,)))
    searches = searches or (declared.searches if declared else 3)
    out = Path(root or base.output_dir)
    prepare_output_dir(out, "search directory")
    dirs: dict[str, list[str]] = {}
    for strategy in strategies:
        for k in range(searches):
            spec = repeated_spec(path, strategy, k, setting)
            directory = search_dir(out, strategy, k)
            dirs.setdefault(strategy, []).append(str(directory))
            if resume and _finished(directory):
                continue
            say(f"search {strategy} {k + 1}/{searches} -> {directory}")
            search_rewards(
                spec,
                directory,
                resume=resume,
                overwrite=overwrite,
                progress=progress,
                references=False,
                log=log,
            )
    reevaluate_references(base, out / REFERENCES, progress, resume)
    summary: dict[str, Any] = {"root": str(out), "searches": dirs, "comparison": None}
    if compare:
        from ppage_jax.analysis.search.compare import compare_strategies

        summary["comparison"] = compare_strategies(out, base, strategies)
    return summary


def _finished(directory: Path) -> bool:
    """A search directory whose search and re-evaluation both finished."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(manifest.get("reevaluated")) and (directory / "pick.json").is_file()


def with_design_terms(arm: Arm, spec: SearchSpec) -> Arm:
    """``arm`` with every term of the search's design it lacks at weight 0, in the design's
    order: the env the re-evaluation steps carries every term of the space, as when the
    references train beside a pick (:func:`~.reevaluate.reevaluate`)."""
    import dataclasses

    own = {t.name: t for t in arm.terms}
    design = [own.pop(t.name, dataclasses.replace(t, weight=0.0)) for t in spec.design.terms]
    return dataclasses.replace(arm, terms=(*design, *own.values()))


def reevaluate_references(
    spec: SearchSpec, out: Path, progress: bool = True, resume: bool = True
) -> Path:
    """The reference arms trained on the re-evaluation's fresh seeds and evaluated on its
    fresh layouts, once for every search (``out/reevaluation/results.csv``,
    ``episodes.csv``; ``out/done.json`` marks it finished and is kept on resume)."""
    import dataclasses

    from ppage_jax.analysis.search.reevaluate import RunSetup, run_parts
    from ppage_jax.env import make

    out = prepare_output_dir(out, "references directory")
    if resume and (out / DONE).is_file():
        return out
    env = make(spec.config)
    horizon = spec.step_limit(env)
    rspec = spec.reevaluation_sweep(spec.design)
    arms = tuple(with_design_terms(r, spec) for r in spec.references)
    part = dataclasses.replace(rspec, arms=arms)
    results, episodes = run_parts([part], spec.config, RunSetup(env, horizon, progress, (), out))
    rows = [
        (arm, seed, metric, cell(value))
        for (arm, seed), metrics in results.items()
        for metric, value in metrics.items()
    ]
    (out / "reevaluation").mkdir(exist_ok=True)
    write_text(out / "reevaluation" / "results.csv", csv_text(REEVAL_HEADER, rows))
    write_text(out / "reevaluation" / "episodes.csv", csv_text(EPISODE_HEADER, episodes))
    write_json(
        out / DONE,
        {
            "references": [r.name for r in spec.references],
            "reevaluate": dataclasses.asdict(spec.reevaluate),
        },
        indent=1,
    )
    return out
