"""Several processes through JAX's distributed runtime: the standard settings, as flags or
environment variables, and one call to ``jax.distributed.initialize``.

Settings, first found wins:

- ``--coordinator HOST:PORT --num-processes N --process-id I`` (:func:`add_arguments`);
- the environment: ``JAX_COORDINATOR_ADDRESS`` (read by JAX itself), ``JAX_NUM_PROCESSES``
  and ``JAX_PROCESS_ID`` (what ``ppage-jax launch`` sets for each process it starts);
- a cluster JAX detects on its own (SLURM with several tasks, Open MPI): JAX then reads the
  coordinator, the process count and this process's id from the scheduler.

With none of these, or a single process, nothing is initialised and everything runs as one
process. On CPU the processes exchange data over gloo. After :func:`initialize`,
``jax.devices()`` lists every process's devices; :mod:`ppage_jax.sharding` splits batches
over them. Results are written by process 0 (:func:`is_writer`); :func:`share` hands process
0's view (e.g. of an output directory) to the others and :func:`any_process` makes a choice
(stop now) the same on every process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"
# Variables that mean a scheduler started several tasks JAX can detect by itself.
_CLUSTER_SIZE_VARS = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the coordinator listens, how many processes there are and which one this is.

    ``auto`` means a scheduler JAX detects (SLURM, Open MPI) supplies all three."""

    coordinator: str | None = None
    num_processes: int = 1
    process_id: int = 0
    auto: bool = False

    @property
    def multi_process(self) -> bool:
        return self.auto or self.num_processes > 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The standard multi-process flags (all optional; see :func:`settings`)."""
    group = parser.add_argument_group(
        "several processes",
        "JAX's distributed runtime; default: the JAX_COORDINATOR_ADDRESS, "
        "JAX_NUM_PROCESSES and JAX_PROCESS_ID variables, a SLURM / Open MPI job, else one "
        "process",
    )
    group.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        default=None,
        help="address of process 0's coordinator service",
    )
    group.add_argument(
        "--num-processes",
        type=int,
        metavar="N",
        default=None,
        help="number of processes taking part",
    )
    group.add_argument(
        "--process-id", type=int, metavar="I", default=None, help="this process's id, 0..N-1"
    )


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None


def settings(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve the settings from arguments, then ``environ`` (default ``os.environ``).

    Raises ValueError naming the bad setting (a missing port, an id out of range, a
    coordinator without a process count)."""
    env = os.environ if environ is None else environ
    coordinator = coordinator or env.get(ENV_COORDINATOR) or None
    if num_processes is None and env.get(ENV_NUM_PROCESSES):
        num_processes = _int(env[ENV_NUM_PROCESSES], ENV_NUM_PROCESSES)
    if process_id is None and env.get(ENV_PROCESS_ID):
        process_id = _int(env[ENV_PROCESS_ID], ENV_PROCESS_ID)
    if num_processes is None and process_id is None:
        cluster = any(_int(env.get(v) or "1", v) > 1 for v in _CLUSTER_SIZE_VARS)
        if cluster:
            return Settings(coordinator, 1, 0, auto=True)
        if coordinator is None:
            return Settings()
    if num_processes is None or num_processes < 1:
        raise ValueError(
            f"--num-processes must be an integer >= 1 (or {ENV_NUM_PROCESSES}), "
            f"got {'nothing' if num_processes is None else num_processes}"
        )
    if num_processes == 1:
        return Settings(coordinator, 1, 0)
    if process_id is None or not 0 <= process_id < num_processes:
        raise ValueError(
            f"--process-id must be in 0..{num_processes - 1} (or "
            f"{ENV_PROCESS_ID}), got {'nothing' if process_id is None else process_id}"
        )
    if coordinator is None:
        raise ValueError(
            f"--coordinator HOST:PORT (or {ENV_COORDINATOR}) is needed with "
            f"{num_processes} processes"
        )
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {coordinator!r}")
    return Settings(coordinator, num_processes, process_id)


def initialize(config: Settings | None = None) -> Settings:
    """Start JAX's distributed runtime for ``config`` (default: :func:`settings` from the
    environment); a no-op for one process or when it is already running. Call it before any
    other JAX work. On CPU, collectives go over gloo."""
    config = settings() if config is None else config
    if not config.multi_process or is_initialized():
        return config
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if config.auto:
        jax.distributed.initialize(coordinator_address=config.coordinator)
    else:
        jax.distributed.initialize(
            coordinator_address=config.coordinator,
            num_processes=config.num_processes,
            process_id=config.process_id,
        )
    return config


def initialize_from_args(args: argparse.Namespace) -> Settings:
    """:func:`initialize` with the flags of :func:`add_arguments` (then the environment).

    Bad settings end the program with a one-line message and exit status 2 (bad input)."""
    try:
        config = settings(
            getattr(args, "coordinator", None),
            getattr(args, "num_processes", None),
            getattr(args, "process_id", None),
        )
    except ValueError as err:
        print(f"ppage-jax: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    return initialize(config)


def is_initialized() -> bool:
    """True once the distributed runtime runs in this process (False, without importing JAX,
    while nothing has imported it: the command line checks its input before JAX loads)."""
    if "jax" not in sys.modules:
        return False
    import jax

    return jax.distributed.is_initialized()


def is_writer() -> bool:
    """True on the process that writes results and prints reports (process 0)."""
    import jax

    return jax.process_index() == 0


def share(value: Any) -> Any:
    """Process 0's ``value`` (JSON-ready) on every process, e.g. what it read from the output
    directory; ``value`` itself with one process. Every process must call it (the others'
    ``value`` is ignored)."""
    import jax
    import numpy as np

    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(value).encode(), np.uint8) if is_writer() else None
    size = int(multihost_utils.broadcast_one_to_all(np.int32(0 if data is None else data.size)))
    buffer = np.zeros(size, np.uint8) if data is None else data
    return json.loads(bytes(np.asarray(multihost_utils.broadcast_one_to_all(buffer))).decode())


def any_process(flag: bool) -> bool:
    """True on every process when ``flag`` is true on any (e.g. a stop request that reached
    one process first); ``flag`` with one process. Every process must call it."""
    import jax
    import numpy as np

    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.asarray(multihost_utils.process_allgather(np.int32(bool(flag)))).any())
