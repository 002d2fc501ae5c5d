"""Checkpoints: the trained policy of a run (Flax msgpack) and full training checkpoints
(Orbax) that let an interrupted run resume.

Policy checkpoint (``checkpoint.msgpack``): what the greedy policy needs
(``module.policy_state``), stacked over the run's seeds, with the algorithm name and the hash
of the config it was trained with. Loading rebuilds the expected shapes from the current
config and refuses a checkpoint whose shapes differ (another grid, agent count, observation
or network), naming the first differing array and both config hashes. Equal shapes under a
different config hash (say, other reward weights) load with a warning (seeds, budgets and the
eval block may differ silently). A truncated or foreign file is a one-line
:class:`CheckpointError`.

Training checkpoints (``checkpoints/<update>/``, :class:`TrainingCheckpoints`): the whole
runner state of every seed (learner parameters, optimiser states, target networks, replay
buffers or tables, environment states, keys, progress counters) and the metrics so far,
written with Orbax (to a temporary directory, then renamed: a checkpoint is complete or
absent), the last :data:`KEEP_CHECKPOINTS` kept. A save that fails (a full disk) is one
error naming the checkpoint and the OS error: Orbax's background threads are silenced while
it runs, and what the failed save left is removed, so the previous checkpoint is the newest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import gc
import logging
import math
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization
from flax.traverse_util import flatten_dict

from ppage_jax.artifacts import fault, write_bytes
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.registry import algorithm

FORMAT = 1
TRAINING_FORMAT = "ppage_jax training checkpoint 1"
KEEP_CHECKPOINTS = 2  # training checkpoints kept (the newest)
CHECKPOINTS_PER_RUN = 5  # experiment.checkpoint_every: null spreads this many over a run


class CheckpointError(ValueError):
    """A checkpoint that does not fit the config it is loaded into."""


class NonFiniteCheckpointError(CheckpointError):
    """A checkpoint whose arrays hold a NaN or an infinity (a policy that cannot be used)."""


def template_policy(tc: TrainConfig, num_seeds: int | None = None):
    """Shapes (ShapeDtypeStruct leaves) of ``policy_state`` for ``tc``; with ``num_seeds``,
    stacked on a leading seed axis. Traced only, never compiled or run."""
    module = algorithm(tc.algorithm)

    def policy(key):
        return module.policy_state(module.init(key, tc, tc.env.default_params))

    shapes = jax.eval_shape(policy, jax.random.PRNGKey(0))
    if num_seeds is None:
        return shapes
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct((num_seeds,) + s.shape, s.dtype), shapes)


def save_checkpoint(path: str | os.PathLike, tc: TrainConfig, policies) -> None:
    """Write ``policies`` (policy_state stacked over seeds) with the algorithm and config hash."""
    leaves = jax.tree.leaves(policies)
    payload = {
        "format": FORMAT,
        "algorithm": tc.algorithm,
        "config_hash": tc.config_hash,
        "policy_hash": tc.policy_hash,
        "num_seeds": int(leaves[0].shape[0]) if leaves else 0,
        "policy": serialization.to_state_dict(jax.device_get(policies)),
    }
    write_bytes(path, serialization.msgpack_serialize(payload))


def load_checkpoint(path: str | os.PathLike, tc: TrainConfig):
    """Read a checkpoint written by :func:`save_checkpoint` into ``tc``'s policy structure.

    Raises :class:`CheckpointError` when the algorithm, the array names or any array shape
    differ from what ``tc`` expects, or when an array holds a NaN or an infinity.
    """
    data = Path(path).read_bytes()
    try:
        raw = serialization.msgpack_restore(data)
    except Exception as err:  # msgpack raises several types on truncated or foreign bytes
        raise CheckpointError(
            f"{path}: not a readable ppage_jax checkpoint ({len(data)} "
            f"bytes; truncated or another format: {_first_line(err)})"
        ) from None
    if (
        not isinstance(raw, dict)
        or raw.get("format") != FORMAT
        or not {"algorithm", "config_hash", "num_seeds", "policy"} <= set(raw)
    ):
        raise CheckpointError(f"{path}: not a ppage_jax checkpoint (format {FORMAT})")
    where = (
        f"{path}: checkpoint trained with config hash {raw['config_hash']}, loading "
        f"into config hash {tc.config_hash}"
    )
    if raw["algorithm"] != tc.algorithm:
        raise CheckpointError(
            f"{where}: it holds algorithm {raw['algorithm']!r}, the config "
            f"asks for {tc.algorithm!r}"
        )
    num_seeds = raw["num_seeds"]
    expected = serialization.to_state_dict(template_policy(tc, num_seeds if num_seeds else None))
    saved_flat: dict[str, Any] = flatten_dict(raw["policy"], sep="/") if raw["policy"] else {}
    expected_flat: dict[str, Any] = flatten_dict(expected, sep="/") if expected else {}
    if set(saved_flat) != set(expected_flat):
        missing = sorted(set(expected_flat) - set(saved_flat))
        extra = sorted(set(saved_flat) - set(expected_flat))
        raise CheckpointError(
            f"{where}: the arrays differ (missing {missing[:5]}, "
            f"unexpected {extra[:5]}); was it trained with another "
            f"config?"
        )
    for name, spec in expected_flat.items():
        got = np.shape(saved_flat[name])
        if got != tuple(spec.shape):
            raise CheckpointError(
                f"{where}: array {name!r} has shape {got}, this config needs "
                f"{tuple(spec.shape)} (grid size, agent counts, observation, action table "
                f"and network shape must match the training config)"
            )
    if raw.get("policy_hash") != tc.policy_hash:
        warnings.warn(
            f"{where}: shapes match, but the environment, rewards or algorithm "
            f"differ from the training config",
            stacklevel=2,
        )
    for name in sorted(saved_flat):
        values = np.asarray(saved_flat[name])
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            bad = int(values.size - np.isfinite(values).sum())
            raise NonFiniteCheckpointError(
                f"{path}: array {name!r} holds {bad} non-finite value(s) (NaN or inf) of "
                f"{values.size}; a policy must be finite (did its training diverge?)"
            )
    if not expected_flat:
        return {}
    restored = serialization.from_state_dict(
        jax.tree.map(
            lambda s: np.zeros(s.shape, s.dtype),
            template_policy(tc, num_seeds if num_seeds else None),
        ),
        raw["policy"],
    )
    return jax.tree.map(jnp.asarray, restored)


# TensorStore names the OS error of a failed write in its message: [os_error_code='28']
_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")


def write_error(err: BaseException, path: Path) -> OSError:
    """The OS error behind ``err`` (Orbax wraps them: an OSError in its chain, else the
    ``os_error_code`` a TensorStore message names) for the checkpoint ``path``; an EIO one
    naming the first line of ``err`` when there is none."""
    chain: list[BaseException] = []
    seen: BaseException | None = err
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for seen in chain:
        if isinstance(seen, OSError) and seen.errno is not None:
            return OSError(seen.errno, seen.strerror or os.strerror(seen.errno), str(path))
    for seen in chain:
        found = _OS_ERROR_CODE.search(str(seen))
        if found:
            code = int(found.group(1))
            return OSError(code, os.strerror(code), str(path))
    return OSError(
        errno.EIO, f"cannot write this training checkpoint ({_first_line(err)})", str(path)
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200]}" if text else type(err).__name__


# ------------------------------------------------------------------ training checkpoints
def checkpoint_interval(tc: TrainConfig, every: int | None) -> int:
    """Updates between training checkpoints: ``every``, or by default a
    :data:`CHECKPOINTS_PER_RUN`-th of the run (rounded up)."""
    if every is not None:
        return int(every)
    return max(1, math.ceil(tc.num_updates / CHECKPOINTS_PER_RUN))


def _import_orbax() -> None:
    import orbax.checkpoint  # noqa: F401 - loaded for the first save


@dataclasses.dataclass
class Restored:
    """A training checkpoint read back: runner state, metrics so far ([S, updates, ...],
    NumPy) and where the run stood."""

    updates: int
    finished: bool
    chunk_size: int
    runner: Any
    metrics: dict


def _skeleton(tree: Any, leaves: list) -> Any:
    """The nesting of a metrics dict with each array replaced by its index in ``leaves``."""
    if isinstance(tree, dict):
        return {key: _skeleton(value, leaves) for key, value in tree.items()}
    leaves.append(np.asarray(tree))
    return len(leaves) - 1


def _rebuild(skeleton: Any, leaves: list) -> Any:
    if isinstance(skeleton, dict):
        return {key: _rebuild(value, leaves) for key, value in skeleton.items()}
    return leaves[skeleton]


# Loggers Orbax and its asyncio writers print through while a save runs.
_SAVE_LOGGERS = ("absl", "asyncio")


@contextlib.contextmanager
def _quiet_save() -> Iterator[None]:
    """Silence what a save's background threads print: Orbax's absl lines ("Waiting for
    previous save ...", and on a full disk dozens of tracebacks), asyncio's "exception was
    never retrieved" and the unraisable "Event loop is closed" of the writes a failure
    cancels (other unraisable errors still reach the hook). A save in the background stays
    quiet until :meth:`TrainingCheckpoints.wait`. The failure itself still reaches the
    caller of the save, or of the wait."""
    loggers = [logging.getLogger(name) for name in _SAVE_LOGGERS]
    disabled = [logger.disabled for logger in loggers]
    hook = sys.unraisablehook
    for logger in loggers:
        logger.disabled = True
    sys.unraisablehook = functools.partial(_unless_a_cancelled_write, hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for logger, was in zip(loggers, disabled, strict=True):
            logger.disabled = was


def _unless_a_cancelled_write(hook: Callable[[Any], object], unraisable: Any) -> None:
    """The unraisable hook while a save runs: drops the "Event loop is closed" of the writes a
    failed save cancels, passes anything else to ``hook``."""
    err = unraisable.exc_value
    if not (isinstance(err, RuntimeError) and str(err) == "Event loop is closed"):
        hook(unraisable)


def _join_new_threads(before: set[threading.Thread], timeout: float = 30.0) -> None:
    """Wait (up to ``timeout`` seconds in all) for the threads started since ``before``."""
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread not in before and thread is not threading.current_thread():
            with contextlib.suppress(Exception):  # Orbax's threads re-raise their error
                thread.join(max(0.0, deadline - time.monotonic()))


def _leaf_names(tree: Any) -> list[str]:
    paths, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [jax.tree_util.keystr(path, simple=True, separator="/") for path, _ in paths]


class TrainingCheckpoints:
    """The training checkpoints of one run: ``directory/<update>/`` written by Orbax.

    ``every`` updates (rounded up to the next chunk boundary) the driver calls :meth:`save`;
    :meth:`latest` reads and checks the newest checkpoint's description (before any long
    work), :meth:`restore` the arrays into a runner state of the same structure.
    """

    def __init__(self, directory: str | os.PathLike, tc: TrainConfig, every: int | None = None):
        self.directory = Path(directory).absolute()
        self.tc = tc
        self.every = checkpoint_interval(tc, every)
        self.saved = 0  # saves by this process
        self.last_update: int | None = None  # the newest complete checkpoint of this process
        self._manager = None
        # (update, folder, new, threads before it, its quiet) of a save not yet complete
        self._pending: (
            tuple[int, Path, bool, set[threading.Thread], contextlib.ExitStack] | None
        ) = None
        # saves commit in Orbax's background threads while training goes on (one process:
        # with several, each save's barriers stay in step with the training's collectives)
        self.in_background = jax.process_count() == 1

    # ---------------------------------------------------------------- orbax plumbing
    @staticmethod
    def import_soon() -> None:
        """Start importing Orbax (about 0.2 s of Python) in a thread, so that it overlaps
        the caller's start-up instead of the first save; a save waits for it if need be."""
        threading.Thread(target=_import_orbax, name="import orbax", daemon=True).start()

    def _open(self):
        if self._manager is None:
            import orbax.checkpoint as ocp

            self._refuse_links()
            if self.directory.exists() and not self.directory.is_dir():
                raise CheckpointError(f"{self.directory} is a file, not a checkpoint directory")
            options = ocp.CheckpointManagerOptions(
                max_to_keep=KEEP_CHECKPOINTS, create=True, cleanup_tmp_directories=True
            )
            try:
                self._manager = ocp.CheckpointManager(self.directory, options=options)
            except Exception as err:
                raise CheckpointError(
                    f"{self.directory}: cannot open the training checkpoints ({_first_line(err)})"
                ) from None
        return self._manager

    def _refuse_links(self) -> None:
        """:class:`CheckpointError` when the checkpoint folder, or an entry in it, is a
        symbolic link: Orbax would write (and delete old checkpoints) where it points."""
        entries = list(self.directory.iterdir()) if self.directory.is_dir() else []
        for path in (self.directory, *entries):
            if path.is_symlink():
                raise CheckpointError(
                    f"{path} is a symbolic link; training checkpoints are written only into "
                    f"a real folder of the run directory (remove the link)"
                )

    def steps(self) -> list[int]:
        """The updates at which a complete checkpoint exists, oldest first."""
        self._refuse_links()
        if not self.directory.is_dir():
            return []
        return sorted(self._open().all_steps())

    def _where(self, step: int) -> str:
        return str(self.directory / str(step))

    def _read(self, step: int, **items):
        import orbax.checkpoint as ocp

        try:
            return self._open().restore(step, args=ocp.args.Composite(**items))
        except Exception as err:  # truncated files, foreign directories, wrong shapes
            kept = [s for s in self.steps() if s != step]
            hint = (
                f"; delete it to resume from update {kept[-1]}"
                if kept
                else "; delete it to start the run again"
            )
            raise CheckpointError(
                f"{self._where(step)}: cannot read this training checkpoint "
                f"(truncated or not written by ppage-jax: "
                f"{_first_line(err)}){hint}"
            ) from None

    # ---------------------------------------------------------------- reading
    def latest(self) -> dict | None:
        """The newest checkpoint's description (``updates``, ``finished``, ...), checked
        against this run's config; None when there is none. :class:`CheckpointError` when
        it cannot be read or belongs to another config."""
        steps = self.steps()
        if not steps:
            return None
        import orbax.checkpoint as ocp

        meta = self._read(steps[-1], meta=ocp.args.JsonRestore())["meta"]
        where = self._where(steps[-1])
        if not isinstance(meta, dict) or meta.get("format") != TRAINING_FORMAT:
            raise CheckpointError(f"{where}: not a ppage_jax training checkpoint")
        if (
            meta.get("config_hash") != self.tc.config_hash
            or meta.get("algorithm") != self.tc.algorithm
        ):
            raise CheckpointError(
                f"{where}: written for config hash {meta.get('config_hash')} "
                f"({meta.get('algorithm')}), this run has config hash {self.tc.config_hash} "
                f"({self.tc.algorithm}); resume with the run's own config.yaml"
            )
        return meta

    def restore(self, template: Any) -> Restored | None:
        """The newest checkpoint, its runner state in ``template``'s structure (the state
        ``init`` returns, leading seed axis); None when there is none."""
        meta = self.latest()
        if meta is None:  # nothing to read: Orbax need not be imported yet
            return None
        import orbax.checkpoint as ocp

        step = self.steps()[-1]
        where = self._where(step)
        leaves, treedef = jax.tree.flatten(template)
        names = _leaf_names(template)
        shapes = [list(np.shape(x)) for x in leaves]
        dtypes = [str(x.dtype) for x in leaves]
        for key, mine in (("names", names), ("shapes", shapes), ("dtypes", dtypes)):
            theirs = meta.get(key)
            if theirs != mine:
                pairs = enumerate(zip(theirs or [], mine, strict=False))
                i = next((i for i, (a, b) in pairs if a != b), min(len(theirs or []), len(mine)))
                got = theirs[i] if theirs and i < len(theirs) else "nothing"
                want = mine[i] if i < len(mine) else "nothing"
                name = names[i] if i < len(names) else f"#{i}"
                raise CheckpointError(
                    f"{where}: runner array {name!r} has {key[:-1]} {got}, this run needs {want}"
                )
        stored = [i for i, x in enumerate(leaves) if np.size(x) > 0]
        items = self._read(
            step,
            state=ocp.args.StandardRestore({"leaves": [leaves[i] for i in stored]}),
            history=ocp.args.StandardRestore(),
        )
        restored = list(leaves)
        for i, value in zip(stored, items["state"]["leaves"], strict=True):
            restored[i] = value
        history = [
            np.asarray(x) if shape is None else np.zeros(shape, np.asarray(x).dtype)
            for x, shape in zip(items["history"]["leaves"], meta["empty_history"], strict=True)
        ]
        metrics = _rebuild(meta["history"], history)
        self.last_update = int(meta["updates"])
        return Restored(
            int(meta["updates"]),
            bool(meta["finished"]),
            int(meta["chunk_size"]),
            jax.tree.unflatten(treedef, restored),
            metrics,
        )

    # ---------------------------------------------------------------- writing
    def due(self, before: int, after: int) -> bool:
        """Whether a checkpoint falls in the updates ``(before, after]``."""
        return after // self.every > before // self.every

    def save(
        self, updates: int, runner: Any, metrics: dict, finished: bool, chunk_size: int
    ) -> Path:
        """Write the checkpoint of update ``updates``: in the background in a single process
        (Orbax commits it while training goes on; :meth:`wait`, the next save or
        :meth:`close` completes it), at once with several processes."""
        import orbax.checkpoint as ocp

        leaves = jax.tree.leaves(runner)
        history: list = []
        skeleton = _skeleton(metrics, history)
        meta = {
            "format": TRAINING_FORMAT,
            "algorithm": self.tc.algorithm,
            "config_hash": self.tc.config_hash,
            "updates": int(updates),
            "finished": bool(finished),
            "chunk_size": int(chunk_size),
            "names": _leaf_names(runner),
            "shapes": [list(np.shape(x)) for x in leaves],
            "dtypes": [str(x.dtype) for x in leaves],
            "history": skeleton,
        }
        stored = [x for x in leaves if np.size(x) > 0]
        # Orbax cannot store empty arrays: zero-size leaves come back from the template
        # (restore) and zero-size metrics are rebuilt from their shape.
        history_saved = [h if h.size else np.zeros(1, h.dtype) for h in history]
        meta["empty_history"] = [list(h.shape) if not h.size else None for h in history]
        self.wait()  # the previous save complete (or its write error raised) first
        manager = self._open()
        target = self.directory / str(updates)
        kept = set(manager.all_steps())
        threads = set(threading.enumerate())
        failure: OSError | None = None
        # quiet from the start of the save to its end, which comes in wait()
        quiet = contextlib.ExitStack()
        quiet.enter_context(_quiet_save())
        try:
            manager.save(
                int(updates),
                args=ocp.args.Composite(
                    state=ocp.args.StandardSave({"leaves": stored}),
                    history=ocp.args.StandardSave({"leaves": history_saved}),
                    meta=ocp.args.JsonSave(meta),
                ),
                force=True,
            )
            self.saved += 1
            # testing hook: killed (or a full disk) while Orbax writes
            fault(f"checkpoint:{self.saved}", target)
        except Exception as err:  # a full disk, a vanished directory: Orbax wraps them
            failure = write_error(err, target)
            self._abandon(int(updates) not in kept, target, threads)
        if failure is not None:  # Orbax's failed futures log when collected: now, quietly
            del manager
            gc.collect()
            quiet.close()
            raise failure
        self._pending = (int(updates), target, int(updates) not in kept, threads, quiet)
        if not self.in_background:
            self.wait()
        return target

    def wait(self) -> None:
        """Block until the last save is complete on disk; :attr:`last_update` is its update
        from then on. A write error it met is raised here (one line, naming the path), and
        what it left is removed, so the checkpoints before it are the newest again."""
        if self._pending is None:
            return
        updates, target, new, threads, quiet = self._pending
        self._pending = None
        failure: OSError | None = None
        with quiet:
            try:
                if self._manager is not None:
                    self._manager.wait_until_finished()
            except Exception as err:
                failure = write_error(err, target)
                self._abandon(new, target, threads)
            if failure is not None:
                gc.collect()
        if failure is not None:
            raise failure
        self.last_update = updates

    def _abandon(self, new: bool, target: Path, threads: set[threading.Thread]) -> None:
        """After a failed save: close the manager, wait for the save's threads (started
        since ``threads``) and remove what the save left (its temporary folder, and the
        step itself when it is new), so the checkpoints before it are the newest again."""
        import shutil

        manager, self._manager = self._manager, None
        if manager is not None:
            with contextlib.suppress(Exception):
                manager.close()
        _join_new_threads(threads)
        leftovers = [p for p in self.directory.glob("*") if "tmp" in p.name]
        if new:
            leftovers.append(target)
        for path in leftovers:
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        """Complete the last save (raising its write error) and close the checkpoints."""
        try:
            self.wait()
        finally:
            self._close_manager()

    def _close_manager(self) -> None:
        if self._manager is not None:
            self._manager.wait_until_finished()
            self._manager.close()
            self._manager = None
