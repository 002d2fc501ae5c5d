"""Shared setup of the command-line tests: a tiny run config and sweep file, and the command
line run in a subprocess (optionally killed at a named point through ``PPAGE_JAX_FAULT``).

The subprocesses of one test module share a persistent compilation cache, so only the first
process of each program compiles it.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

# Two IQL seeds on the tiny task of train_testing: 16 updates of 16 turns on 8 grids, one
# update per compiled chunk, a training checkpoint every 2 updates.
TINY_RUN = {
    "env": {
        "size": 5,
        "obstacle_percentage": 0.0,
        "termination": {"capture_threshold": 1, "max_steps": 20},
        "starts": [[0, 0], [1, 0], [3, 4]],
    },
    "agents": {
        "predators": {"count": 2, "speed": 1, "stamina": None},
        "preys": {"count": 1, "speed": 1, "stamina": 0},
    },
    "observations": {"type": "local_only", "params": {}},
    "experiment": {
        "algorithm": {"name": "iql", "params": {"table_size": 256}},
        "seed": 3,
        "num_seeds": 2,
        "num_envs": 8,
        "total_timesteps": 8 * 32 * 8,
        "episodes": None,
        "roles": {"predators": "learn", "preys": "learn"},
        "eval": {"episodes": 4, "seed": 500, "max_steps": None},
        "checkpoint_every": 2,
    },
}
RUN_UPDATES = 16

# The tiny run (with write_run_config), built to be hacked: predators paid for distance from
# a prey fixed between them (the reward-hacking monitor flags it at 15,360 env steps).
HACKED = {
    "env": {"starts": [[1, 2], [3, 2], [2, 2]]},
    "rewards": {"shaping": [{"name": "predator_distance", "weight": -5.0}]},
}
HACKED_EXPERIMENT = {
    "algorithm": {"name": "ippo", "params": {"learning_rate": 1e-4}},
    "seed": 0,
    "num_seeds": 1,
    "num_envs": 16,
    "total_timesteps": 40_000,
    "roles": {"predators": "learn", "preys": "noop"},
    "checkpoint_every": None,
}

# Two arms x two seeds of IQL, one run per compiled chunk (four chunks); no audit stage
# (tests/analysis/test_sweep.py covers it).
TINY_SWEEP = {
    "config": str(REPO / "configs/ablation/both"),
    "set": {
        "env.size": 5,
        "env.termination.max_steps": 12,
        "agents.predators.count": 1,
        "agents.preys.count": 1,
        "agents.preys.speed": 1,
        "experiment.num_envs": 4,
        "experiment.total_timesteps": 64,
        "experiment.algorithm": {"name": "iql", "params": {"num_steps": 8, "table_size": 256}},
    },
    "arms": {"base_only": {"disable": ["predator_distance", "survival"]}, "both": {}},
    "seeds": 2,
    "chunk_size": 1,
    "eval": {"episodes": 6},
    "audit": False,
}
SWEEP_CHUNKS = 4

CLI = "import sys; from ppage_jax.cli.main import main; sys.exit(main())"


def write_run_config(directory: Path, sections: dict | None = None, **experiment) -> Path:
    """The tiny run's config directory: each of ``sections`` (``{"env": {...}}``, a new
    section too) updates that section of :data:`TINY_RUN` key by key, and ``experiment``
    keys replace the experiment's."""
    directory.mkdir(parents=True, exist_ok=True)
    changes = dict(sections or {})
    changes["experiment"] = {**changes.get("experiment", {}), **experiment}
    for section in {**TINY_RUN, **changes}:
        body = {**TINY_RUN.get(section, {}), **changes.get(section, {})}
        (directory / f"{section}.yaml").write_text(yaml.safe_dump({section: body}))
    return directory


def write_sweep_file(path: Path, **changes) -> Path:
    """:data:`TINY_SWEEP` with ``changes`` replacing its keys (``set`` updated key by key)."""
    body = {**TINY_SWEEP, **changes}
    body["set"] = {**TINY_SWEEP["set"], **changes.get("set", {})}
    path.write_text(yaml.safe_dump({"sweep": body}))
    return path


def main_cli(argv: list[str]) -> tuple[int, str]:
    """``ppage-jax ARGV`` in this process: its exit code and what it printed."""
    from ppage_jax.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def cli_env(cache_dir: Path, fault: str | None = None, cache: bool = True) -> dict:
    """The environment of a command-line subprocess: CPU, unbuffered output, the shared
    compilation cache (unless ``cache`` is false) and the fault point, if any."""
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONUNBUFFERED="1",
        JAX_COMPILATION_CACHE_DIR=str(cache_dir),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
        JAX_ENABLE_COMPILATION_CACHE="true" if cache else "false",
    )
    env.pop("PPAGE_JAX_FAULT", None)
    if fault is not None:
        env["PPAGE_JAX_FAULT"] = fault
    return env


def run_cli(args: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    """``ppage-jax ARGS`` in a subprocess, from the repository root."""
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_cli(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def tree_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (relative path -> bytes)."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }
