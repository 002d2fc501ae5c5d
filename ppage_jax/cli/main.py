"""`ppage-jax`: the command-line entry point. Each subcommand lives in its own module.

Building the parser imports every subcommand module, so each keeps only argparse and light
modules at its top level and imports JAX, the learners and the pictures inside its ``main``:
``--help`` and usage errors load none of them, and a config error is reported before they
load (tests/cli/test_cli_imports.py counts the modules).

Exit status: 0 success; 1 training diverged or an I/O error during the work; 2 bad input
(command line, config, output path, checkpoint), reported in one line before long work
starts; 130 interrupted (Ctrl-C). A subcommand may add its own (``run --strict``: 3)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Iterator

from ppage_jax.cli.args import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_IO,
    OneLineParser,
    UsageError,
)

# subcommand -> module exposing `add_arguments(parser)` and `main(args) -> int`.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("ppage_jax.cli.run", "train the configured algorithm and evaluate it (the main job)"),
    "evaluate": ("ppage_jax.cli.evaluate", "evaluate a run directory's checkpoint"),
    "render": ("ppage_jax.cli.render", "write one episode as a GIF or an HTML inspector page"),
    "audit": ("ppage_jax.cli.audit", "audit a reward design with baseline policies"),
    "sweep": ("ppage_jax.cli.sweep", "run a reward-ablation sweep (arms x seeds)"),
    "search": (
        "ppage_jax.cli.search",
        "search reward weights (evolution strategies, random, PBT); compare strategies",
    ),
    "bench": ("ppage_jax.cli.bench", "measure throughput (env-steps/s) against peers"),
    "launch": ("ppage_jax.cli.launch", "start N local processes of a subcommand (distributed)"),
    "convert": ("ppage_jax.cli.convert", "write a PPAGE config directory in the strict form"),
    "crossplay": ("ppage_jax.cli.crossplay", "evaluate trained predators against trained prey"),
    "cache": ("ppage_jax.cli.cache", "show or clear the persistent compile cache"),
    "monitor": ("ppage_jax.cli.monitor", "rerun the reward-hacking detectors on saved curves"),
}
# Commands that never turn the compile cache on: they compile nothing, start other commands
# (each turns on its own), or measure compile times (bench: a warm cache would hide them).
NO_COMPILE = ("cache", "convert", "launch", "bench", "monitor")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ppage-jax", description="Vectorized JAX predator-prey gridworld (PPAGE semantics)."
    )
    from ppage_jax.defaults import VERSION

    parser.add_argument("--version", action="version", version=f"ppage-jax {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = importlib.import_module(module)
        sub_parser = sub.add_parser(name, help=help_text, description=command.__doc__)
        command.add_arguments(sub_parser)
        if name not in NO_COMPILE:
            sub_parser.add_argument(
                "--no-compile-cache",
                dest="compile_cache",
                action="store_false",
                help="compile every program afresh (default: keep compiled programs in the "
                "persistent cache, PPAGE_JAX_COMPILE_CACHE)",
            )
        sub_parser.set_defaults(_module=command)
    multi_process = tuple(
        name
        for name, (module, _) in COMMANDS.items()
        if getattr(importlib.import_module(module), "MULTI_PROCESS", False)
    )
    parser.set_defaults(_multi_process=multi_process)  # what `launch` may start
    return parser


def main(argv: list[str] | None = None) -> int:
    from ppage_jax.artifacts import OutputError

    args = build_parser().parse_args(argv)
    _one_line_notices()
    try:
        start = _compile_cache_start() if getattr(args, "compile_cache", False) else None
        with _after_import("jax", start):  # the cache starts when JAX loads, if it does
            return int(args._module.main(args) or 0)
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
    except ValueError as err:
        if not _is_config_error(err):
            raise
        print(f"config error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _is_config_error(err: BaseException) -> bool:
    """``err`` is a :class:`ppage_jax.config.ConfigError`: told without importing the config
    package (and NumPy with it) when nothing has loaded it, for then nothing raised one."""
    fields = sys.modules.get("ppage_jax.config.fields")
    return fields is not None and isinstance(err, fields.ConfigError)


def _compile_cache_start() -> Callable[[], object] | None:
    """What turns the persistent compile cache on where PPAGE_JAX_COMPILE_CACHE says
    (default: on), or None. A bad setting is a :class:`UsageError` now; the cache itself is
    turned on when JAX loads (:func:`_after_import`), so a command that stops at bad input
    loads no JAX and touches no cache directory. A cache the user gave JAX itself
    (JAX_COMPILATION_CACHE_DIR) is left as it is unless PPAGE_JAX_COMPILE_CACHE is set too."""
    import os

    from ppage_jax.compilation.cache import (
        ENV_VAR,
        CacheSettingError,
        cache_setting,
        enable_compile_cache,
    )

    if ENV_VAR not in os.environ and os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    try:
        where = cache_setting()
    except CacheSettingError as err:
        raise UsageError(str(err)) from None
    if where is None:
        return None
    return lambda: enable_compile_cache(where)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``callback`` right after the module ``name`` has been executed (the first
    import of it in this process), then leaves ``sys.meta_path``."""

    def __init__(self, name: str, callback: Callable[[], object]) -> None:
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None:
            return spec
        execute = loader.exec_module

        def exec_module(module) -> None:
            execute(module)
            self.callback()

        loader.exec_module = exec_module  # this module's own loader instance
        return spec


@contextlib.contextmanager
def _after_import(name: str, callback: Callable[[], object] | None) -> Iterator[None]:
    """Within the block, ``callback()`` runs once the module ``name`` is imported (at once if
    it already is); nothing runs if the block never imports it. None: nothing to run."""
    if callback is None:
        yield
        return
    if name in sys.modules:
        callback()
        yield
        return
    hook = _AfterImport(name, callback)
    sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)


if __name__ == "__main__":
    sys.exit(main())


def _one_line_notices() -> None:
    """Print each config notice as one ``notice: ...`` line, not as a Python warning with its
    source line; other warnings keep their format (formatting only: a recorder such as
    ``pytest.warns`` still records them)."""
    import warnings

    from ppage_jax.config.fields import ConfigNotice

    original = warnings.formatwarning
    if getattr(original, "one_line_notices", False):
        return

    def formatwarning(message, category, filename, lineno, line=None):
        if issubclass(category, ConfigNotice):
            return f"notice: {message}\n"
        return original(message, category, filename, lineno, line)

    formatwarning.one_line_notices = True  # type: ignore[attr-defined]
    warnings.formatwarning = formatwarning
