"""Shared setup of the sweep tests: a tiny scenario (5x5, one predator, one prey, the random
algorithm: nothing to learn, quick to compile) and a sweep file written from keyword values."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TINY = {
    "env.size": 5,
    "env.termination.max_steps": 12,
    "agents.predators.count": 1,
    "agents.preys.count": 1,
    "agents.preys.speed": 1,
    "experiment.num_envs": 4,
    "experiment.total_timesteps": 64,
    "experiment.algorithm": {"name": "random", "params": {"num_steps": 8}},
}
ARMS = {"base_only": {"disable": ["predator_distance", "survival"]}, "both": {}}


def write_sweep(path: Path, **body) -> Path:
    """``path`` holding ``{"sweep": body}``: PPAGE's ablation config, :data:`TINY` and no audit
    stage unless ``body`` says otherwise."""
    body.setdefault("config", str(REPO / "configs/ablation/both"))
    body.setdefault("set", TINY)
    body.setdefault("audit", False)  # the audit stage: test_the_audit_runs_before_training
    path.write_text(yaml.safe_dump({"sweep": body}))
    return path
