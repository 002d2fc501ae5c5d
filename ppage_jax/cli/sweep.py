"""Run a reward-ablation sweep: arms (reward designs) x seeds, trained and evaluated as one
compiled program, with results.csv, curves.csv, report.md and plots in the output directory.
Without SWEEP.yaml it runs PPAGE's four conditions (configs/ablation/sweep.yaml)."""
from __future__ import annotations

import argparse
import sys

from ppage_jax.config import parse_override
from ppage_jax.analysis.sweep.run import run_sweep
from ppage_jax.analysis.sweep.spec import default_sweep_file, load_sweep


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", metavar="SWEEP.yaml", nargs="?", default=None,
                        help="sweep file (default: configs/ablation/sweep.yaml, PPAGE's "
                             "four-condition ablation)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a config key of every arm, e.g. --set "
                             "experiment.total_timesteps=100000 (value read as YAML)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per arm")
    parser.add_argument("--arms", default=None, metavar="A,B",
                        help="run only these arms (the baseline arm is always kept)")
    parser.add_argument("--output", default=None, metavar="DIR",
                        help="output directory (default: the sweep's output_dir)")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="runs per compiled call (default: as many as fit in memory)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def main(args: argparse.Namespace) -> int:
    overrides: dict = {}
    if args.overrides:
        overrides["set"] = dict(parse_override(text) for text in args.overrides)
    if args.seeds is not None:
        overrides["seeds"] = args.seeds
    if args.chunk_size is not None:
        overrides["chunk_size"] = args.chunk_size
    if args.output is not None:
        overrides["output_dir"] = args.output
    path = args.sweep if args.sweep is not None else default_sweep_file()
    spec = load_sweep(path, overrides, arms=args.arms.split(",") if args.arms else None)
    print(f"sweep {spec.path}: {len(spec.arms)} arms x {spec.seeds} seeds, terms "
          f"{list(spec.terms)}, baseline {spec.baseline}", file=sys.stderr)
    summary = run_sweep(spec, progress=not args.no_progress)
    print(f"{len(summary['runs'])} runs in {summary['seconds']:.1f} s "
          f"({summary['compile_seconds']:.1f} s compiling, {summary['chunks']} chunk(s) of "
          f"{summary['chunk_size']}); wrote {summary['output_dir']}/results.csv, curves.csv, "
          f"report.md")
    print(open(summary["report"]).read())
    return 0
