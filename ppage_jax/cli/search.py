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

from ppage_jax.artifacts import DirectoryLock, prepare_output_dir
from ppage_jax.cli.args import (
    UsageError,
    add_import_argument,
    add_output_arguments,
    import_flags,
    import_user_modules,
)
from ppage_jax.train.run.interrupt import EXIT_INTERRUPTED, StopRequest


def strategy_name(text: str) -> str:
    """argparse type of ``--strategy``: a name of the strategy registry, read when the flag
    is given (building the parser loads no JAX)."""
    from ppage_jax.analysis.search.strategies import STRATEGIES

    if text not in STRATEGIES:
        raise argparse.ArgumentTypeError(
            f"unknown strategy {text!r}; choose one of {list(STRATEGIES)}"
        )
    return text


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
        type=strategy_name,
        metavar="NAME",
        help="replace the file's strategy (docs/search.md lists them; e.g. random, for the "
        "baseline at the same budget)",
    )
    parser.add_argument(
        "--setting",
        default=None,
        metavar="NAME",
        help="a setting of the file's search.settings (default: the first declared), e.g. "
        "small (a 2-core CPU) or full (an accelerator)",
    )
    parser.add_argument(
        "--searches",
        type=int,
        default=None,
        metavar="N",
        help="run N independent searches of each strategy (--strategy, --strategies or the "
        "file's compare.strategies) into OUT/<strategy>/search_<k>, re-evaluate the "
        "references once and compare the strategies (OUT/comparison.md)",
    )
    parser.add_argument(
        "--strategies",
        default=None,
        metavar="LIST",
        help="comma-separated strategies for --searches (default: the file's compare)",
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
    add_output_arguments(parser, "replace the search in the output directory")
    add_import_argument(parser)


def main(args: argparse.Namespace) -> int:
    from ppage_jax.analysis.search.strategies import require_evosax

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
    from ppage_jax.analysis.search.run import search_rewards
    from ppage_jax.analysis.search.spec import load_search

    if args.searches is not None or args.strategies is not None:
        return repeated(args, overrides)
    spec = load_search(args.search, overrides, args.setting)
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


def repeated(args: argparse.Namespace, overrides: dict) -> int:
    """``--searches``: every strategy's searches, the references once, the comparison."""
    from ppage_jax.analysis.search.repeat import run_searches
    from ppage_jax.analysis.search.spec import load_search
    from ppage_jax.analysis.search.strategies import STRATEGIES

    if args.no_constraint:
        raise UsageError("--no-constraint applies to one search; set it in the file for --searches")
    if args.searches is not None and args.searches < 1:
        raise UsageError(f"--searches must be at least 1, got {args.searches}")
    strategies = None
    if args.strategies is not None:
        strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
        unknown = [s for s in strategies if s not in STRATEGIES]
        if unknown or not strategies:
            raise UsageError(f"--strategies: unknown {unknown}; choose from {list(STRATEGIES)}")
    elif args.strategy is not None:
        strategies = [args.strategy]
    base = load_search(args.search, None, args.setting)
    out = prepare_output_dir(overrides.get("output_dir") or base.output_dir, "search directory")
    with DirectoryLock(out, "search directory"):
        summary = run_searches(
            args.search,
            out,
            strategies=strategies,
            searches=args.searches,
            setting=args.setting,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=not args.no_progress,
        )
    print(summary["comparison"])
    return 0
