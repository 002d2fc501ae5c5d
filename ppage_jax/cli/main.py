"""`ppage-jax`: the command-line entry point. Each subcommand lives in its own module."""
from __future__ import annotations

import argparse
import importlib
import sys

from ppage_jax.config import ConfigError

# subcommand -> module exposing `add_arguments(parser)` and `main(args) -> int`.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("ppage_jax.cli.run", "train the configured algorithm and evaluate it (the main job)"),
    "evaluate": ("ppage_jax.cli.evaluate", "evaluate a run directory's checkpoint"),
    "render": ("ppage_jax.cli.render", "write an animated GIF of one episode"),
    "audit": ("ppage_jax.cli.audit", "audit a reward design with baseline policies"),
    "sweep": ("ppage_jax.cli.sweep", "run a reward-ablation sweep (arms x seeds)"),
    "bench": ("ppage_jax.cli.bench", "measure throughput (env-steps/s) against peers"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ppage-jax",
        description="Vectorized JAX predator-prey gridworld (PPAGE semantics).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = importlib.import_module(module)
        sub_parser = sub.add_parser(name, help=help_text, description=command.__doc__)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(_module=command)
    return parser


def add_config_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """The CONFIG_DIR positional and repeatable ``--set key=value`` overrides."""
    parser.add_argument("config", metavar="CONFIG_DIR", nargs=None if required else "?",
                        default=None if required else "configs/default",
                        help="config directory in PPAGE's layout (env.yaml, agents.yaml, ...)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a config key, e.g. --set env.size=12 (value read as YAML)")


def load_cli_config(args: argparse.Namespace):
    """Load ``args.config`` with the ``--set`` overrides applied."""
    from ppage_jax.config import load_config, parse_override

    overrides = dict(parse_override(text) for text in args.overrides)
    return load_config(args.config, overrides)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._module.main(args) or 0)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
