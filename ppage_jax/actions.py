"""Action tables: the direction [dx, dy] of each discrete action (y grows downward)."""

from __future__ import annotations

import numpy as np

ACTION_TABLES: dict[str, np.ndarray] = {
    # PPAGE DiscreteActionSpace: right, "up" (+y, visually down), left, "down" (-y), no-op.
    "discrete_5": np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [0, 0]], dtype=np.int32),
    # PPAGE CrossActionSpace: the four diagonals, then no-op.
    "cross": np.array([[1, 1], [-1, 1], [-1, -1], [1, -1], [0, 0]], dtype=np.int32),
    # Eight directions (counter-clockwise from +x in the y-down frame), then no-op.
    "discrete_9": np.array(
        [[1, 0], [1, 1], [0, 1], [-1, 1], [-1, 0], [-1, -1], [0, -1], [1, -1], [0, 0]],
        dtype=np.int32,
    ),
}
# PPAGE's speed variant uses the same table; speed is a property of the agents.
ACTION_TABLES["speed_discrete_5"] = ACTION_TABLES["discrete_5"]


def action_table(name: str) -> np.ndarray:
    """Return the int32[n_actions, 2] direction table registered as ``name``."""
    try:
        return ACTION_TABLES[name]
    except KeyError:
        raise KeyError(f"unknown action table {name!r}; known: {sorted(ACTION_TABLES)}") from None


def noop_action(name: str) -> int:
    """Index of the first [0, 0] action of a table (4 for every PPAGE table)."""
    table = action_table(name)
    return int(np.flatnonzero((table == 0).all(axis=1))[0])
