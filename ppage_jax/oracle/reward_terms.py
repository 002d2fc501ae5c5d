"""The oracle's reward terms and potentials, in plain NumPy (never imports JAX).

Reward terms are looked up by name in ``REWARD_TERMS`` (name -> function). Each
function receives a ``SubstepContext`` (the state after one sub-step plus that
sub-step's capture events) and the term's params, and returns the *unweighted*
value per agent, ``float64[A]``. Weighting and role masking happen in the composer
(:class:`ppage_jax.oracle.env.ReferenceGridWorld`).

Potential-based terms are looked up in ``POTENTIALS`` and paid once per turn (see there).
:func:`validate_term` checks one term spec against both registries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

# What a term's applies_to may name: one role, or every agent (spelled out: the oracle imports
# nothing from the JAX side of the package).
APPLIES_TO = ("predator", "prey", "all")


@dataclasses.dataclass
class SubstepContext:
    """What a reward term may look at, for one sub-step that ran.

    All per-agent arrays describe the state *after* the sub-step's moves and captures.
    """

    size: int
    is_predator: np.ndarray  # bool[A]
    positions: np.ndarray  # int64[A, 2]
    obstacle_cells: frozenset  # {(x, y), ...}
    captured: np.ndarray  # bool[A], after this sub-step
    newly_captured: np.ndarray  # bool[A], prey captured in this sub-step
    credited: np.ndarray  # bool[A], predators credited in this sub-step
    predators_on_cell: np.ndarray  # int64[A], number of predators on each agent's cell
    n_captured: int  # number of prey captured in this sub-step


# --------------------------------------------------------------------------- terms

_BASE_DEFAULTS = {
    "capture_reward": 100.0,
    "captured_penalty": 100.0,
    "step_cost": 5.0,
    "obstacle_penalty": 200.0,
    "credit": "full",
}
_CREDIT_MODES = ("full", "split", "team")


def base_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """PPAGE base reward, per sub-step.

    Predator: ``-step_cost``; plus the capture bonus according to ``credit``:
    ``full`` -> ``+capture_reward`` to each credited predator (once, however many prey
    it caught); ``split`` -> ``capture_reward / predators on its cell`` to each credited
    predator; ``team`` -> every predator gets ``capture_reward * n_captured``.
    Prey: ``-captured_penalty`` in the sub-step it is captured.
    Any agent standing on an obstacle: ``-obstacle_penalty``.
    """
    p = {**_BASE_DEFAULTS, **params}
    credit = p["credit"]
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    for i in range(n_agents):
        if ctx.is_predator[i]:
            raw[i] -= p["step_cost"]
            if credit == "full":
                if ctx.credited[i]:
                    raw[i] += p["capture_reward"]
            elif credit == "split":
                if ctx.credited[i]:
                    raw[i] += p["capture_reward"] / ctx.predators_on_cell[i]
            else:  # "team"
                raw[i] += p["capture_reward"] * ctx.n_captured
        elif ctx.newly_captured[i]:
            raw[i] -= p["captured_penalty"]
        if tuple(int(c) for c in ctx.positions[i]) in ctx.obstacle_cells:
            raw[i] -= p["obstacle_penalty"]
    return raw


def predator_distance_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """Predators: -(Manhattan distance to the nearest *uncaptured* prey); 0 if none left.

    Prey get 0.
    """
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    alive_prey = [j for j in range(n_agents) if not ctx.is_predator[j] and not ctx.captured[j]]
    if not alive_prey:
        return raw
    for i in range(n_agents):
        if ctx.is_predator[i]:
            dists = [int(np.abs(ctx.positions[i] - ctx.positions[j]).sum()) for j in alive_prey]
            raw[i] = -float(min(dists))
    return raw


def predator_closeness_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """Predators: +(1 - d / (2 (size - 1))), d the distance to the nearest uncaptured prey;
    0 when none is left."""
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    alive_prey = [j for j in range(n_agents) if not ctx.is_predator[j] and not ctx.captured[j]]
    span = 2.0 * max(ctx.size - 1, 1)
    for i in range(n_agents):
        if ctx.is_predator[i] and alive_prey:
            raw[i] = 1.0 - _nearest(ctx.positions, i, alive_prey) / span
    return raw


def survival_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """+1 to each prey still uncaptured after the sub-step; predators get 0."""
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    for i in range(n_agents):
        if not ctx.is_predator[i] and not ctx.captured[i]:
            raw[i] = 1.0
    return raw


def _nearest(positions: np.ndarray, i: int, targets: Sequence[int]) -> int:
    """Manhattan distance from agent ``i`` to the nearest agent in ``targets`` (not empty:
    every caller checks)."""
    if not targets:
        raise ValueError("no target agents")
    return min(int(np.abs(positions[i] - positions[j]).sum()) for j in targets)


def _free_prey_distance_to_predators(is_predator, captured, positions) -> np.ndarray:
    """Per agent: an uncaptured prey's Manhattan distance to the nearest predator, else 0."""
    n_agents = len(is_predator)
    out = np.zeros(n_agents, dtype=np.float64)
    predators = [j for j in range(n_agents) if is_predator[j]]
    for i in range(n_agents):
        if not is_predator[i] and not captured[i] and predators:
            out[i] = float(_nearest(positions, i, predators))
    return out


def prey_distance_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """Uncaptured prey: +(Manhattan distance to the nearest predator); 0 with no predator.

    Predators and captured prey get 0.
    """
    return _free_prey_distance_to_predators(ctx.is_predator, ctx.captured, ctx.positions)


_PROXIMITY_DEFAULTS = {"radius": 1.0}


def capture_proximity_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """Within Manhattan distance ``radius`` (default 1): a predator with an uncaptured prey
    that close gets +1; an uncaptured prey with a predator that close gets -1; others 0."""
    radius = {**_PROXIMITY_DEFAULTS, **params}["radius"]
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    predators = [j for j in range(n_agents) if ctx.is_predator[j]]
    alive_prey = [j for j in range(n_agents) if not ctx.is_predator[j] and not ctx.captured[j]]
    for i in range(n_agents):
        if ctx.is_predator[i] and alive_prey:
            raw[i] = 1.0 if _nearest(ctx.positions, i, alive_prey) <= radius else 0.0
        elif i in alive_prey and predators:
            raw[i] = -1.0 if _nearest(ctx.positions, i, predators) <= radius else 0.0
    return raw


_IN_RANGE_DEFAULTS = {"near": 2.0, "far": 4.0}


def prey_in_range_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """Predators: +1 while the nearest uncaptured prey is ``near`` to ``far`` cells away
    (inclusive); others, and everyone once no prey is left, 0."""
    p = {**_IN_RANGE_DEFAULTS, **params}
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    alive_prey = [j for j in range(n_agents) if not ctx.is_predator[j] and not ctx.captured[j]]
    for i in range(n_agents):
        if ctx.is_predator[i] and alive_prey:
            d = _nearest(ctx.positions, i, alive_prey)
            raw[i] = 1.0 if p["near"] <= d <= p["far"] else 0.0
    return raw


_COHESION_DEFAULTS = {"radius": 1.0}


def predator_cohesion_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """Predators: +1 while another predator is within ``radius`` cells (inclusive), while
    some prey is uncaptured; others 0."""
    radius = {**_COHESION_DEFAULTS, **params}["radius"]
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    if all(ctx.is_predator[j] or ctx.captured[j] for j in range(n_agents)):
        return raw
    for i in range(n_agents):
        others = [j for j in range(n_agents) if j != i and ctx.is_predator[j]]
        if ctx.is_predator[i] and others and _nearest(ctx.positions, i, others) <= radius:
            raw[i] = 1.0
    return raw


_PLACE_DEFAULTS = {"x": 0.0, "y": 0.0, "radius": 1.0}


def place_bonus_term(ctx: SubstepContext, params: Mapping[str, Any]) -> np.ndarray:
    """+1 to each agent (captured prey excepted) within ``radius`` cells of (``x``, ``y``),
    while some prey is uncaptured; others 0."""
    p = {**_PLACE_DEFAULTS, **params}
    n_agents = len(ctx.is_predator)
    raw = np.zeros(n_agents, dtype=np.float64)
    if all(ctx.is_predator[j] or ctx.captured[j] for j in range(n_agents)):
        return raw
    for i in range(n_agents):
        if not ctx.is_predator[i] and ctx.captured[i]:
            continue
        x, y = ctx.positions[i]
        if abs(int(x) - int(p["x"])) + abs(int(y) - int(p["y"])) <= p["radius"]:
            raw[i] = 1.0
    return raw


TermFn = Callable[[SubstepContext, Mapping[str, Any]], np.ndarray]

REWARD_TERMS: dict[str, TermFn] = {
    "base": base_term,
    "predator_distance": predator_distance_term,
    "predator_closeness": predator_closeness_term,
    "survival": survival_term,
    "prey_distance": prey_distance_term,
    "capture_proximity": capture_proximity_term,
    "prey_in_range": prey_in_range_term,
    "predator_cohesion": predator_cohesion_term,
    "place_bonus": place_bonus_term,
}
"""Registry of per-sub-step reward terms: name -> fn(ctx, params) -> unweighted float64[A]."""


# ---------------------------------------------------------------------- potentials


@dataclasses.dataclass
class PotentialStateContext:
    """What a potential phi may look at: one state (between turns) and the roles."""

    size: int
    is_predator: np.ndarray  # bool[A]
    positions: np.ndarray  # int64[A, 2]
    captured: np.ndarray  # bool[A]


def potential_distance_phi(ctx: PotentialStateContext, params: Mapping[str, Any]) -> np.ndarray:
    """Predators: phi = -(Manhattan distance to the nearest uncaptured prey); 0 if none left."""
    n_agents = len(ctx.is_predator)
    phi = np.zeros(n_agents, dtype=np.float64)
    alive_prey = [j for j in range(n_agents) if not ctx.is_predator[j] and not ctx.captured[j]]
    for i in range(n_agents):
        if ctx.is_predator[i] and alive_prey:
            phi[i] = -float(_nearest(ctx.positions, i, alive_prey))
    return phi


def potential_prey_distance_phi(
    ctx: PotentialStateContext, params: Mapping[str, Any]
) -> np.ndarray:
    """Uncaptured prey: phi = +(Manhattan distance to the nearest predator); others 0."""
    return _free_prey_distance_to_predators(ctx.is_predator, ctx.captured, ctx.positions)


PotentialFn = Callable[[PotentialStateContext, Mapping[str, Any]], np.ndarray]

POTENTIALS: dict[str, PotentialFn] = {
    "potential_distance": potential_distance_phi,
    "potential_prey_distance": potential_prey_distance_phi,
}
"""Registry of potentials: name -> phi(ctx, params) -> float64[A]. A potential term pays, once
per turn (not per sub-step), ``gamma * phi(s') * (1 - terminated) - phi(s)``, where ``s`` is
the state before the turn and ``s'`` the state after it; phi is zeroed on termination only."""

# Allowed param names per term (anything else is rejected, never silently ignored).
_TERM_PARAMS: dict[str, frozenset] = {
    "base": frozenset(_BASE_DEFAULTS),
    "predator_distance": frozenset(),
    "predator_closeness": frozenset(),
    "survival": frozenset(),
    "prey_distance": frozenset(),
    "capture_proximity": frozenset(_PROXIMITY_DEFAULTS),
    "prey_in_range": frozenset(_IN_RANGE_DEFAULTS),
    "predator_cohesion": frozenset(_COHESION_DEFAULTS),
    "place_bonus": frozenset(_PLACE_DEFAULTS),
    "potential_distance": frozenset(),
    "potential_prey_distance": frozenset(),
}


def validate_term(spec: Mapping[str, Any]) -> dict:
    """Check one reward-term spec and fill defaults; returns a normalised copy."""
    name = spec.get("name")
    if name not in REWARD_TERMS and name not in POTENTIALS:
        raise ValueError(
            f"unknown reward term {name!r}; known terms: "
            f"{sorted(set(REWARD_TERMS) | set(POTENTIALS))}"
        )
    params = dict(spec.get("params") or {})
    allowed = _TERM_PARAMS.get(name)
    if allowed is not None:
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ValueError(
                f"reward term {name!r}: unknown params {unknown}; allowed: {sorted(allowed)}"
            )
    if name == "base" and params.get("credit", "full") not in _CREDIT_MODES:
        raise ValueError(
            f"reward term 'base': credit={params['credit']!r}; allowed: {list(_CREDIT_MODES)}"
        )
    applies_to = spec.get("applies_to", "all")
    if applies_to not in APPLIES_TO:
        raise ValueError(
            f"reward term {name!r}: applies_to={applies_to!r}; allowed: {list(APPLIES_TO)}"
        )
    return {
        "name": name,
        "weight": float(spec.get("weight", 1.0)),
        "params": params,
        "applies_to": applies_to,
    }
