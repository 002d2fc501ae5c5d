"""Slow, plain NumPy/Python oracle of the observation builders (for differential tests).

Written with explicit loops over agents, obstacles and cells, independently of the JAX
builders in ``ppage_jax.observations``; it never imports JAX. Layouts are documented in the
README ("Observations"); every agent-describing block ends with a ``captured`` flag.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

# builder name -> (its mirror, its params' defaults), filled by @mirror
_MIRRORS: dict[str, tuple[Callable[..., list], dict[str, Any]]] = {}


def mirror(name: str, **defaults: Any):
    """Declare ``fn(i, p, positions, obstacles, captured, names, slots, size, speeds, radii)``
    (agent ``i``'s features) the mirror of builder ``name``, whose params default to
    ``defaults``."""

    def register(fn: Callable[..., list]) -> Callable[..., list]:
        _MIRRORS[name] = (fn, defaults)
        return fn

    return register


def mirrored_builders() -> tuple[str, ...]:
    """Names of the observation builders this oracle mirrors."""
    return tuple(sorted(_MIRRORS))


def mirror_params(name: str) -> dict[str, Any]:
    """The params of builder ``name``'s mirror, with their defaults."""
    return dict(_MIRRORS[name][1])


def agent_names(is_predator: Sequence[bool]) -> list[str]:
    """predator_1..P then prey_1..Q, in row order (predators must come first)."""
    names, n_pred, n_prey = [], 0, 0
    for pred in is_predator:
        if pred:
            n_pred += 1
            names.append(f"predator_{n_pred}")
        else:
            n_prey += 1
            names.append(f"prey_{n_prey}")
    return names


def _team(name: str) -> tuple[int, int, int]:
    """(type_id, team_base, team_idx) of a PPAGE agent whose team string is its name."""
    base, index = name.rsplit("_", 1)
    type_id = 0 if base.startswith("predator") else 1
    return type_id, type_id, int(index)


def _dist(dx: int, dy: int, kind: str) -> float:
    if kind == "manhattan":
        return float(abs(dx) + abs(dy))
    return math.sqrt(dx * dx + dy * dy)


def reference_observation(
    name: str,
    params: Mapping[str, Any] | None,
    positions,
    obstacles,
    captured,
    is_predator,
    size: int,
    speeds=None,
    per_agent: Mapping[str, Mapping[str, Any]] | None = None,
) -> np.ndarray:
    """float32[A, F]: the observation of builder ``name`` for every agent.

    ``positions`` [A, 2] and ``obstacles`` [K, 2] as [x, y]; ``captured`` and ``is_predator``
    bool[A]; ``speeds`` int[A] (absolute / relative only; default 1); ``per_agent`` the
    per-role radius mapping of observations.yaml.
    """
    one, defaults = _MIRRORS[name]
    p = {**defaults, **dict(params or {})}
    positions = [(int(x), int(y)) for x, y in np.asarray(positions).reshape(-1, 2)]
    obstacles = [(int(x), int(y)) for x, y in np.asarray(obstacles).reshape(-1, 2)]
    captured = [bool(c) for c in np.asarray(captured)]
    is_predator = [bool(c) for c in np.asarray(is_predator)]
    names = agent_names(is_predator)
    n = len(names)
    speeds = [1] * n if speeds is None else [int(s) for s in speeds]
    radii = []
    for i in range(n):
        role = "predator" if is_predator[i] else "prey"
        radii.append((per_agent or {}).get(role, {}).get("radius", p.get("radius")))
    slots = sorted(range(n), key=lambda i: names[i])
    rows = []
    for i in range(n):
        rows.append(one(i, p, positions, obstacles, captured, names, slots, size, speeds, radii))
    return np.asarray(rows, dtype=np.float32)


@mirror("default")
def _default(i, p, positions, obstacles, captured, names, slots, size, speeds, radii):
    x, y = positions[i]
    out = [x, y, float(captured[i])]
    for j in slots:
        if j != i:
            dx, dy = positions[j][0] - x, positions[j][1] - y
            out += [int(math.sqrt(dx * dx + dy * dy)), float(captured[j])]
    for ox, oy in obstacles:
        out.append(int(math.sqrt((ox - x) ** 2 + (oy - y) ** 2)))
    return out


@mirror("local_only")
def _local_only(i, p, positions, obstacles, captured, names, slots, size, speeds, radii):
    return [positions[i][0], positions[i][1], float(captured[i])]


@mirror("local_radius", radius=3, include_agents=True, include_obstacles=True)
def _local_radius(i, p, positions, obstacles, captured, names, slots, size, speeds, radii):
    x, y = positions[i]
    r = radii[i]
    out = [x, y, r, float(captured[i])]
    for j in slots:
        dx, dy = positions[j][0] - x, positions[j][1] - y
        d = abs(dx) + abs(dy)
        if j != i and p["include_agents"] and d <= r:
            out += [1, dx, dy, d, _team(names[j])[0], float(captured[j])]
        else:
            out += [0] * 6
    for ox, oy in obstacles:
        dx, dy = ox - x, oy - y
        d = abs(dx) + abs(dy)
        if p["include_obstacles"] and d <= r:
            out += [1, dx, dy, d]
        else:
            out += [0] * 4
    return out


def _entity(i, p, positions, obstacles, captured, names, slots, size, speeds, radii, relative):
    x, y = positions[i]
    kind = p["distance_type"]
    own = [0, 0] if relative else [x, y]
    out = own + list(_team(names[i])) + [speeds[i], float(captured[i])]
    for j in slots:
        if j == i:
            continue
        dx, dy = positions[j][0] - x, positions[j][1] - y
        if p["include_agents"]:
            where = [dx, dy] if relative else list(positions[j])
            out += where + [_dist(dx, dy, kind)] + list(_team(names[j])) + [float(captured[j])]
        else:
            out += [0] * 7
    for ox, oy in obstacles:
        dx, dy = ox - x, oy - y
        if p["include_obstacles"]:
            out += ([dx, dy] if relative else [ox, oy]) + [_dist(dx, dy, kind)]
        else:
            out += [0] * 3
    if relative:
        out += [x, size - 1 - x, y, size - 1 - y] if p["include_walls"] else [0] * 4
    return out


@mirror("absolute", include_agents=True, include_obstacles=True, distance_type="euclidean")
def _absolute(*args):
    return _entity(*args, relative=False)


@mirror(
    "relative",
    include_agents=True,
    include_obstacles=True,
    include_walls=False,
    distance_type="manhattan",
)
def _relative(*args):
    return _entity(*args, relative=True)


@mirror("grid", radius=3)
def _grid(i, p, positions, obstacles, captured, names, slots, size, speeds, radii):
    big = max(radii)
    r = radii[i]
    x, y = positions[i]
    width = 2 * big + 1
    window = np.zeros((width, width, 5))
    obstacle_cells = set(obstacles)
    for u in range(width):
        for v in range(width):
            du, dv = u - big, v - big
            if max(abs(du), abs(dv)) > r:
                continue
            cx, cy = x + dv, y + du
            if not (0 <= cx < size and 0 <= cy < size):
                window[u, v, 0] = 1
                continue
            window[u, v, 1] = float((cx, cy) in obstacle_cells)
            for j, (ax, ay) in enumerate(positions):
                if (ax, ay) != (cx, cy):
                    continue
                if names[j].startswith("predator"):
                    window[u, v, 2] += 1
                elif captured[j]:
                    window[u, v, 4] += 1
                else:
                    window[u, v, 3] += 1
    return list(window.reshape(-1))


def reference_global_state(positions, obstacles, captured, is_predator, size: int) -> np.ndarray:
    """float32[4A + size*size]: [x, y, is_predator, captured] per agent, then the obstacle map."""
    out = []
    for (x, y), pred, cap in zip(
        np.asarray(positions).tolist(), is_predator, captured, strict=False
    ):
        out += [x, y, float(bool(pred)), float(bool(cap))]
    cells = {(int(x), int(y)) for x, y in np.asarray(obstacles).reshape(-1, 2)}
    for yy in range(size):
        for xx in range(size):
            out.append(float((xx, yy) in cells))
    return np.asarray(out, dtype=np.float32)
