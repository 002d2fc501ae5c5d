"""`ppage-jax`: the command-line entry point. Each subcommand lives in its own module.

Exit status: 0 success; 1 training diverged or an I/O error during the work; 2 bad input
(command line, config, output path, checkpoint), reported in one line before long work
starts; 130 interrupted (Ctrl-C). A subcommand may add its own (``run --strict``: 3)."""

from __future__ import annotations

import argparse
import importlib
import sys

from ppage_jax.cli.args import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_IO,
    OneLineParser,
    UsageError,
)
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
    try:
        if getattr(args, "compile_cache", False):
            _start_compile_cache()
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


def _start_compile_cache() -> None:
    """The persistent compile cache where PPAGE_JAX_COMPILE_CACHE says (default: on). A cache
    the user gave JAX itself (JAX_COMPILATION_CACHE_DIR) is left as it is unless
    PPAGE_JAX_COMPILE_CACHE is set too."""
    import os

    from ppage_jax.compilation.cache import (
        ENV_VAR,
        CacheSettingError,
        cache_setting,
        enable_compile_cache,
    )

    if ENV_VAR not in os.environ and os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    try:
        where = cache_setting()
    except CacheSettingError as err:
        raise UsageError(str(err)) from None
    if where is not None:
        enable_compile_cache(where)


if __name__ == "__main__":
    sys.exit(main())
