"""Reload a run directory's checkpoint and evaluate it greedily on held-out seeds beside
random predators (the run's eval block unless --episodes/--seed/--max-steps say otherwise)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ppage_jax.config import load_config, parse_override
from ppage_jax.train import make_train_config
from ppage_jax.train import report
from ppage_jax.train.checkpoint import CheckpointError, load_checkpoint
from ppage_jax.train.evaluate import evaluate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by ppage-jax run")
    parser.add_argument("--episodes", type=int, default=None, help="episodes to evaluate")
    parser.add_argument("--seed", type=int, default=None, help="first seed of the eval block")
    parser.add_argument("--max-steps", type=int, default=None, help="step cap per episode")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="evaluate under a changed config (shapes must match), e.g. "
                             "--set experiment.roles.preys=evade")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def main(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    overrides = dict(parse_override(text) for text in args.overrides)
    for key, value in (("episodes", args.episodes), ("seed", args.seed),
                       ("max_steps", args.max_steps)):
        if value is not None:
            overrides[f"experiment.eval.{key}"] = value
    config = load_config(run_dir / report.CONFIG_FILE, overrides)
    tc = make_train_config(config)
    try:
        policies = load_checkpoint(run_dir / report.CHECKPOINT_FILE, tc)
    except (CheckpointError, FileNotFoundError) as err:
        print(f"cannot evaluate: {err}", file=sys.stderr)
        return 2
    ev = config["experiment"]["eval"]
    cap = ev["max_steps"] or config["env"]["termination"]["max_steps"]
    results = evaluate(tc, policies, tc.env.default_params, ev["seed"], ev["episodes"],
                       ev["max_steps"])
    if args.json:
        print(json.dumps(report._clean(results), indent=2))
        return 0
    print(f"{run_dir}: {tc.algorithm}, {ev['episodes']} episodes, seeds "
          f"[{ev['seed']}, {ev['seed'] + ev['episodes']}), greedy actions")
    print(report.summary_table(results, cap))
    print(report.TABLE_LEGEND)
    return 0
