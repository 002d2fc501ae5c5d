"""argparse ``type=`` validators shared by the subcommands: a bad value is a one-line usage
error naming the flag, the value and what is allowed, raised while the command line is
parsed (before any work starts)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from ppage_jax.artifacts import OutputError, check_output_file

INT32_MAX = 2**31 - 1


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
