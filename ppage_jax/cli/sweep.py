"""Run a reward-ablation sweep: arms (reward designs) x seeds, trained and evaluated as one
compiled program, with results.csv, curves.csv, report.md and plots in the output directory.
Without SWEEP.yaml it runs PPAGE's four conditions (configs/ablation/sweep.yaml).

Finished chunks are committed as they end: after Ctrl-C or a crash, `ppage-jax sweep --resume
OUT_DIR` runs only the unfinished ones. An output directory that holds a sweep is refused
unless --resume or --overwrite is given (docs/runs.md).

Chunks are sized from the device's memory unless --chunk-size is given (--memory-budget or
PPAGE_JAX_MEMORY_BUDGET sets the bytes per device). On several processes (`ppage-jax launch
-n N -- sweep ...`, or --coordinator/--num-processes/--process-id) the runs are split over
every process's devices and only process 0 writes the output directory (docs/scaling.md)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from ppage_jax import distributed
from ppage_jax.artifacts import DirectoryLock, OutputError, prepare_output_dir
from ppage_jax.cli.args import (
    EXIT_BAD_INPUT,
    add_import_argument,
    add_output_arguments,
    add_set_argument,
    flags_given,
    import_flags,
    import_user_modules,
    positive_int,
)
from ppage_jax.train.run.interrupt import EXIT_INTERRUPTED, StopRequest

MULTI_PROCESS = True
# MEMORY_BUDGET_ENV of ppage_jax.analysis.batch.program and LAYOUTS of
# ppage_jax.analysis.sweep.plan, written here so that the parser loads no JAX
# (tests/cli/test_cli_imports.py checks that they agree).
MEMORY_BUDGET_ENV = "PPAGE_JAX_MEMORY_BUDGET"
LAYOUTS = ("vmap", "sequential")


def byte_count(text: str) -> int:
    """argparse type: a byte count such as 512M (see ``program.parse_bytes``; read when the
    flag is given)."""
    from ppage_jax.analysis.batch.program import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sweep",
        metavar="SWEEP.yaml",
        nargs="?",
        default=None,
        help="sweep file (default: configs/ablation/sweep.yaml, PPAGE's four-condition ablation)",
    )
    add_set_argument(
        parser,
        "override a config key of every arm, e.g. --set "
        "experiment.total_timesteps=100000 (value read as YAML)",
    )
    parser.add_argument("--seeds", type=positive_int, default=None, help="seeds per arm")
    parser.add_argument(
        "--eval-episodes",
        type=positive_int,
        default=None,
        metavar="N",
        help="held-out evaluation episodes per run (replaces sweep.eval.episodes; with "
        "--seeds, shrinks a smoke sweep)",
    )
    parser.add_argument(
        "--arms",
        default=None,
        metavar="A,B",
        help="run only these arms (the baseline arm is always kept)",
    )
    parser.add_argument(
        "--output",
        default=None,
        metavar="DIR",
        help="output directory (default: the sweep's output_dir)",
    )
    parser.add_argument(
        "--chunk-size",
        type=positive_int,
        default=None,
        help="runs per compiled call (default: as many as fit the memory budget)",
    )
    parser.add_argument(
        "--memory-budget",
        type=byte_count,
        default=None,
        metavar="BYTES",
        help=f"bytes one device's share of the compiled sweep may take, e.g. 512M or 8G, when "
        f"sizing the chunks (default: {MEMORY_BUDGET_ENV}, else 70 %% of the device's memory)",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=None,
        help="train a chunk as one vmapped program, or run after run in a program compiled "
        "for one run (default: vmap; a resumed sweep keeps its own)",
    )
    parser.add_argument(
        "--resume",
        metavar="OUT_DIR",
        default=None,
        help="continue the interrupted sweep in OUT_DIR (its sweep file, "
        "overrides and arms are read from OUT_DIR/manifest.json)",
    )
    add_output_arguments(parser, "replace the sweep already in the output directory")
    add_import_argument(parser)
    distributed.add_arguments(parser)


def _source(args: argparse.Namespace) -> dict:
    """The sweep file, overrides and arms of this command line (recorded for --resume)."""
    from ppage_jax.analysis.sweep.spec import default_sweep_file
    from ppage_jax.config import parse_override

    overrides: dict = {}
    if args.overrides:
        overrides["set"] = dict(parse_override(text) for text in args.overrides)
    if args.seeds is not None:
        overrides["seeds"] = args.seeds
    if args.eval_episodes is not None:
        overrides["eval"] = {"episodes": args.eval_episodes}  # merged into the file's eval
    if args.chunk_size is not None:
        overrides["chunk_size"] = args.chunk_size
    path = args.sweep if args.sweep is not None else default_sweep_file()
    return {
        "sweep": str(Path(path).resolve()) if path is not None else None,
        "overrides": overrides,
        "arms": args.arms.split(",") if args.arms else None,
    }


def _resumed_source(args: argparse.Namespace) -> dict:
    given = flags_given(
        [
            ("SWEEP.yaml", args.sweep),
            ("--set", args.overrides),
            ("--seeds", args.seeds),
            ("--eval-episodes", args.eval_episodes),
            ("--arms", args.arms),
            ("--output", args.output),
            ("--chunk-size", args.chunk_size),
            ("--memory-budget", args.memory_budget),
            ("--layout", args.layout),
            ("--overwrite", args.overwrite),
        ]
    )
    if given:
        raise OutputError(
            f"--resume continues the sweep recorded in {args.resume}; drop {', '.join(given)}"
        )
    from ppage_jax.analysis.sweep.writer import read_manifest

    source = read_manifest(args.resume).get("source")
    if not isinstance(source, dict):
        raise OutputError(
            f"{args.resume}: its manifest does not say how the sweep was "
            f"started; resume it from Python with run_sweep(spec, resume=True)"
        )
    return source


def _shared_resumed_source(args: argparse.Namespace) -> dict:
    """:func:`_resumed_source` as process 0 reads it, on every process (only process 0
    needs to see the output directory); its refusal on every process."""
    found = None
    if distributed.is_writer():
        try:
            found = {"source": _resumed_source(args)}
        except OutputError as err:
            found = {"error": str(err)}
    found = distributed.share(found)
    if "error" in found:
        raise OutputError(found["error"])
    return found["source"]


def _scenario_summary(summary: dict, imports: list[str]) -> int:
    """Print a sweep with scenarios' outcome (as :func:`main` does for one sweep);
    ``imports`` are the --import values the resume command gives again."""
    out = summary["output_dir"]
    if summary["stopped"]:
        print(
            f"interrupted: kept the finished chunks in {out}; resume with: ppage-jax sweep "
            f"--resume {out}{import_flags(imports)}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    runs = sum(len(s["runs"]) for s in summary["scenarios"].values())
    print(
        f"{runs} runs in {len(summary['scenarios'])} scenarios, {summary['seconds']:.1f} s; "
        f"wrote {out}/<scenario>/ and {out}/report.md"
    )
    print(Path(summary["report"]).read_text())
    return 0


def main(args: argparse.Namespace) -> int:
    if args.chunk_size is not None and args.memory_budget is not None:
        print(
            "ppage-jax sweep: --chunk-size fixes the chunk and --memory-budget sizes it; "
            "pass one of them",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    distributed.initialize_from_args(args)  # before any JAX work
    from ppage_jax.analysis.batch.program import memory_budget
    from ppage_jax.analysis.sweep.run import run_sweep
    from ppage_jax.analysis.sweep.spec import ScenarioSweep, load_sweep

    try:
        memory_budget(args.memory_budget)  # a bad PPAGE_JAX_MEMORY_BUDGET fails now
    except ValueError as err:
        print(f"ppage-jax sweep: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    import_user_modules(args.imports)  # before the sweep's configs name their terms
    lead = distributed.is_writer()
    source = _shared_resumed_source(args) if args.resume else _source(args)
    overrides = dict(source["overrides"])
    output = args.resume or args.output
    if output is not None:
        overrides["output_dir"] = output
    spec = load_sweep(source["sweep"], overrides, arms=source["arms"])
    scenarios = isinstance(spec, ScenarioSweep)
    if lead:
        where = (
            f", {len(spec.scenarios)} scenarios ({', '.join(spec.scenarios)})" if scenarios else ""
        )
        print(
            f"sweep {spec.path}: {len(spec.arms)} arms x {spec.seeds} seeds{where}, terms "
            f"{list(spec.terms)}, baseline {', '.join(spec.baselines or (spec.baseline,))}",
            file=sys.stderr,
        )
    # one writer per sweep directory: a second one is refused, naming this one's PID
    lock = (
        DirectoryLock(prepare_output_dir(spec.output_dir, "sweep directory"), "sweep directory")
        if lead
        else contextlib.nullcontext()
    )
    with (
        lock,
        StopRequest("stopping after the current chunk (Ctrl-C again to quit at once)") as stop,
    ):
        options: dict[str, Any] = dict(
            progress=not args.no_progress,
            loggers=args.logger,
            resume=args.resume is not None,
            overwrite=args.overwrite,
            should_stop=stop,
            source=source,
            memory_budget_bytes=args.memory_budget,
            layout=args.layout,
        )
        summary = run_sweep(spec, **options)
    out = summary["output_dir"]
    if not lead:  # process 0 reports
        return EXIT_INTERRUPTED if summary["stopped"] else 0
    if scenarios:
        return _scenario_summary(summary, args.imports)
    if summary["stopped"]:
        done = sum(1 for _ in summary["results"])
        print(
            f"interrupted: kept {summary['chunks']} finished chunk(s) ({done} of "
            f"{len(summary['runs'])} runs) in {out}; resume with: ppage-jax sweep --resume "
            f"{out}{import_flags(args.imports)}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print(
        f"{len(summary['runs'])} runs in {summary['seconds']:.1f} s "
        f"({summary['compile_seconds']:.1f} s compiling, {summary['chunks']} chunk(s) of "
        f"{summary['chunk_size']}, {summary['chunks'] - summary['chunks_run']} resumed, "
        f"{summary['layout']} layout); "
        f"wrote {out}/results.csv, curves.csv, report.md"
    )
    print(Path(summary["report"]).read_text())
    return 0
