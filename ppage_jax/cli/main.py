"""`ppage-jax`: the command-line entry point. Each subcommand lives in its own module.

Exit status: 0 success; 1 training diverged or an I/O error during the work; 2 bad input
(command line, config, output path, checkpoint), reported in one line before long work
starts; 130 interrupted (Ctrl-C). A subcommand may add its own (``run --strict``: 3)."""

from __future__ import annotations

import argparse
import importlib
import sys

from ppage_jax.config import ConfigError

# subcommand -> module exposing `add_arguments(parser)` and `main(args) -> int`.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("ppage_jax.cli.run", "train the configured algorithm and evaluate it (the main job)"),
    "evaluate": ("ppage_jax.cli.evaluate", "evaluate a run directory's checkpoint"),
    "render": ("ppage_jax.cli.render", "write one episode as a GIF or an HTML inspector page"),
    "audit": ("ppage_jax.cli.audit", "audit a reward design with baseline policies"),
    "sweep": ("ppage_jax.cli.sweep", "run a reward-ablation sweep (arms x seeds)"),
    "search": ("ppage_jax.cli.search", "search reward weights with an evolution strategy"),
    "bench": ("ppage_jax.cli.bench", "measure throughput (env-steps/s) against peers"),
    "launch": ("ppage_jax.cli.launch", "start N local processes of a subcommand (distributed)"),
    "convert": ("ppage_jax.cli.convert", "write a PPAGE config directory in the strict form"),
    "crossplay": ("ppage_jax.cli.crossplay", "evaluate trained predators against trained prey"),
}


EXIT_DIVERGED = 1
EXIT_IO = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (the flag, the value, what is allowed), exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ppage-jax", description="Vectorized JAX predator-prey gridworld (PPAGE semantics)."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = importlib.import_module(module)
        sub_parser = sub.add_parser(name, help=help_text, description=command.__doc__)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(_module=command)
    return parser


def add_config_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """The CONFIG_DIR positional and repeatable ``--set key=value`` overrides."""
    parser.add_argument(
        "config",
        metavar="CONFIG_DIR",
        nargs=None if required else "?",
        default=None if required else "configs/default",
        help="config directory in PPAGE's layout (env.yaml, agents.yaml, ...)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set env.size=12 (value read as YAML)",
    )
    parser.add_argument(
        "--experiment",
        metavar="FILE",
        default=None,
        help="experiment file of CONFIG_DIR, e.g. experiment_dqn.yaml (default: "
        "experiment.yaml, or the directory's only experiment file)",
    )


def load_cli_config(args: argparse.Namespace):
    """Load ``args.config`` with the ``--set`` overrides applied."""
    from ppage_jax.config import load_config, parse_override

    overrides = dict(parse_override(text) for text in args.overrides)
    return load_config(args.config, overrides, experiment=getattr(args, "experiment", None))


def main(argv: list[str] | None = None) -> int:
    from ppage_jax.artifacts import OutputError
    from ppage_jax.cli.args import UsageError

    args = build_parser().parse_args(argv)
    try:
        return int(args._module.main(args) or 0)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UsageError as err:
        print(err, file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as err:  # a disk that fills up or goes away during the work
        where = f" {err.filename}" if err.filename else ""
        print(f"error: I/O error{where}: {err.strerror or err}", file=sys.stderr)
        return EXIT_IO


if __name__ == "__main__":
    sys.exit(main())
