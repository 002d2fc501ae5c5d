"""Compiled programs kept whole on disk, so that a rerun of the same config in a new process
neither traces nor lowers them.

JAX's persistent cache (:mod:`ppage_jax.compilation.cache`) saves XLA's compile, but JAX must
trace and lower a program to find its cache key, and on the default run that is most of a warm
start. A :class:`ProgramStore` keeps the compiled executable itself (JAX's
``serialize_executable``) under a key of its own, made of everything the program is built
from:

- ppage_jax's source (every ``.py`` file of the package, by content) and any other module
  loaded from outside the Python installation (``--import`` plugins, notebooks' helpers);
- the versions of Python, JAX, jaxlib, flax, optax, chex and NumPy;
- the devices (platform, kind, count), JAX's numerics flags, ``XLA_FLAGS``;
- the caller's description of the program's static part (for training: the config's hash,
  the hyperparameters, the chunk size);
- the inputs' structure, shapes, dtypes and shardings.

A program that reads files beyond its config (a trained start policy, frozen opponents) is
not stored; the caller says so. Nor is a program that JAX's persistent cache handed back
(one compiled before under another key of the store's, say after a weight change): that one
keeps JAX's cache. The store lives in the compile cache's directory
(``programs/``), is turned on and off with it and emptied by ``ppage-jax cache clear``.
Entries are written atomically with a checksum of their bytes; an unreadable or corrupt
entry gives one warning line, is deleted and the program is compiled again. A directory
that cannot be written or a full disk gives one warning line, and the run goes on with
the program it compiled. The store is capped at :data:`MAX_BYTES`, the least recently used
entries evicted first. With several processes nothing is stored (each process's program
holds only its own devices).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import os
import pickle
import platform
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import jax

from ppage_jax.compilation.cache import enabled_cache_dir

MAX_BYTES = 1024**3  # the store's cap: least recently used entries are evicted beyond it
SUBDIRECTORY = "programs"  # inside the compile cache's directory
_MAGIC = b"ppage_jax program 2\n"
_SUFFIX = ".program"
_PACKAGES = ("jax", "jaxlib", "flax", "optax", "chex", "numpy")
_FLAGS = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_numpy_dtype_promotion",
    "jax_numpy_rank_promotion",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_enable_checks",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_disable_jit",
)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"  # JAX's monitoring event
_cache_hits = 0
_listening = False


def _count_cache_hit(event: str, **_: Any) -> None:
    global _cache_hits
    if event == _CACHE_HIT_EVENT:
        _cache_hits += 1


def _compile_fresh(lowered: Any) -> tuple[Any, bool]:
    """``(compiled, fresh)``: ``lowered`` compiled, and whether XLA compiled it here rather
    than JAX loading it from its persistent cache. Only a fresh executable is stored: on the
    CPU one that JAX loaded from its cache serialises without its functions, and the copy
    fails when run."""
    global _listening
    if not _listening:
        jax.monitoring.register_event_listener(_count_cache_hit)
        _listening = True
    before = _cache_hits
    compiled = lowered.compile()
    return compiled, _cache_hits == before


def _as_is(out: Any) -> Any:
    return out


def _packed_as_is(packed: Any, args: tuple) -> Any:
    return packed


@dataclasses.dataclass(frozen=True)
class Split:
    """How a program's output is stored: ``pack(output)`` gives a structure of plain
    containers (one that pickles), ``unpack(packed, args)`` rebuilds the output from it and
    the call's arguments. The default keeps the output as it is."""

    pack: Callable[[Any], Any] = _as_is
    unpack: Callable[[Any, tuple], Any] = _packed_as_is


def same_structure_first(out: tuple) -> tuple:
    """:class:`Split` ``pack`` for ``(state, rest)`` outputs whose state has the structure of
    the first argument: the state as a tuple of leaves."""
    state, rest = out
    return _leaves(state), rest


def rebuild_first(packed: tuple, args: tuple) -> tuple:
    """:class:`Split` ``unpack`` matching :func:`same_structure_first`."""
    leaves, rest = packed
    return jax.tree.structure(args[0]).unflatten(leaves), rest


STATE_FIRST = Split(same_structure_first, rebuild_first)


def _leaves(tree: Any) -> tuple:
    return tuple(jax.tree.leaves(tree))


def known_structure(structure: Any) -> Split:
    """:class:`Split` for an output whose structure (a ``PyTreeDef``) the caller has without
    compiling, say from ``jax.eval_shape``: the leaves stored, ``structure`` rebuilt around
    them (so it may hold functions, which no stored entry can)."""
    return Split(_leaves, lambda leaves, _: structure.unflatten(leaves))


@dataclasses.dataclass(frozen=True)
class StoredProgram:
    """A compiled program over flat leaves, called with the arguments' pytrees."""

    compiled: Any  # jax.stages.Compiled of the flat program
    split: Split
    loaded: bool  # loaded whole from the store (else compiled in this process)

    def __call__(self, *args: Any) -> Any:
        return self.split.unpack(self.compiled(*jax.tree.leaves(args)), args)

    def memory_analysis(self) -> Any:
        """XLA's memory analysis of the program (as ``Compiled.memory_analysis``)."""
        return self.compiled.memory_analysis()


@functools.cache
def _installation_roots() -> tuple[str, ...]:
    """The Python installation's directories (as given and resolved), each ending in a
    separator."""
    roots = set()
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        roots.update({prefix, os.path.realpath(prefix)})
    return tuple(root.rstrip(os.sep) + os.sep for root in sorted(roots))


def _package_digest() -> str:
    """SHA-256 of ppage_jax's source files (paths and contents)."""
    root = Path(__file__).resolve().parents[1]
    return _files_digest(_stamped((str(p.relative_to(root)), str(p)) for p in root.rglob("*.py")))


def _user_modules() -> tuple[tuple[str, str], ...]:
    """``(name, file)`` of the loaded modules from outside the Python installation and
    ppage_jax (``--import`` plugins, a notebook's helpers)."""
    package = str(Path(__file__).resolve().parents[1]) + os.sep
    skip = (*_installation_roots(), package)
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py") and not path.startswith(skip):
            found.append((name, path))
    return tuple(sorted(found))


def _stamped(files: Iterable[tuple[str, str]]) -> tuple[tuple[str, str, int, int], ...]:
    """``(name, path, mtime_ns, size)`` of each file, sorted: what :func:`_files_digest`
    is remembered by, so an edited file is read again."""
    out = []
    for name, path in files:
        try:
            stat = os.stat(path)
            out.append((name, path, stat.st_mtime_ns, stat.st_size))
        except OSError:
            out.append((name, path, -1, -1))
    return tuple(sorted(out))


@functools.cache
def _files_digest(files: tuple[tuple[str, str, int, int], ...]) -> str:
    """SHA-256 of the files' names and contents."""
    digest = hashlib.sha256()
    for name, path, _, _ in files:
        try:
            digest.update(name.encode() + b"\0" + Path(path).read_bytes())
        except OSError:
            digest.update(name.encode() + b"\0(unreadable)")
    return digest.hexdigest()


@functools.cache
def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def environment_key() -> dict:
    """What every stored program depends on besides its own description and inputs."""
    devices = jax.devices()
    return {
        "source": _package_digest(),
        "user_modules": _files_digest(_stamped(_user_modules())),
        "python": platform.python_version(),
        "versions": _versions(),
        "devices": [devices[0].platform, devices[0].device_kind, len(devices)],
        "processes": jax.process_count(),
        "flags": {flag: str(getattr(jax.config, flag, None)) for flag in _FLAGS},
        "env": {v: os.environ.get(v) for v in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")},
    }


def signature(args: tuple) -> dict:
    """The structure (function addresses left out), shapes, dtypes and shardings of
    ``args``: what a stored program was compiled for, checked again before it runs."""
    leaves, tree = jax.tree.flatten(args)
    avals = []
    for leaf in leaves:
        shape = getattr(leaf, "shape", None)
        dtype = getattr(leaf, "dtype", None)
        sharding = getattr(leaf, "sharding", None)
        weak = getattr(getattr(leaf, "aval", None), "weak_type", None)
        avals.append([type(leaf).__name__, shape, str(dtype), weak, str(sharding)])
    return {"tree": _ADDRESS.sub("", str(tree)), "leaves": avals}


class ProgramStore:
    """Compiled programs on disk in ``directory`` (see the module's docstring)."""

    def __init__(self, directory: str | os.PathLike, max_bytes: int = MAX_BYTES) -> None:
        self.directory = Path(directory)
        self.max_bytes = int(max_bytes)
        self.loaded: list[str] = []  # names of the programs loaded whole by this store
        self._warned = False
        self._prefetched: dict[Path, PendingProgram] = {}  # loads started before they're due

    def key(self, name: str, static: Mapping[str, Any], args: tuple) -> str:
        """The entry's key: a digest of the environment, ``static`` and the inputs."""
        blob = repr((name, environment_key(), sorted(static.items()), signature(args)))
        return hashlib.sha256(blob.encode()).hexdigest()[:40]

    def path(self, name: str, static: Mapping[str, Any], key_args: tuple) -> Path:
        """Where the entry of ``name`` keyed by ``static`` and ``key_args`` is kept."""
        return self.directory / f"{name}-{self.key(name, static, key_args)}{_SUFFIX}"

    def compile(
        self,
        name: str,
        fn: Callable,
        args: tuple,
        static: Mapping[str, Any],
        split: Split = Split(),
    ) -> StoredProgram:
        """``fn`` compiled for ``args`` (pytrees; ``fn(*args)``), loaded whole from the store
        when an entry with the same key is there, else compiled and stored. The result is
        called like ``fn`` (with arguments of the same structure and shapes)."""
        return self.load_soon(name, static, args, background=False).get(fn, args, split)

    def prefetch(self, name: str, static: Mapping[str, Any], key_args: tuple) -> None:
        """Start loading the entry of ``name`` in a thread now, before the program is due
        (say, while a command's other start-up work runs); the next :meth:`load_soon` of the
        same entry takes this load instead of starting its own."""
        path = self.path(name, static, key_args)
        if path not in self._prefetched:
            self._prefetched[path] = self._start_load(name, path, background=True)

    def load_soon(
        self, name: str, static: Mapping[str, Any], key_args: tuple, background: bool = True
    ) -> PendingProgram:
        """Start loading the entry of ``name`` keyed by ``static`` and ``key_args`` (in a
        thread: XLA loads without holding the GIL, so tracing goes on meanwhile), or take
        the load :meth:`prefetch` started; the arguments still to come (a state made
        meanwhile) are checked against the entry when :meth:`PendingProgram.get` takes it."""
        path = self.path(name, static, key_args)
        early = self._prefetched.pop(path, None)
        return early if early is not None else self._start_load(name, path, background)

    def _start_load(self, name: str, path: Path, background: bool) -> PendingProgram:
        future: Future = Future()
        if background:
            thread = threading.Thread(target=_settle, args=(future, self._load, path))
            thread.start()
        else:
            _settle(future, self._load, path)
        return PendingProgram(self, name, path, future)

    def _compile_and_save(
        self, path: Path, name: str, fn: Callable, args: tuple, split: Split
    ) -> StoredProgram:
        leaves, tree = jax.tree.flatten(args)

        def flat(*leaves):
            return split.pack(fn(*tree.unflatten(leaves)))

        flat.__name__ = flat.__qualname__ = name  # the program's name in compile times
        compiled, fresh = _compile_fresh(jax.jit(flat).lower(*leaves))
        if fresh:
            self._save(path, compiled, signature(args))
        return StoredProgram(compiled, split, loaded=False)

    def _load(self, path: Path) -> tuple[Any, dict] | None:
        """``(compiled, signature)`` of the entry at ``path``, or None (not there, or
        damaged: said once, deleted)."""
        from jax.experimental.serialize_executable import deserialize_and_load

        try:
            blob = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # not stored (yet)
            return None
        except OSError as err:
            self._say(f"program store entry {path} cannot be read ({err.strerror}); compiling")
            return None
        head = len(_MAGIC) + 32
        if (
            blob[: len(_MAGIC)] != _MAGIC
            or hashlib.sha256(blob[head:]).digest() != blob[len(_MAGIC) : head]
        ):
            self._say(f"program store entry {path} is corrupt; compiling again")
            path.unlink(missing_ok=True)
            return None
        try:
            payload, in_tree, out_tree, made_for = pickle.loads(blob[head:])
            compiled = deserialize_and_load(payload, in_tree, out_tree)
        except Exception as err:  # noqa: BLE001 - any failure means: compile instead
            self._say(f"program store entry {path} cannot be loaded ({err}); compiling again")
            path.unlink(missing_ok=True)
            return None
        os.utime(path)  # most recently used
        return compiled, made_for

    def _save(self, path: Path, compiled: Any, made_for: dict) -> None:
        from jax.experimental.serialize_executable import serialize

        try:
            body = pickle.dumps((*serialize(compiled), made_for))
        except Exception:  # noqa: BLE001 - a program that cannot be serialised is not kept
            return
        blob = _MAGIC + hashlib.sha256(body).digest() + body
        tmp = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                dir=self.directory, prefix=".tmp-", delete=False
            ) as handle:
                tmp = Path(handle.name)
                handle.write(blob)
            os.replace(tmp, path)
        except OSError as err:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            self._say(
                f"program store {self.directory} cannot be written ({err.strerror or err}); "
                "going on without it"
            )
            return
        self._evict()

    def _evict(self) -> None:
        """Drop the least recently used entries beyond the cap, and the partial writes of
        processes killed while saving (older than an hour)."""
        for partial in self.directory.glob(".tmp-*"):
            try:
                if time.time() - partial.stat().st_mtime > 3600:
                    partial.unlink()
            except OSError:
                continue
        entries = []
        for entry in self.directory.glob(f"*{_SUFFIX}"):
            try:
                stat = entry.stat()
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, entry))
        total = sum(size for _, size, _ in entries)
        for _, size, entry in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            entry.unlink(missing_ok=True)
            total -= size

    def _say(self, message: str) -> None:
        if not self._warned:
            print(f"warning: {message}", file=sys.stderr)
            self._warned = True


def _settle(future: Future, load: Callable, path: Path) -> None:
    try:
        future.set_result(load(path))
    except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
        future.set_exception(err)


@dataclasses.dataclass
class PendingProgram:
    """An entry being loaded (:meth:`ProgramStore.load_soon`)."""

    store: ProgramStore
    name: str
    path: Path
    future: Future

    def get(self, fn: Callable, args: tuple, split: Split = Split()) -> StoredProgram:
        """The loaded program when it was made for ``args`` (structure, shapes, dtypes and
        shardings), else ``fn`` compiled for them (and stored)."""
        found = self.future.result()
        if found is not None and found[1] == signature(args):
            self.store.loaded.append(self.name)
            return StoredProgram(found[0], split, loaded=True)
        return self.store._compile_and_save(self.path, self.name, fn, args, split)


def program_store() -> ProgramStore | None:
    """The store in the compile cache's directory when the cache is on in this process (and
    it is the only process), else None."""
    where = enabled_cache_dir()
    if where is None or jax.process_count() > 1:
        return None
    return ProgramStore(where / SUBDIRECTORY)
