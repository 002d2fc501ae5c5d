"""Env-steps/s and bytes per environment against grid size (10..1000), agent count (2..256)
and batch size (1..65536), per observation builder, plus PPAGE's showcase settings: the same
code as `ppage-jax bench --scaling` (ppage_jax/bench/scaling.py), writing the plot and tables
shown in docs/scaling.md.

    python benchmarks/scaling.py                                  # everything (~10 min, 2 cores)
    python benchmarks/scaling.py --axes size --builders grid,local_only
    python benchmarks/scaling.py --axes agents --plot /tmp/agents.png
"""

from __future__ import annotations

import argparse
import sys

from ppage_jax.cli import bench

if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    bench.add_arguments(parser)
    parser.set_defaults(
        scaling=True,
        repeats=3,
        plot="docs/scaling.png",
        json="benchmarks/results/scaling.json",
        markdown="benchmarks/results/scaling.md",
    )
    sys.exit(bench.main(parser.parse_args()))
