"""Sweep layouts: a chunk trained as one vmapped program against run after run.

Runs the same sweep (default: PPAGE's four-condition ablation, `configs/ablation/sweep.yaml`,
at a reduced budget) through ``run_sweep`` with ``layout="vmap"`` and ``layout="sequential"``,
interleaved A B B A over ``--rounds`` rounds, each into its own temporary directory (audit and
baselines off, they are the same for both). Compile time and training time (the sweep's
seconds minus its compile) are reported apart, per round, with the ratio of the sequential
layout's training throughput over the vmapped one's (> 1: sequential is faster): median, min
and max over the rounds.

    python benchmarks/sweep_layouts.py                      # 4 arms x 2 seeds, 16 updates
    python benchmarks/sweep_layouts.py --seeds 8 --timesteps 524288 --rounds 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import jax
import numpy as np

from ppage_jax.analysis.sweep import load_sweep, run_sweep

LAYOUTS = ("vmap", "sequential")


def time_layout(args: argparse.Namespace, layout: str, out: Path) -> dict:
    """One sweep in ``layout``: its runs, compile seconds and training seconds."""
    overrides = {
        "seeds": args.seeds,
        "audit": False,
        "output_dir": str(out),
        "set": {"experiment.total_timesteps": args.timesteps},
    }
    spec = load_sweep(args.sweep, overrides)
    summary = run_sweep(spec, progress=False, report=False, overwrite=True, layout=layout)
    train = summary["seconds"] - summary["compile_seconds"]
    runs = len(summary["runs"])
    return {
        "layout": layout,
        "runs": runs,
        "compile_s": summary["compile_seconds"],
        "train_s": train,
        "runs_per_s": runs / train,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default="configs/ablation/sweep.yaml", help="sweep file")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per arm")
    parser.add_argument("--timesteps", type=int, default=32768, help="env steps per run")
    parser.add_argument("--rounds", type=int, default=2, help="A B B A rounds")
    parser.add_argument("--json", default=None, metavar="PATH", help="write every block here")
    args = parser.parse_args()
    device = jax.devices()[0]
    print(f"device: {device.platform} ({device.device_kind}), {jax.device_count()} device(s)")
    blocks, ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = LAYOUTS if r % 2 == 0 else LAYOUTS[::-1]
            row = {}
            for layout in order:
                row[layout] = time_layout(args, layout, Path(tmp) / layout)
                blocks.append(dict(row[layout], round=r))
                b = row[layout]
                print(
                    f"round {r} {layout:>10}: {b['runs']} runs, compile {b['compile_s']:.1f} s, "
                    f"train {b['train_s']:.1f} s ({b['runs_per_s']:.3f} runs/s)",
                    flush=True,
                )
            ratios.append(row["sequential"]["runs_per_s"] / row["vmap"]["runs_per_s"])
    print(
        f"sequential / vmap training throughput: median {np.median(ratios):.2f} "
        f"[{min(ratios):.2f}, {max(ratios):.2f}] over {len(ratios)} round(s)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"blocks": blocks, "ratios": ratios}, indent=2))


if __name__ == "__main__":
    main()
