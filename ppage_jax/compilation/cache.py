"""JAX's persistent compilation cache for ppage_jax: compiled programs kept on disk, so a new
process (a rerun after a weight change, a restarted notebook) loads them instead of compiling.

Weights and hyperparameters are traced, so a changed weight reuses the same program; JAX keys
each entry by its own cache key (the program, its shapes, the compile options, the JAX
version and the device), so the cache never changes a result: a program is either loaded
exactly as it was compiled or compiled again.

- The command line turns it on by default; ``--no-compile-cache`` or
  ``PPAGE_JAX_COMPILE_CACHE=0`` turns it off, ``PPAGE_JAX_COMPILE_CACHE=1`` keeps the default
  place and ``PPAGE_JAX_COMPILE_CACHE=/some/dir`` moves it (:func:`cache_setting`).
- From Python it is opt-in: :func:`enable_compile_cache` (``pj.enable_compile_cache()``).
- It lives in ``$XDG_CACHE_HOME/ppage_jax/jax`` (``~/.cache/ppage_jax/jax`` without the
  variable) and is capped at :data:`MAX_BYTES` with least-recently-used eviction (JAX's
  ``jax_compilation_cache_max_size``). Programs that compile in under
  :data:`MIN_COMPILE_SECONDS` are not written (they cost less to compile than to keep).
- A directory that cannot be made or written gives one warning line and the work goes on
  without the cache; an unreadable or corrupt entry gives JAX's one warning and is compiled
  again; a full disk while an entry is written the same.
- ``ppage-jax cache info`` shows its place and size, ``ppage-jax cache clear`` empties it,
  the program store (:mod:`ppage_jax.compilation.programs`, in its ``programs/``) included.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ENV_VAR = "PPAGE_JAX_COMPILE_CACHE"
MAX_BYTES = 2 * 1024**3  # the cap: least-recently-used entries are evicted beyond it
MIN_COMPILE_SECONDS = 0.25  # programs faster to compile than this are not kept

_enabled: Path | None = None


class CacheSettingError(ValueError):
    """``PPAGE_JAX_COMPILE_CACHE`` holds something other than 0, 1 or a path."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/ppage_jax/jax``, else ``~/.cache/ppage_jax/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ppage_jax" / "jax"


def cache_setting(value: str | None = None) -> Path | None:
    """Where the command line keeps the cache under ``PPAGE_JAX_COMPILE_CACHE`` (``value``,
    default: the environment's): unset, empty or ``1`` the default place, ``0`` nowhere
    (None), a path (holding a ``/`` or starting with ``~`` or ``.``) that directory.
    Anything else raises :class:`CacheSettingError` naming what is allowed."""
    value = os.environ.get(ENV_VAR) if value is None else value
    if value is None or value.strip() in ("", "1"):
        return default_cache_dir()
    value = value.strip()
    if value == "0":
        return None
    if "/" in value or value.startswith(("~", ".")):
        return Path(value).expanduser()
    raise CacheSettingError(
        f"{ENV_VAR}={value!r} is not allowed: use 0 (no compile cache), 1 (the default place, "
        f"{default_cache_dir()}) or a directory path (e.g. ~/.cache/ppage_jax/jax)"
    )


def _writable(path: Path) -> str | None:
    """None when ``path`` is (or can be made) a directory this process writes into, else why
    not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as err:
        return err.strerror or str(err)
    return None


def enable_compile_cache(
    path: str | os.PathLike | None = None,
    max_bytes: int = MAX_BYTES,
    min_compile_seconds: float = MIN_COMPILE_SECONDS,
) -> Path | None:
    """Turn on JAX's persistent compilation cache in ``path`` (default
    :func:`default_cache_dir`), capped at ``max_bytes`` with least-recently-used eviction,
    for programs that take at least ``min_compile_seconds`` to compile.
    Returns the directory, or None (with one warning line on stderr) when it cannot be
    written; the work then goes on compiling as usual. Call it before the first compile of
    the programs it should keep (at the top of a notebook)."""
    global _enabled
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    where = Path(path).expanduser() if path is not None else default_cache_dir()
    why = _writable(where)
    if why is not None:
        print(
            f"warning: compile cache {where} cannot be written ({why}); compiling without it",
            file=sys.stderr,
        )
        return None
    jax.config.update("jax_compilation_cache_dir", str(where))
    jax.config.update("jax_compilation_cache_max_size", int(max_bytes))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()  # take the new place even after an earlier compile
    _enabled = where
    return where


def disable_compile_cache() -> None:
    """Turn the persistent cache off again (programs compile as usual)."""
    global _enabled
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_compilation_cache_dir", None)
    compilation_cache.reset_cache()
    _enabled = None


def enabled_cache_dir() -> Path | None:
    """The directory :func:`enable_compile_cache` turned on in this process, or None."""
    return _enabled


def cache_info(path: str | os.PathLike | None = None) -> dict:
    """``{"path", "exists", "entries", "bytes"}`` of the cache directory (default place)."""
    where = Path(path).expanduser() if path is not None else default_cache_dir()
    files = [p for p in where.rglob("*") if p.is_file()] if where.is_dir() else []
    entries = [p for p in files if not p.name.startswith(".")]
    return {
        "path": str(where),
        "exists": where.is_dir(),
        "entries": len(entries),
        "bytes": sum(p.stat().st_size for p in files),
    }


def clear_cache(path: str | os.PathLike | None = None) -> int:
    """Delete every entry of the cache directory (default place); returns the bytes freed.
    A missing directory is a no-op (0)."""
    where = Path(path).expanduser() if path is not None else default_cache_dir()
    if not where.is_dir():
        return 0
    freed = cache_info(where)["bytes"]
    for child in where.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    return freed
