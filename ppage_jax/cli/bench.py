"""Measure throughput: random-policy rollouts of each shipped config under jit(vmap) with the
batched auto-reset, across batch sizes (env-steps/s, agent-steps/s, compile time, bytes per
environment state), the NumPy oracle in the same run, the time from `make` to the first
finished step, and, when the `bench` extra is installed, Jumanji LevelBasedForaging and
JaxMARL MPE simple_tag at one batch size, printed as ratios."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ppage_jax.bench import core as benchmark


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configs", nargs="+", metavar="CONFIG_DIR", default=None,
                        help="config directories (default: every directory under configs/)")
    parser.add_argument("--batch-sizes", type=_ints, default=[1, 16, 256, 4096, 65536],
                        metavar="N,N,...", help="batch sizes (default 1,16,256,4096,65536)")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per run (default: about 1e6 env-steps, 20..1000)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed runs per figure; the best is kept (default 5)")
    parser.add_argument("--peer-batch", type=int, default=4096,
                        help="batch size of the peer comparison and first-step time")
    parser.add_argument("--no-peers", action="store_true", help="skip the peer comparison")
    parser.add_argument("--no-oracle", action="store_true", help="skip the NumPy oracle")
    parser.add_argument("--oracle-seconds", type=float, default=2.0,
                        help="how long to step the NumPy oracle per config (default 2)")
    parser.add_argument("--no-first-step", action="store_true",
                        help="skip the make -> first step timing (it runs a subprocess)")
    parser.add_argument("--json", metavar="PATH", default=None, help="write the report as JSON")
    parser.add_argument("--plot", metavar="PATH", default=None,
                        help="write the batch-scaling plot (PNG)")
    parser.add_argument("--markdown", metavar="PATH", default=None,
                        help="write the report's Markdown tables")


def main(args: argparse.Namespace) -> int:
    configs = args.configs if args.configs is not None else benchmark.shipped_configs()
    if not configs:
        raise SystemExit("ppage-jax bench: no config directories under ./configs; "
                         "pass --configs CONFIG_DIR ...")
    for config in configs:
        if not Path(config).exists():
            raise SystemExit(f"ppage-jax bench: config directory {config!r} does not exist")
    if args.steps is not None and args.steps < 1:
        raise SystemExit(f"ppage-jax bench: --steps must be >= 1, got {args.steps}")
    print(json.dumps(benchmark.device_info()))
    print(f"{'name':<36} {'mode':<14} {'batch':>7} {'env-steps/s':>14} {'agent-steps/s':>15} "
          f"{'compile s':>9}")
    report = benchmark.run_benchmark(
        configs, args.batch_sizes, args.steps, repeats=args.repeats,
        oracle=not args.no_oracle, oracle_seconds=args.oracle_seconds,
        peers=not args.no_peers, peer_batch=args.peer_batch,
        first_step=not args.no_first_step)
    text = benchmark.format_report(report)
    print()
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text + "\n")
    if args.plot:
        print(f"plot: {benchmark.plot_scaling(report, args.plot)}")
    return 0
