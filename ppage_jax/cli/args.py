"""What the subcommands share: exit statuses, the one-line parser, the config arguments, and
argparse ``type=`` validators. A bad value is a one-line usage error naming the flag, the
value and what is allowed, raised while the command line is parsed (before any work
starts)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from ppage_jax.artifacts import OutputError, check_output_file

INT32_MAX = 2**31 - 1

EXIT_DIVERGED = 1
EXIT_IO = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (the flag, the value, what is allowed), exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class UsageError(Exception):
    """A bad flag value a subcommand finds after parsing (a combination of flags, a name
    checked against a registry): its one-line message goes to stderr, exit status 2, as the
    parser's own usage errors."""


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def int_at_least(low: int, high: int = INT32_MAX) -> Callable[[str], int]:
    """An integer in ``[low, high]`` (``high`` defaults to the int32 limit)."""

    def parse(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            allowed = f">= {low}" if high == INT32_MAX else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"must be an integer {allowed}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)
seed_number = int_at_least(0)
port_number = int_at_least(1, 65535)


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def float_in(low: float, high: float) -> Callable[[str], float]:
    """A finite number in ``[low, high]``."""

    def parse(text: str) -> float:
        value = positive_float(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a finite number in [{low:g}, {high:g}], got {text!r}"
            )
        return value

    parse.__name__ = f"number in [{low:g}, {high:g}]"
    return parse


def output_file(text: str) -> str:
    """A file path to write later: not a directory, in an existing writable directory."""
    try:
        check_output_file(text)
    except OutputError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_set_argument(
    parser: argparse.ArgumentParser,
    help_text: str = "override a config key, e.g. --set env.size=12 (value read as YAML)",
) -> None:
    """The repeatable ``--set key=value`` config override (into ``args.overrides``)."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_text
    )


def add_config_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """The CONFIG_DIR positional and repeatable ``--set key=value`` overrides."""
    parser.add_argument(
        "config",
        metavar="CONFIG_DIR",
        nargs=None if required else "?",
        default=None if required else "configs/default",
        help="config directory in PPAGE's layout (env.yaml, agents.yaml, ...)",
    )
    add_set_argument(parser)
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
