"""What a user sees against the reference: `ppage-jax run`'s end-to-end env-steps/s (the
summary.json figure, compile included, warm compile cache) beside the PureJaxRL-structured
reference loop (``benchmarks/pjrl_ippo.py``) compiled over the same updates, each in its own
process, interleaved A B B A.

A: ``ppage-jax run CONFIG --set ...`` in a new process with the persistent compile cache (one
untimed run first fills it); its ``summary.json`` gives ``env_steps_per_second`` (end to
end), the same without the compile, ``compile_seconds`` and ``host_share``.
B: this script with ``--reference`` in a new process: the reference's whole run (``jit`` of
``make_train(tc)``) compiled first (not timed), then timed once over the same updates.
Reported: every block, and the ratio A / B per pair (> 1: ``ppage-jax run`` is faster).

    python benchmarks/run_vs_reference.py                       # configs/default, 48 updates
    python benchmarks/run_vs_reference.py --rounds 1 --set env.size=5 \\
        --set experiment.num_envs=4 --set experiment.total_timesteps=512   # does it run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# 48 updates of 256 grids x 32 turns on configs/default; 64 held-out episodes
DEFAULT_SETS = ("experiment.total_timesteps=393216", "experiment.eval.episodes=64")


def reference(config: str, sets: list[str]) -> dict:
    """B: the reference loop's env-steps/s over the config's updates (compile not timed)."""
    import jax

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pjrl_ippo import make_train

    from ppage_jax.config import load_config, parse_override
    from ppage_jax.train import make_train_config

    overrides = dict(parse_override(text) for text in sets)
    tc = make_train_config(load_config(config, overrides))
    train = jax.jit(make_train(tc))
    key = jax.random.PRNGKey(0)
    start = time.perf_counter()
    compiled = train.lower(key).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(compiled(key))
    seconds = time.perf_counter() - start
    steps = tc.num_updates * tc.env_steps_per_update
    return {
        "env_steps_per_second": steps / seconds,
        "seconds": seconds,
        "compile_seconds": compile_seconds,
        "updates": tc.num_updates,
        "device": str(jax.devices()[0]),
    }


def run_cli(config: str, sets: list[str], cache: Path) -> dict:
    """A: one `ppage-jax run` in a new process; its summary.json's timings."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run"
        cli = Path(sys.executable).parent / "ppage-jax"
        command = [str(cli), "run", config, "--out", str(out)]
        command += ["--no-progress", *(arg for s in sets for arg in ("--set", s))]
        env = {**os.environ, "PPAGE_JAX_COMPILE_CACHE": str(cache)}
        subprocess.run(command, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        summary = json.loads((out / "summary.json").read_text())
    keys = (
        "env_steps_per_second",
        "env_steps_per_second_excluding_compile",
        "compile_seconds",
        "train_seconds",
        "host_share",
    )
    return {k: summary.get(k) for k in keys}


def in_new_process(config: str, sets: list[str]) -> dict:
    command = [sys.executable, __file__, "--reference", "--config", config]
    command += [arg for s in sets for arg in ("--set", s)]
    done = subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--config", default="configs/default")
    p.add_argument("--set", dest="sets", action="append", default=None, metavar="KEY=VALUE")
    p.add_argument("--rounds", type=int, default=2, help="A B B A rounds")
    p.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = p.parse_args(argv)
    sets = list(DEFAULT_SETS) if args.sets is None else args.sets
    if args.reference:
        result = reference(args.config, sets)
        print(json.dumps(result))
        return result
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = Path(cache_dir)
        cold = run_cli(args.config, sets, cache)  # fills the cache, not a block
        print(f"cold run (fills the cache): {json.dumps(cold)}")
        blocks: list[tuple[str, dict]] = []
        for r in range(args.rounds):
            for mode in ("A", "B", "B", "A"):
                row = (
                    run_cli(args.config, sets, cache)
                    if mode == "A"
                    else in_new_process(args.config, sets)
                )
                blocks.append((mode, row))
                print(f"round {r + 1} {mode}: {json.dumps(row)}", flush=True)
    a = [row["env_steps_per_second"] for mode, row in blocks if mode == "A"]
    b = [row["env_steps_per_second"] for mode, row in blocks if mode == "B"]
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    result = {
        "config": args.config,
        "sets": sets,
        "cold": cold,
        "blocks": [{"mode": m, **row} for m, row in blocks],
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "host_share_max": max(row["host_share"] or 0.0 for m, row in blocks if m == "A"),
    }
    print(
        f"ppage-jax run end to end / reference compiled, env-steps/s: median "
        f"{result['ratio_median']:.3f} [{result['ratio_min']:.3f}, {result['ratio_max']:.3f}] "
        f"over {len(ratios)} pairs; host share at most {100 * result['host_share_max']:.1f} %"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
