"""What the subcommands share: exit statuses, the one-line parser, the config arguments, the
user modules (``--import`` and the ``ppage_jax.plugins`` entry points), and argparse ``type=``
validators. A bad value is a one-line usage error naming the flag, the value and what is
allowed, raised while the command line is parsed (before any work starts)."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import math
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from ppage_jax.artifacts import OutputError, check_output_file

INT32_MAX = 2**31 - 1

EXIT_DIVERGED = 1
EXIT_IO = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

# The entry-point group of installed packages that register reward terms, potentials or
# observation builders when their module is imported (docs/rewards.md).
PLUGIN_GROUP = "ppage_jax.plugins"
# A file given to --import is imported as a module of this name prefix (plus its stem and a
# hash of its resolved path: the same file gets the same name in every process).
USER_MODULE_PREFIX = "ppage_jax_user_"


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


def add_output_arguments(parser: argparse.ArgumentParser, overwrite_help: str) -> None:
    """``--overwrite`` (help ``overwrite_help``), ``--no-progress`` and ``--logger``: the
    output flags of the commands that write a run, a sweep or a search."""
    from ppage_jax.tracking.loggers import add_logger_argument

    parser.add_argument("--overwrite", action="store_true", help=overwrite_help)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_logger_argument(parser)


def flags_given(flags: Sequence[tuple[str, object]]) -> list[str]:
    """The names of the ``(flag, value)`` pairs whose value was given (truthy): the flags
    that ``--resume``, which brings its own, refuses beside it."""
    return [flag for flag, value in flags if value]


def load_cli_config(args: argparse.Namespace):
    """Load ``args.config`` with the ``--set`` overrides applied."""
    from ppage_jax.config import load_config, parse_override

    overrides = dict(parse_override(text) for text in args.overrides)
    return load_config(args.config, overrides, experiment=getattr(args, "experiment", None))


def add_import_argument(parser: argparse.ArgumentParser) -> None:
    """The repeatable ``--import MODULE_OR_FILE`` (into ``args.imports``); the subcommand's
    ``main`` passes ``args.imports`` to :func:`import_user_modules` before reading a config."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE_OR_FILE",
        help="import a module (a dotted name on sys.path) or a .py file before the config is "
        "read, e.g. one registering your reward terms or observation builders (repeatable; "
        f"installed {PLUGIN_GROUP} entry points are loaded too)",
    )


def import_user_modules(names: Sequence[str]) -> None:
    """Register the shipped terms and builders
    (:func:`~ppage_jax.config.validation.load_registries`), load the installed plugins
    (:func:`load_plugins`), then import each of ``names`` in order
    (:func:`import_user_module`). A failure is a one-line :class:`UsageError`."""
    from ppage_jax.config.validation import load_registries

    load_registries()
    load_plugins()
    for name in names:
        import_user_module(name)


def import_flags(names: Sequence[str]) -> str:
    """The ``--import`` flags that give ``names`` again (for a resume command), or ''."""
    return "".join(f" --import {shlex.quote(name)}" for name in names)


def load_plugins(group: str = PLUGIN_GROUP) -> list[str]:
    """Import every entry point of ``group`` (its module registers terms or builders; an
    import already done costs nothing). Returns their names; a plugin that raises is a
    one-line :class:`UsageError` naming it."""
    from importlib.metadata import entry_points

    loaded = []
    for point in entry_points(group=group):
        try:
            point.load()
        except Exception as err:  # noqa: BLE001 (any failure of a plugin is reported in one line)
            raise UsageError(
                f"ppage-jax: plugin {point.name!r} ({point.value}, a {group} entry point): "
                f"{first_line(err)}"
            ) from None
        loaded.append(point.name)
    return loaded


def import_user_module(text: str) -> ModuleType:
    """Import ``text``: a file when it ends in ``.py`` or names an existing file (under a
    stable name, :func:`user_module_name`), else a module name. A missing module or file, or
    one that raises, is a one-line :class:`UsageError` naming it and the error."""
    path = Path(text)
    if text.endswith(".py") or path.is_file():
        return _import_file(text, path)
    try:
        return importlib.import_module(text)
    except Exception as err:  # noqa: BLE001 (the user's module may raise anything)
        hint = ""
        if isinstance(err, ModuleNotFoundError) and Path(f"{text}.py").is_file():
            hint = f" (to import the file, pass its path: --import {text}.py)"
        raise UsageError(f"ppage-jax: --import {text}: {first_line(err)}{hint}") from None


def user_module_name(path: Path) -> str:
    """The module name of the file ``path`` imported by --import: the prefix, its stem and
    a hash of its resolved path (stable across processes and calls)."""
    resolved = path.resolve()
    stem = re.sub(r"\W", "_", resolved.stem)
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
    return f"{USER_MODULE_PREFIX}{stem}_{digest}"


def _import_file(text: str, path: Path) -> ModuleType:
    """Execute the file ``path`` as the module :func:`user_module_name` (once: a second
    import of the same file returns the module already in ``sys.modules``)."""
    if not path.is_file():
        raise UsageError(f"ppage-jax: --import {text}: no such file")
    name = user_module_name(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path.resolve())
    if spec is None or spec.loader is None:
        raise UsageError(f"ppage-jax: --import {text}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pickle look it up
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 (the user's file may raise anything)
        del sys.modules[name]
        raise UsageError(f"ppage-jax: --import {text}: {first_line(err)}") from None
    return module


def first_line(err: BaseException) -> str:
    """``Type: message`` of an exception, its message cut to the first line."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
