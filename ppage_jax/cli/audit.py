"""Audit a reward design with baseline policies before training on it: per policy pair, the
discounted per-term return per role, episode length, capture rate and how episodes ended,
plus flags (dead or dominant terms, ordering violations, shaping share, non-potential shaping,
early-termination and stalling incentives). `--strict` exits 1 when anything is flagged."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ppage_jax.artifacts import write_json
from ppage_jax.cli.args import (
    add_config_arguments,
    add_import_argument,
    import_user_modules,
    load_cli_config,
    output_file,
    positive_int,
    seed_number,
)
from ppage_jax.defaults import AUDIT_SEED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    add_import_argument(parser)
    parser.add_argument(
        "--episodes",
        type=positive_int,
        default=256,
        help="episodes per policy pair (one per held-out seed; default 256)",
    )
    parser.add_argument(
        "--seed",
        type=seed_number,
        default=AUDIT_SEED,
        help=f"first seed of the held-out block (default {AUDIT_SEED})",
    )
    parser.add_argument(
        "--policies",
        default=None,
        metavar="PRED/PREY,...",
        help="policy pairs, e.g. chase/evade,random/random (default: all of "
        "noop|random|chase x noop|random|evade)",
    )
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="what to print on stdout (default table)",
    )
    parser.add_argument(
        "--json",
        dest="json_path",
        type=output_file,
        default=None,
        metavar="FILE",
        help="also write the full report as JSON to FILE",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 when anything is flagged"
    )


def main(args: argparse.Namespace) -> int:
    import_user_modules(args.imports)
    config = load_cli_config(args)
    from ppage_jax.analysis.audit import (
        AuditSettings,
        audit_rewards,
        format_audit_report,
        parse_policy_pairs,
    )
    from ppage_jax.env import make

    try:
        policies: dict[str, Any] = (
            {"policies": parse_policy_pairs(args.policies)} if args.policies else {}
        )
        settings = AuditSettings(episodes=args.episodes, seed=args.seed, **policies)
    except ValueError as err:
        print(f"audit: {err}", file=sys.stderr)
        return 2
    env = make(config)
    try:
        report = audit_rewards(env, settings=settings, config=config)
    except ValueError as err:
        print(f"audit: {err}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(format_audit_report(report))
    if args.json_path:
        write_json(args.json_path, report, indent=2)
    return 1 if args.strict and report["flags"] else 0
