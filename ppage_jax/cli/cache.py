"""`ppage-jax cache info|clear`: where the persistent compile cache is and how big, or empty
it (the program store in its programs/ folder included). The place is
PPAGE_JAX_COMPILE_CACHE's (a path), else $XDG_CACHE_HOME/ppage_jax/jax; `--path DIR` names
another. Clearing a missing cache is a no-op."""

from __future__ import annotations

import argparse

from ppage_jax.cli.args import UsageError
from ppage_jax.compilation.cache import (
    MAX_BYTES,
    CacheSettingError,
    cache_info,
    cache_setting,
    clear_cache,
    default_cache_dir,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("info", "clear"), help="show the cache, or empty it")
    parser.add_argument("--path", default=None, metavar="DIR", help="another cache directory")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def main(args: argparse.Namespace) -> int:
    try:
        where = args.path or cache_setting() or default_cache_dir()
    except CacheSettingError as err:
        raise UsageError(str(err)) from None
    if args.action == "clear":
        freed = clear_cache(where)
        print(f"compile cache {where}: cleared ({_size(freed)} freed)")
        return 0
    info = cache_info(where)
    if not info["exists"]:
        print(f"compile cache {where}: empty (no directory yet)")
        return 0
    print(
        f"compile cache {where}: {info['entries']} entries, {_size(info['bytes'])} "
        f"(cap {_size(MAX_BYTES)}, least recently used evicted first)"
    )
    return 0
