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

Reward terms and potentials come from :mod:`ppage_jax.oracle.reward_terms`; the environment
weights them, masks them by role and pays the potentials once per turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppage_jax.oracle.reward_terms import (
    POTENTIALS,
    REWARD_TERMS,
    PotentialStateContext,
    SubstepContext,
    validate_term,
)

UNLIMITED = None
"""Stamina value meaning "never runs out"."""


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
        self.terms = [validate_term(t) for t in reward_terms]
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
