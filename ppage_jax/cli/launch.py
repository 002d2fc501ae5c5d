"""Start N processes of one subcommand on this machine, joined through JAX's distributed
runtime (CPU collectives over gloo): ``ppage-jax launch -n 2 -- bench --scaling``, ``...
-- sweep SWEEP.yaml`` or ``... -- run CONFIG_DIR``; the subcommands that run on several
processes say so with a module-level ``MULTI_PROCESS = True``.

Each process gets the coordinator settings in its environment (JAX_COORDINATOR_ADDRESS on a
free localhost port, JAX_NUM_PROCESSES, JAX_PROCESS_ID), so it runs exactly like
``--coordinator HOST:PORT --num-processes N --process-id I`` would. Process 0 prints and
writes the results. If one process fails, the others are stopped; the exit status is the
first non-zero one.

Each process is a whole JAX runtime: more processes than CPU cores share the cores (a one-line
note says so before any starts), and more than :data:`MAX_PROCESSES_PER_CORE` per core are
refused."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from ppage_jax.cli.args import UsageError, port_number, positive_int
from ppage_jax.distributed import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID

# More processes than this many per CPU core (os.cpu_count()) are refused.
MAX_PROCESSES_PER_CORE = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--num-processes",
        type=positive_int,
        required=True,
        metavar="N",
        help="processes to start (>= 1)",
    )
    parser.add_argument(
        "--port",
        type=port_number,
        default=None,
        help="coordinator port on localhost (default: a free one)",
    )
    parser.add_argument(
        "--devices-per-process",
        type=positive_int,
        default=None,
        metavar="K",
        help="CPU only: K host devices per process (XLA's forced host device count); default: one",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- SUBCOMMAND ...",
        help="the ppage-jax subcommand and its arguments, after --",
    )


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_environments(
    num: int,
    port: int,
    devices_per_process: int | None = None,
    base: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """One environment per process: ``base`` (default ``os.environ``) plus the coordinator
    settings, and the forced host device count when given."""
    envs = []
    for i in range(num):
        env = dict(os.environ if base is None else base)
        env.update(
            {
                ENV_COORDINATOR: f"127.0.0.1:{port}",
                ENV_NUM_PROCESSES: str(num),
                ENV_PROCESS_ID: str(i),
            }
        )
        if devices_per_process is not None:
            flag = f"--xla_force_host_platform_device_count={devices_per_process}"
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
        envs.append(env)
    return envs


def start(
    num: int,
    argv: Sequence[str],
    *,
    port: int | None = None,
    devices_per_process: int | None = None,
    **popen,
) -> list[subprocess.Popen]:
    """Start ``num`` copies of the program ``argv`` with the coordinator settings (process
    ``i`` gets ``JAX_PROCESS_ID=i``); extra keywords go to ``subprocess.Popen``."""
    if num < 1:
        raise ValueError(f"the number of processes must be >= 1, got {num}")
    envs = process_environments(
        num, free_port() if port is None else port, devices_per_process, popen.pop("env", None)
    )
    return [subprocess.Popen(list(argv), env=env, **popen) for env in envs]


def wait(processes: Sequence[subprocess.Popen], poll_s: float = 0.1, grace_s: float = 10.0) -> int:
    """Wait for every process; when one fails, stop the others (they would wait for it
    forever). Returns the first non-zero exit status, else 0."""
    status = 0
    while None in [p.poll() for p in processes]:  # poll every one, every time
        failed = [p.returncode for p in processes if p.returncode not in (None, 0)]
        if failed:
            status = failed[0]
            deadline = time.monotonic() + grace_s
            for p in processes:
                if p.poll() is None:
                    p.terminate()
            for p in processes:
                try:
                    p.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
            break
        time.sleep(poll_s)
    return status or next((p.returncode for p in processes if p.returncode), 0)


def _subcommand(command: list[str], able: tuple[str, ...]) -> list[str]:
    """The program line for a ppage-jax subcommand that runs on several processes (``able``:
    the subcommands that declare ``MULTI_PROCESS``)."""
    if command and command[0] == "--":
        command = command[1:]
    if not command or command[0] not in able:
        got = repr(command[0]) if command else "nothing"
        raise UsageError(
            f"ppage-jax launch: expected a subcommand after --, one of {list(able)}; got {got}"
        )
    return [
        sys.executable,
        "-c",
        "import sys; from ppage_jax.cli import main; sys.exit(main())",
        *command,
    ]


def check_process_count(num: int, cores: int) -> None:
    """Refuse ``num`` processes above :data:`MAX_PROCESSES_PER_CORE` per core (UsageError);
    print a one-line note on stderr when they are more than the ``cores``."""
    most = MAX_PROCESSES_PER_CORE * cores
    if num > most:
        raise UsageError(
            f"ppage-jax launch: -n {num} would start {num} JAX processes on {cores} CPU "
            f"core(s); at most {most} ({MAX_PROCESSES_PER_CORE} per core) are allowed, and "
            f"{cores} or fewer get a core each"
        )
    if num > cores:
        print(
            f"ppage-jax launch: {num} processes share {cores} CPU core(s) (each is a whole JAX "
            f"runtime); -n {cores} or fewer give each a core",
            file=sys.stderr,
        )


def main(args: argparse.Namespace) -> int:
    if args.num_processes < 1:
        raise UsageError(f"ppage-jax launch: -n must be >= 1, got {args.num_processes}")
    if args.devices_per_process is not None and args.devices_per_process < 1:
        raise UsageError(
            f"ppage-jax launch: --devices-per-process must be >= 1, got {args.devices_per_process}"
        )
    check_process_count(args.num_processes, os.cpu_count() or 1)
    argv = _subcommand(list(args.command), args._multi_process)
    processes = start(
        args.num_processes, argv, port=args.port, devices_per_process=args.devices_per_process
    )
    try:
        return wait(processes)
    except KeyboardInterrupt:
        for p in processes:
            p.terminate()
        return 130
