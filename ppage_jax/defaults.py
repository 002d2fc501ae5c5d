"""Package defaults: the release's version (the one place it is written; ``pyproject.toml``,
``ppage_jax.__version__``, ``ppage-jax --version``, summary.json, sweep.json and search.json
read it), and the simulator's sections: PPAGE's shipped top-level config, with stamina
unlimited. The ``experiment`` section's defaults live with its schema in
``ppage_jax.config.experiment.section``."""

from __future__ import annotations

import copy
from collections.abc import Callable

VERSION = "0.1.0"

# The two roles, in agent-row order (predators first).
ROLES = ("predator", "prey")
# What a reward term's applies_to may name: one role, or every agent.
APPLIES_TO = (*ROLES, "all")

SECTIONS = ("env", "agents", "observations", "rewards", "actions", "experiment")

# Reset seeds of the reward audit's held-out block: episode i starts from
# PRNGKey(AUDIT_SEED + i).
AUDIT_SEED = 900_000
# Pixels per grid cell of a rendered frame.
DEFAULT_CELL_PX = 32

# Called before a config is checked, each registers reward terms, potentials or observation
# builders with their config checks. The package's __init__ adds the shipped ones, so the
# config layer checks against the registries without importing the layers above it.
REGISTRY_LOADERS: list[Callable[[], object]] = []

_DEFAULTS: dict = {
    "env": {
        "name": "ppage",
        "size": 10,
        "obstacle_percentage": 20.0,
        "seed": 42,
        "render_mode": None,
        "window_size": 600,
        "dynamics": {"allow_cell_sharing": True, "block_agents_by_obstacles": True},
        "termination": {"capture_threshold": 1, "max_steps": 500},
        "map": None,
        "starts": None,
    },
    "agents": {
        "predators": {"count": 3, "speed": 1, "stamina": None},
        "preys": {"count": 3, "speed": 3, "stamina": None},
        "naming": {"predator_prefix": "predator", "prey_prefix": "prey"},
    },
    # PPAGE's local_radius; params {} means the builder's defaults (radius 3, agents and
    # obstacles included), so overriding only observations.type needs no params reset.
    "observations": {"type": "local_radius", "params": {}, "per_agent": None},
    "rewards": {
        "gamma": 0.99,
        "base": {"enabled": True, "weight": 1.0, "params": {}},
        "shaping": [
            {"name": "predator_distance", "weight": 0.5},
            {"name": "survival", "weight": 1.0},
        ],
        "normalization": {"enabled": False},
    },
    "actions": {"type": "discrete_5", "params": {}},
}


def defaults() -> dict:
    """A fresh deep copy of the default merged config."""
    return copy.deepcopy(_DEFAULTS)
