"""Search reward designs: an evolution strategy (evosax) proposes reward weights and term
params, every candidate x seed trains as one compiled program per generation, candidates are
ranked on the task metric (RMST by default) with those the reward-hacking monitor flags in
most seeds ranked last, and the selected design is re-evaluated against the reference arms
on fresh seeds and layouts. Writes search.csv, report.md, rewards.yaml and plots
(docs/search.md).

Generations are committed as they finish: after Ctrl-C or a crash, rerun the same command
with --resume to continue from the last finished generation (to the same results). An output
directory that holds a search is refused unless --resume or --overwrite is given."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppage_jax.analysis.search.run import search_rewards
from ppage_jax.analysis.search.spec import load_search
from ppage_jax.analysis.search.strategies import STRATEGIES, require_evosax
from ppage_jax.artifacts import DirectoryLock, prepare_output_dir
from ppage_jax.cli.args import (
    UsageError,
    add_import_argument,
    import_flags,
    import_user_modules,
)
from ppage_jax.tracking.loggers import add_logger_argument
from ppage_jax.train.run.interrupt import EXIT_INTERRUPTED, StopRequest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("search", metavar="SEARCH.yaml", help="search file (docs/search.md)")
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output directory (default: the search file's output_dir)",
    )
    parser.add_argument(
        "--strategy",
        default=None,
        choices=list(STRATEGIES),
        help="replace the file's strategy (e.g. random, for the baseline at the same budget)",
    )
    parser.add_argument(
        "--no-constraint",
        action="store_true",
        help="rank on the task metric alone: the monitor's flags are recorded, not used",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the search in the output directory from its last finished generation",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the search in the output directory",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_logger_argument(parser)
    add_import_argument(parser)


def main(args: argparse.Namespace) -> int:
    try:  # the extra is checked before anything is read or written
        require_evosax()
    except ImportError as err:
        raise UsageError(str(err)) from None
    overrides: dict = {}
    if args.strategy is not None:
        overrides["strategy"] = args.strategy
    if args.no_constraint:
        overrides["constraint"] = {"monitor": False}
    if args.out is not None:
        overrides["output_dir"] = args.out
    if args.resume and args.overwrite:
        print("ppage-jax search: pass --resume or --overwrite, not both", file=sys.stderr)
        return 2
    import_user_modules(args.imports)
    spec = load_search(args.search, overrides)
    print(
        f"search {spec.path}: {spec.strategy}, {spec.population} candidates x {spec.seeds} "
        f"seeds x {spec.generations} generations over {[d.key for d in spec.dims]}; "
        f"metric {spec.metric}; references {[r.name for r in spec.references]}",
        file=sys.stderr,
    )
    out = prepare_output_dir(spec.output_dir, "search directory")
    with (
        DirectoryLock(out, "search directory"),
        StopRequest("stopping after the current generation (Ctrl-C again to quit at once)") as stop,
    ):
        summary = search_rewards(
            spec,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            loggers=args.logger,
            should_stop=stop,
        )
    if summary["stopped"]:
        print(
            f"interrupted: kept the finished generations in {out}; continue with: ppage-jax "
            f"search {args.search} --out {out} --resume{import_flags(args.imports)}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print(
        f"{len(summary['candidates'])} candidates in {summary['seconds']:.1f} s "
        f"({summary['generations_run']} generation(s) run now); wrote {out}/search.csv, "
        f"report.md, rewards.yaml"
    )
    print(Path(summary["report"]).read_text())
    return 0
