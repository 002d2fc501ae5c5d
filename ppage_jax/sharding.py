"""Place a batch of grids (or of stacked EnvParams) across devices with ``jax.sharding``.

One 1-D mesh over every device, the batch axis split across it and everything else
replicated; ``jax.jit`` then runs each device's share of the batch where it lives (no
``pmap``). On one device the mesh has one entry and nothing changes. For several hosts,
call ``jax.distributed.initialize()`` first: ``jax.devices()`` then lists every host's
devices, and each process passes its own slice of the global batch (see the README).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"


def make_mesh(
    axis: str = BATCH_AXIS,
    # jax.Device is an assignment (the XLA class), which pyright takes for a variable
    devices: Sequence[jax.Device] | None = None,  # pyright: ignore[reportInvalidTypeForm]
) -> Mesh:
    """A 1-D mesh named ``axis`` over ``devices`` (default: all devices, every host)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("make_mesh needs at least one device")
    return Mesh(np.asarray(devices), (axis,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading axis split over the mesh's (single) axis, the other axes whole."""
    return NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))


def replicated(mesh: Mesh) -> NamedSharding:
    """A full copy on every device of the mesh."""
    return NamedSharding(mesh, PartitionSpec())


def shard_batch(tree: Any, mesh: Mesh) -> Any:
    """Put every leaf of ``tree`` on ``mesh`` with its leading axis split across devices.

    The leading axis (the batch of grids, or of sweep arms) must divide evenly by the
    number of devices; a ValueError says which leaf does not. With several processes
    (``jax.distributed``), each passes its own share and the result is the global batch.
    """
    n_dev = len(mesh.local_devices)
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        shape = np.shape(leaf)
        if not shape or shape[0] % n_dev:
            raise ValueError(
                f"shard_batch: leaf {jax.tree_util.keystr(path) or '<root>'} has shape "
                f"{shape}; its leading axis must be a multiple of the {n_dev} devices of "
                f"the mesh"
            )
    return _place(tree, batch_sharding(mesh))


def replicate(tree: Any, mesh: Mesh) -> Any:
    """Put a full copy of every leaf of ``tree`` on each device of ``mesh`` (e.g. the
    EnvParams shared by a batch, or network weights)."""
    return _place(tree, replicated(mesh))


def check_divisible(num: int, mesh: Mesh, what: str = "batch") -> None:
    """ValueError unless ``num`` splits evenly over the mesh's devices (every process's)."""
    if num % mesh.devices.size:
        raise ValueError(
            f"{what} {num} must be a multiple of the {mesh.devices.size} "
            f"device(s) of the mesh ({jax.process_count()} process(es))"
        )


def process_rows(num: int, mesh: Mesh) -> slice:
    """The rows of a global batch of ``num`` that this process's devices hold (all of them
    with one process). Devices are laid out in mesh order, so the rows are contiguous."""
    check_divisible(num, mesh)
    spans = batch_sharding(mesh).addressable_devices_indices_map((num,)).values()
    bounds = [span[0].indices(num)[:2] for span in spans if span is not None]
    starts, stops = [a for a, _ in bounds], [b for _, b in bounds]
    if sum(b - a for a, b in bounds) != max(stops) - min(starts):
        raise ValueError(
            "process_rows: this process's devices hold non-contiguous rows; "
            "build the mesh with make_mesh() (devices in process order)"
        )
    return slice(min(starts), max(stops))


def shard_global(tree: Any, mesh: Mesh) -> Any:
    """Like :func:`shard_batch`, but every process passes the whole global batch (the same
    values everywhere, e.g. a sweep's arms x seeds) and keeps only its own rows."""
    leaves = jax.tree.leaves(tree)
    if jax.process_count() == 1 or not leaves:
        return shard_batch(tree, mesh)
    rows = process_rows(np.shape(leaves[0])[0], mesh)
    return shard_batch(jax.tree.map(lambda x: np.asarray(x)[rows], tree), mesh)


def gather_rows(tree: Any) -> Any:
    """NumPy copies of every leaf with every process's rows: each process passes its own
    share (leading axis, e.g. the rows :func:`process_rows` gave it, computed on its own
    devices) and every process gets them all, concatenated in process order. With one
    process, just the NumPy copies."""
    tree = jax.device_get(tree)
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    from jax.experimental import multihost_utils

    return jax.tree.map(
        lambda x: np.asarray(multihost_utils.process_allgather(np.asarray(x), tiled=True)), tree
    )


def to_host(tree: Any) -> Any:
    """NumPy copies of every leaf, whole on every process (gathered across processes when a
    leaf is split over several; each process then holds the same global result)."""
    from jax.experimental import multihost_utils

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(x)

    return jax.tree.map(one, tree)


def _place(tree: Any, sharding: NamedSharding) -> Any:
    """device_put on one host; on several, each process's leaves are its local share."""
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), tree)
