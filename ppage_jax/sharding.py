"""Place a batch of grids (or of stacked EnvParams) across devices with ``jax.sharding``.

One 1-D mesh over every device, the batch axis split across it and everything else
replicated; ``jax.jit`` then runs each device's share of the batch where it lives (no
``pmap``). On one device the mesh has one entry and nothing changes. For several hosts,
call ``jax.distributed.initialize()`` first: ``jax.devices()`` then lists every host's
devices, and each process passes its own slice of the global batch (see the README).
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"


def make_mesh(axis: str = BATCH_AXIS, devices: Sequence[jax.Device] | None = None) -> Mesh:
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
                f"the mesh")
    return _place(tree, batch_sharding(mesh))


def replicate(tree: Any, mesh: Mesh) -> Any:
    """Put a full copy of every leaf of ``tree`` on each device of ``mesh`` (e.g. the
    EnvParams shared by a batch, or network weights)."""
    return _place(tree, replicated(mesh))


def _place(tree: Any, sharding: NamedSharding) -> Any:
    """device_put on one host; on several, each process's leaves are its local share."""
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), tree)
