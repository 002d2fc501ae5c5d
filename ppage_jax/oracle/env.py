"""Slow, plain NumPy oracle of the ppage_jax environment semantics.

This module is the executable specification used by differential (property) tests
against the JAX environment. It is deliberately written with Python loops and simple
NumPy, favours readability over speed, and never imports JAX.

Conventions
-----------
- Agents are one stacked axis: predators first (``predator_1..P``), then prey.
- Positions are ``[x, y]`` with y growing downward; the grid is ``size x size``.
- One ``step`` is one *turn*; a turn runs ``max(speeds)`` sub-steps of
  move -> capture -> reward terms (see ``ReferenceGridWorld.step``).

Potential-based terms are looked up in ``POTENTIALS`` and paid once per turn (see there).
Reward terms are looked up by name in ``REWARD_TERMS`` (name -> function). Each
function receives a ``SubstepContext`` (the state after one sub-step plus that
sub-step's capture events) and the term's params, and returns the *unweighted*
value per agent, ``float64[A]``. Weighting and role masking happen in the composer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

UNLIMITED = None
"""Stamina value meaning "never runs out"."""

# What a term's applies_to may name: one role, or every agent (spelled out: the oracle imports
# nothing from the JAX side of the package).
APPLIES_TO = ("predator", "prey", "all")


@dataclasses.dataclass
class RefState:
    """Full environment state of the oracle (treated as immutable by ``step``)."""

    positions: np.ndarray  # int64[A, 2], [x, y]
    obstacles: np.ndarray  # int64[K, 2], [x, y]
    captured: np.ndarray  # bool[A]; predators are never captured
    stamina: list  # per agent: int, or None (= unlimited)
    turn: int  # turns (env steps) taken so far
    captures_total: int  # cumulative number of prey captured

    def copy(self) -> RefState:
        return RefState(
            positions=self.positions.copy(),
            obstacles=self.obstacles.copy(),
            captured=self.captured.copy(),
            stamina=list(self.stamina),
            turn=int(self.turn),
            captures_total=int(self.captures_total),
        )


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


def _validate_term(spec: Mapping[str, Any]) -> dict:
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


# --------------------------------------------------------------------- environment


class ReferenceGridWorld:
    """NumPy oracle of the ppage_jax grid world (see module docstring).

    Args:
        size: side of the square grid.
        n_predators, n_prey: agent counts; predators occupy rows ``0..P-1``.
        speeds: per-agent speed (moves per turn), length ``A``.
        stamina: per-agent initial stamina (int) or ``None`` for unlimited, length ``A``.
        allow_cell_sharing: if False, a move onto a cell held by a non-captured agent of
            the same role is refused (resolved sequentially in agent order).
        block_agents_by_obstacles: if True, a move onto an obstacle is refused.
        capture_threshold: episode terminates once ``captures_total >= threshold``.
        max_steps: episode truncates once ``turn >= max_steps`` (None: never).
        action_table: ``int[n_actions, 2]`` of ``[dx, dy]``; a ``[0, 0]`` row is a no-op.
        reward_terms: list of ``{"name", "weight", "params", "applies_to"}``.
        gamma: discount of the potential-based terms (see ``POTENTIALS``).
        num_obstacles: obstacle count drawn by ``reset``.
    """

    def __init__(
        self,
        *,
        size: int,
        n_predators: int,
        n_prey: int,
        speeds: Sequence[int],
        stamina: Sequence[int | None],
        allow_cell_sharing: bool = True,
        block_agents_by_obstacles: bool = True,
        capture_threshold: int = 1,
        max_steps: int | None = 500,
        action_table: np.ndarray,
        reward_terms: Sequence[Mapping[str, Any]],
        gamma: float = 0.99,
        num_obstacles: int = 0,
    ) -> None:
        self.size = int(size)
        self.n_predators = int(n_predators)
        self.n_prey = int(n_prey)
        self.n_agents = self.n_predators + self.n_prey
        if len(speeds) != self.n_agents or len(stamina) != self.n_agents:
            raise ValueError(
                f"speeds and stamina need {self.n_agents} entries, got "
                f"{len(speeds)} and {len(stamina)}"
            )
        self.speeds = [int(s) for s in speeds]
        self.max_speed = max(self.speeds) if self.speeds else 1
        self.initial_stamina = [UNLIMITED if s is None else int(s) for s in stamina]
        self.allow_cell_sharing = bool(allow_cell_sharing)
        self.block_agents_by_obstacles = bool(block_agents_by_obstacles)
        self.capture_threshold = int(capture_threshold)
        self.max_steps = None if max_steps is None else int(max_steps)
        self.action_table = np.asarray(action_table, dtype=np.int64).reshape(-1, 2)
        self.n_actions = len(self.action_table)
        self.gamma = float(gamma)
        self.num_obstacles = int(num_obstacles)
        if self.n_agents + self.num_obstacles > self.size * self.size:
            raise ValueError(
                f"{self.n_agents} agents + {self.num_obstacles} obstacles do not fit on a "
                f"{self.size}x{self.size} grid"
            )
        self.is_predator = np.array([True] * self.n_predators + [False] * self.n_prey, dtype=bool)
        self.agent_names = tuple(
            [f"predator_{i + 1}" for i in range(self.n_predators)]
            + [f"prey_{i + 1}" for i in range(self.n_prey)]
        )
        self.terms = [_validate_term(t) for t in reward_terms]
        self.term_names: tuple[str, ...] = tuple(t["name"] for t in self.terms)

    # ----------------------------------------------------------------- reset

    def reset_to(
        self,
        positions: Sequence[Sequence[int]],
        obstacles: Sequence[Sequence[int]],
        stamina: Sequence[int | None] | None = None,
    ) -> RefState:
        """Build a fresh state from an explicit layout (``[x, y]`` rows).

        Nothing is captured, ``turn == 0``. ``stamina=None`` uses the configured stamina.
        Layouts are not checked for overlaps, so tests may start agents on one cell.
        """
        pos = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
        obs = np.asarray(obstacles, dtype=np.int64).reshape(-1, 2)
        if len(pos) != self.n_agents:
            raise ValueError(f"expected {self.n_agents} positions, got {len(pos)}")
        for arr, what in ((pos, "position"), (obs, "obstacle")):
            if arr.size and (arr.min() < 0 or arr.max() >= self.size):
                raise ValueError(f"{what} outside the {self.size}x{self.size} grid: {arr.tolist()}")
        stam = self.initial_stamina if stamina is None else stamina
        if len(stam) != self.n_agents:
            raise ValueError(f"expected {self.n_agents} stamina values, got {len(stam)}")
        return RefState(
            positions=pos.copy(),
            obstacles=obs.copy(),
            captured=np.zeros(self.n_agents, dtype=bool),
            stamina=[UNLIMITED if s is None else int(s) for s in stam],
            turn=0,
            captures_total=0,
        )

    def reset(self, rng: np.random.Generator) -> RefState:
        """Random layout: agents take distinct uniform cells (in agent order), then
        ``num_obstacles`` obstacles take uniform cells among the remaining ones."""
        cells = [(x, y) for x in range(self.size) for y in range(self.size)]
        order = rng.permutation(len(cells))
        agent_cells = [cells[k] for k in order[: self.n_agents]]
        taken = set(agent_cells)
        free = [c for c in cells if c not in taken]
        obs_order = rng.permutation(len(free))
        obstacle_cells = [free[k] for k in obs_order[: self.num_obstacles]]
        return self.reset_to(agent_cells, obstacle_cells)

    # ------------------------------------------------------------------ step

    def _budget(self, action: int, agent: int, stamina: int | None) -> int:
        """Moves agent may make this turn: 0 for a no-op / out-of-range action."""
        if not 0 <= action < self.n_actions:
            return 0
        if not self.action_table[action].any():
            return 0
        speed = self.speeds[agent]
        budget = speed if stamina is None else min(speed, stamina)
        return max(0, budget)

    def _move(self, state: RefState, directions: np.ndarray, active: np.ndarray) -> None:
        """Sequential moves in agent order (mutates ``state.positions``)."""
        obstacle_cells = {tuple(int(c) for c in o) for o in state.obstacles}
        pos = state.positions
        for i in range(self.n_agents):
            if not active[i] or state.captured[i]:
                continue
            cand = np.clip(pos[i] + directions[i], 0, self.size - 1)
            if self.block_agents_by_obstacles and tuple(int(c) for c in cand) in obstacle_cells:
                continue
            if not self.allow_cell_sharing:
                blocked = any(
                    j != i
                    and self.is_predator[j] == self.is_predator[i]
                    and not state.captured[j]
                    and np.array_equal(pos[j], cand)
                    for j in range(self.n_agents)
                )
                if blocked:
                    continue
            pos[i] = cand

    def _capture(self, state: RefState) -> tuple[np.ndarray, np.ndarray]:
        """Capture uncaptured prey sharing a cell with a predator (mutates ``state``).

        Returns ``(newly_captured bool[A], credited bool[A])``.
        """
        newly = np.zeros(self.n_agents, dtype=bool)
        credited = np.zeros(self.n_agents, dtype=bool)
        for i in range(self.n_agents):
            if not self.is_predator[i]:
                continue
            for j in range(self.n_agents):
                if (
                    not self.is_predator[j]
                    and not state.captured[j]
                    and np.array_equal(state.positions[i], state.positions[j])
                ):
                    newly[j] = True
                    credited[i] = True
        state.captured = state.captured | newly
        state.captures_total += int(newly.sum())
        return newly, credited

    def _rewards(self, state: RefState, newly: np.ndarray, credited: np.ndarray) -> np.ndarray:
        """Weighted, role-masked term contributions for one sub-step: float64[A, T]."""
        pos = state.positions
        preds_on_cell = np.array(
            [
                sum(
                    1
                    for j in range(self.n_agents)
                    if self.is_predator[j] and np.array_equal(pos[i], pos[j])
                )
                for i in range(self.n_agents)
            ],
            dtype=np.int64,
        )
        ctx = SubstepContext(
            size=self.size,
            is_predator=self.is_predator.copy(),
            positions=pos.copy(),
            obstacle_cells=frozenset(tuple(int(c) for c in o) for o in state.obstacles),
            captured=state.captured.copy(),
            newly_captured=newly.copy(),
            credited=credited.copy(),
            predators_on_cell=preds_on_cell,
            n_captured=int(newly.sum()),
        )
        out = np.zeros((self.n_agents, len(self.terms)), dtype=np.float64)
        for t, term in enumerate(self.terms):
            if term["name"] in POTENTIALS:
                continue  # paid once per turn, in `step`
            raw = np.asarray(REWARD_TERMS[term["name"]](ctx, term["params"]), dtype=np.float64)
            out[:, t] = term["weight"] * raw * self._role_mask(term)
        return out

    def _role_mask(self, term: Mapping[str, Any]) -> np.ndarray:
        return {
            "predator": self.is_predator.astype(np.float64),
            "prey": (~self.is_predator).astype(np.float64),
            "all": np.ones(self.n_agents, dtype=np.float64),
        }[term["applies_to"]]

    def potentials(self, state: RefState) -> np.ndarray:
        """Unweighted, unmasked phi(state) of every configured term: float64[A, T] (0 for
        terms that are not potentials)."""
        ctx = PotentialStateContext(
            size=self.size,
            is_predator=self.is_predator.copy(),
            positions=state.positions.copy(),
            captured=state.captured.copy(),
        )
        out = np.zeros((self.n_agents, len(self.terms)), dtype=np.float64)
        for t, term in enumerate(self.terms):
            if term["name"] in POTENTIALS:
                out[:, t] = POTENTIALS[term["name"]](ctx, term["params"])
        return out

    def _potential_shaping(self, start: RefState, end: RefState, terminated: bool) -> np.ndarray:
        """Weighted, masked potential shaping of one turn: float64[A, T]."""
        phi_end = np.zeros_like(self.potentials(end)) if terminated else self.potentials(end)
        shaping = self.gamma * phi_end - self.potentials(start)
        out = np.zeros((self.n_agents, len(self.terms)), dtype=np.float64)
        for t, term in enumerate(self.terms):
            out[:, t] = term["weight"] * shaping[:, t] * self._role_mask(term)
        return out

    def step_substep(
        self, state: RefState, directions: np.ndarray, active: np.ndarray
    ) -> tuple[RefState, np.ndarray, int]:
        """One sub-step: move -> capture -> reward terms. Does not touch turn or stamina.

        Args:
            directions: int[A, 2] direction of each agent.
            active: bool[A], whether each agent uses its direction this sub-step.
        Returns:
            ``(new_state, weighted_terms float64[A, T], prey captured in this sub-step)``.
        """
        new = state.copy()
        self._move(new, np.asarray(directions, dtype=np.int64), np.asarray(active, dtype=bool))
        newly, credited = self._capture(new)
        return new, self._rewards(new, newly, credited), int(newly.sum())

    def step(
        self, state: RefState, actions: Sequence[int] | np.ndarray
    ) -> tuple[RefState, np.ndarray, np.ndarray, bool, bool, dict]:
        """One turn: ``max_speed`` sub-steps, then stamina, turn counter and flags.

        Returns ``(new_state, reward float64[A], reward_terms float64[A, T], terminated,
        truncated, info)`` with ``info = {"captured": bool[A], "captures_this_step": int}``.
        """
        actions = [int(a) for a in actions]
        if len(actions) != self.n_agents:
            raise ValueError(f"expected {self.n_agents} actions, got {len(actions)}")
        budgets = [self._budget(a, i, state.stamina[i]) for i, a in enumerate(actions)]
        directions = np.zeros((self.n_agents, 2), dtype=np.int64)
        for i, a in enumerate(actions):
            if 0 <= a < self.n_actions:
                directions[i] = self.action_table[a]

        new = state.copy()
        terms = np.zeros((self.n_agents, len(self.terms)), dtype=np.float64)
        captures_this_step = 0
        for k in range(self.max_speed):
            if k > 0 and new.captures_total >= self.capture_threshold:
                break  # terminated inside the turn: remaining sub-steps do nothing
            active = np.array([k < b for b in budgets], dtype=bool)
            new, sub_terms, n_caught = self.step_substep(new, directions, active)
            terms += sub_terms
            captures_this_step += n_caught

        new.stamina = [
            None if s is None else max(0, s - b) for s, b in zip(new.stamina, budgets, strict=False)
        ]
        new.turn += 1
        terminated = new.captures_total >= self.capture_threshold
        truncated = self.max_steps is not None and new.turn >= self.max_steps
        terms += self._potential_shaping(state, new, terminated)
        info = {"captured": new.captured.copy(), "captures_this_step": captures_this_step}
        return new, terms.sum(axis=1), terms, bool(terminated), bool(truncated), info
