"""Measure throughput: random-policy rollouts of each shipped config under jit(vmap) with the
batched auto-reset, across batch sizes (env-steps/s, agent-steps/s, compile time, bytes per
environment state), the NumPy oracle in the same run, the time from `make` to the first
finished step, and, when the `bench` extra is installed, Jumanji LevelBasedForaging and
JaxMARL MPE simple_tag at one batch size, printed as ratios.

--scaling measures env-steps/s and bytes per environment against grid size, agent count and
batch size per observation builder (plus PPAGE's showcase settings) and plots them.
--report DIR runs the whole benchmark set (a few minutes) and writes DIR/report.json,
report.md and scaling.png.

Runs on several processes (ppage-jax launch -n N -- bench ..., or the --coordinator flags):
the batch is split over every process's devices and process 0 prints and writes; the
oracle, the peers and the first-step time are then skipped (single-process figures)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ppage_jax import distributed
from ppage_jax.artifacts import write_text
from ppage_jax.cli.args import UsageError, output_file, positive_float, positive_int

# `ppage-jax launch` may start this subcommand on several processes.
MULTI_PROCESS = True
# --axes names -> the scaling module's axis names.
AXES = {"size": "grid size", "agents": "agents", "batch": "batch", "showcase": "showcase"}


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_throughput_arguments(parser)
    _add_output_arguments(parser)
    _add_scaling_arguments(parser)
    parser.add_argument(
        "--report",
        metavar="DIR",
        default=None,
        help="run the whole benchmark set (throughput by config and batch, "
        "scaling, compile times, peak device memory, training "
        "throughput per algorithm) and write DIR/report.{json,md}",
    )
    distributed.add_arguments(parser)


def _add_throughput_arguments(parser: argparse.ArgumentParser) -> None:
    """What the per-config throughput table measures: configs, batches, steps, the oracle and
    the peers."""
    parser.add_argument(
        "--configs",
        nargs="+",
        metavar="CONFIG_DIR",
        default=None,
        help="config directories (default: every directory under configs/)",
    )
    parser.add_argument(
        "--batch-sizes",
        type=_ints,
        default=None,
        metavar="N,N,...",
        help="batch sizes (default 1,16,256,4096,65536; with --scaling 1,4,16,...,65536)",
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="timed steps per run (default: about 1e6 env-steps, 20..1000)",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        help="timed runs per figure; the best is kept (default 5)",
    )
    parser.add_argument(
        "--peer-batch",
        type=positive_int,
        default=4096,
        help="batch size of the peer comparison and first-step time",
    )
    parser.add_argument("--no-peers", action="store_true", help="skip the peer comparison")
    parser.add_argument("--no-oracle", action="store_true", help="skip the NumPy oracle")
    parser.add_argument(
        "--oracle-seconds",
        type=positive_float,
        default=2.0,
        help="how long to step the NumPy oracle per config (default 2)",
    )
    parser.add_argument(
        "--no-first-step",
        action="store_true",
        help="skip the make -> first step timing (it runs a subprocess)",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the report goes besides the printed tables: JSON, the plot, Markdown."""
    parser.add_argument(
        "--json", metavar="PATH", type=output_file, default=None, help="write the report as JSON"
    )
    parser.add_argument(
        "--plot",
        metavar="PATH",
        type=output_file,
        default=None,
        help="write the batch-scaling plot (with --scaling: the scaling plot)",
    )
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        type=output_file,
        default=None,
        help="write the report's Markdown tables",
    )


def _add_scaling_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--scaling`` sweeps: grid sides, agent counts, builders and their batch."""
    scale = parser.add_argument_group("scaling (--scaling)")
    scale.add_argument(
        "--scaling",
        action="store_true",
        help="measure against grid size, agent count and batch size per "
        "observation builder instead of the per-config table",
    )
    scale.add_argument(
        "--sizes",
        type=_ints,
        default=None,
        metavar="N,N,...",
        help="grid sides (default 10,20,50,100,200,500,1000)",
    )
    scale.add_argument(
        "--agents",
        type=_ints,
        default=None,
        metavar="N,N,...",
        help="agent counts, half predators (default 2,4,...,256)",
    )
    scale.add_argument(
        "--builders",
        type=_names,
        default=None,
        metavar="NAME,...",
        help="observation builders (default: every registered builder)",
    )
    scale.add_argument(
        "--scaling-batch",
        type=positive_int,
        default=256,
        help="batch of the grid-size and agent sweeps (default 256; cut to "
        "fit the memory budget on large settings)",
    )
    scale.add_argument(
        "--no-showcases",
        action="store_true",
        help="skip PPAGE's showcase settings (3v10 on 50x50, 5v20 on 100x100)",
    )
    scale.add_argument(
        "--axes",
        type=_names,
        default=None,
        metavar="AXIS,...",
        help=f"only these sweeps, of {list(AXES)} (default: all)",
    )
    scale.add_argument(
        "--seconds",
        type=positive_float,
        default=0.2,
        help="target length of one timed run (default 0.2)",
    )


def _write(args: argparse.Namespace, report, text: str) -> None:
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_text(args.json, json.dumps(report, indent=1))
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        write_text(args.markdown, text + "\n")


def _check(args: argparse.Namespace) -> None:
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"ppage-jax bench: --steps must be >= 1, got {args.steps}")
    if args.repeats < 1:
        raise UsageError(f"ppage-jax bench: --repeats must be >= 1, got {args.repeats}")
    if args.seconds <= 0:
        raise UsageError(f"ppage-jax bench: --seconds must be > 0, got {args.seconds}")
    if args.scaling and args.report:
        raise UsageError(
            "ppage-jax bench: --scaling and --report are separate runs; pass one of them"
        )
    from ppage_jax.config import resolve_config_path

    for config in args.configs or ():
        resolve_config_path(config)  # ConfigError (one line, exit 2) for a missing one
    unknown_axes = sorted(set(args.axes or ()) - set(AXES))
    if unknown_axes:
        raise UsageError(f"ppage-jax bench: unknown --axes {unknown_axes}; known: {list(AXES)}")
    if args.builders:
        from ppage_jax.observations import observation_builders

        unknown = sorted(set(args.builders) - set(observation_builders()))
        if unknown:
            raise UsageError(
                f"ppage-jax bench: unknown --builders {unknown}; known: "
                f"{list(observation_builders())}"
            )


def main(args: argparse.Namespace) -> int:
    _check(args)
    settings = distributed.initialize_from_args(args)
    import jax

    from ppage_jax.bench import report as bench_report
    from ppage_jax.bench import scaling, throughput

    if settings.multi_process:
        sizes = (args.batch_sizes or []) + ([args.scaling_batch] if args.scaling else [])
        odd = [n for n in sizes if n % jax.device_count()]
        if odd:
            raise UsageError(
                f"ppage-jax bench: with {jax.process_count()} processes every "
                f"batch must be a multiple of the {jax.device_count()} devices; "
                f"got {odd}"
            )
    writer = distributed.is_writer()
    log = print if writer else (lambda _line: None)
    log(json.dumps({**throughput.device_info(), "processes": jax.process_count()}))
    if args.report:
        result = bench_report.run_report(
            builders=args.builders, log=log, first_step=not settings.multi_process
        )
        if writer:
            paths = bench_report.write_report(result, args.report)
            print(
                f"wrote {paths['json']}, {paths['markdown']} and {paths['plot']} "
                f"({result['seconds']:.0f} s)"
            )
        return 0
    if args.scaling:
        points = scaling.sweep_points(
            args.builders,
            sizes=args.sizes or scaling.SIZES,
            agents=args.agents or scaling.AGENTS,
            batches=args.batch_sizes or scaling.BATCHES,
            batch=args.scaling_batch,
            showcases=not args.no_showcases,
        )
        if args.axes:
            points = [p for p in points if p.axis in {AXES[a] for a in args.axes}]
        log(scaling.SCALING_HEADER)
        rows = scaling.run_scaling(points, seconds=args.seconds, repeats=args.repeats, log=log)
        if writer:
            text = scaling.format_scaling(rows)
            print()
            print(text)
            _write(args, {"device": throughput.device_info(), "scaling": rows}, text)
            if args.plot:
                print(f"plot: {scaling.plot_scaling(rows, args.plot)}")
        return 0

    configs = args.configs if args.configs is not None else throughput.shipped_configs()
    if not configs:
        raise UsageError(
            "ppage-jax bench: no config directories under ./configs; pass --configs CONFIG_DIR ..."
        )
    single = not settings.multi_process
    log(throughput.ROW_HEADER)
    report = bench_report.run_benchmark(
        configs,
        args.batch_sizes or [1, 16, 256, 4096, 65536],
        args.steps,
        repeats=args.repeats,
        oracle=single and not args.no_oracle,
        oracle_seconds=args.oracle_seconds,
        peers=single and not args.no_peers,
        peer_batch=args.peer_batch,
        first_step=single and not args.no_first_step,
        log=log,
    )
    if writer:
        text = bench_report.format_report(report)
        print()
        print(text)
        _write(args, report, text)
        if args.plot:
            print(f"plot: {bench_report.plot_batches(report, args.plot)}")
    return 0
