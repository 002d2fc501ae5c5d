"""The same bad inputs to every entry point of a step (eager and jitted ``step``, jitted
``checked_step``, the JaxMARL and PettingZoo adapters), checked against the table
"Bad inputs to a step" of docs/semantics.md, which the test reads."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import ppage_jax as pj

pytest.importorskip("pettingzoo")
from ppage_jax.compat.jaxmarl import JaxMARLEnv  # noqa: E402
from ppage_jax.compat.pettingzoo import PettingZooEnv  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "semantics.md"

# 5x5, no obstacles, predator_1 at [0, 0], prey at [4, 4] and [4, 0]; one capture ends it.
SMALL = {
    "env.size": 5,
    "env.obstacle_percentage": 0.0,
    "agents.predators.count": 1,
    "agents.preys.count": 2,
    "agents.predators.speed": 1,
    "agents.preys.speed": 1,
    "env.starts": [[0, 0], [4, 4], [4, 0]],
    "env.termination.capture_threshold": 1,
}
STARTS = [[0, 0], [4, 4], [4, 0]]
ACTION_0 = [[1, 0], [4, 4], [4, 0]]  # predator_1 took action 0 (right)
NOOP = 4

# Each row of the table: (the actions of step, predator_1's action for the adapters, x64).
ROWS = {
    "int64 `2**32`, x64 off": (np.array([2**32, NOOP, NOOP], np.int64), np.int64(2**32), False),
    "int64 `2**32`, x64 on": (np.array([2**32, NOOP, NOOP], np.int64), np.int64(2**32), True),
    "`-1`": (np.array([-1, NOOP, NOOP]), -1, False),
    "a float, `1.9`": (np.array([1.9, NOOP, NOOP]), 1.9, False),
    "NaN": (np.array([np.nan, NOOP, NOOP]), float("nan"), False),
    "a Python list `[1, 4, 4]`": ([1, NOOP, NOOP], None, False),  # the list replaces the dict
    "an array of shape `(2,)` (3 agents)": (np.array([1, NOOP]), np.array([1, NOOP]), False),
}
FINISHED = "a finished state"
COLUMNS = (
    "`env.step`",
    "`jax.jit(env.step)`",
    "`jax.jit(env.checked_step)`",
    "JaxMARL `step`",
    "PettingZoo `step`",
)


def doc_table() -> dict[str, dict[str, str]]:
    """The table of docs/semantics.md: {bad input: {column: cell}}."""
    text = DOC.read_text().split("## Bad inputs to a step", 1)[1]
    lines = [line for line in text.splitlines() if line.startswith("|")]
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    header, body = split[0], split[2:]
    return {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in body}


class Entries:
    """One grid, its start and finished states and every entry point, compiled once."""

    def __init__(self):
        self.env = env = pj.make(None, SMALL)
        self.key = jax.random.PRNGKey(0)
        self.start = env.reset(self.key)[1]
        _, state = env.reset_to([[0, 0], [1, 0], [4, 4]], [])
        self.jit_step = jax.jit(env.step)
        self.finished = self.jit_step(self.key, state, np.array([0, NOOP, NOOP]))[1]
        assert bool(self.finished.terminated)
        self.marl = JaxMARLEnv(env, spaces="builtin")  # the action check is the same
        self.pz = PettingZooEnv(env)
        self.jit_checked_step = jax.jit(env.checked_step)
        self.jit_marl_step = jax.jit(self.marl.step)

    def moved(self, positions) -> str:
        got = np.asarray(positions).tolist()
        return {str(STARTS): "no-op", str(ACTION_0): "moves as action 0"}[str(got)]

    def outcomes(self, actions, value, state=None) -> dict[str, tuple[str, str]]:
        """{column: (outcome, error message or "")} of one bad input, as the table words it."""
        env, key, finished = self.env, self.key, state is not None
        state = self.start if state is None else state
        adapter = actions if value is None else {"predator_1": value}

        def eager():
            out = env.step(key, state, actions)
            if finished:
                return "steps on"
            if isinstance(actions, list):  # [1, 4, 4]: predator_1 moves +y, as the array would
                assert out[1].positions.tolist() == [[0, 1], [4, 4], [4, 0]]
                return "read as an array"
            return self.moved(out[1].positions)

        def jitted():
            out = self.jit_step(key, state, actions)
            return "steps on" if finished else self.moved(out[1].positions)

        def checked():
            err, out = self.jit_checked_step(key, state, actions)
            if err.get() is not None:
                ran = "steps on" if finished else f"runs the {self.moved(out[1].positions)}"
                return f"reported (the step {ran})"
            return f"{self.moved(out[1].positions)}, not reported"

        def jaxmarl():
            out = self.jit_marl_step(key, state, adapter if not finished else {})
            if finished:
                assert bool(out[3]["__all__"]) and int(out[1].turn) == 0
                return "auto-resets"
            return self.moved(out[1].positions)

        def pettingzoo():
            self.pz.reset(seed=0)
            if finished:  # predator_1 walks right onto prey_2 at [4, 0]: the episode ends
                for _ in range(4):
                    self.pz.step({"predator_1": 0})
                assert self.pz.agents == []
            self.pz.step(adapter if not finished else {})
            return self.moved(self.pz.grid_state.positions)

        results = {}
        for column, run in zip(COLUMNS, (eager, jitted, checked, jaxmarl, pettingzoo), strict=True):
            try:
                results[column] = (run(), "")
            except Exception as err:  # noqa: BLE001 - the outcome is the exception's type
                results[column] = (f"`{type(err).__name__}`", str(err))
        return results


@pytest.fixture(scope="module")
def entries() -> Entries:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return Entries()


def check_cell(cell: str, outcome: str, message: str) -> None:
    assert cell.startswith(outcome), (cell, outcome, message)
    if message:
        assert "\n" not in message and "Traceback" not in message, message
    if "naming the agent" in cell:
        assert "predator_1" in message, message
    if "naming `actions`" in cell:
        assert "actions" in message, message


def test_the_doc_table_has_every_bad_input_and_entry_point():
    table = doc_table()
    assert list(table) == [*ROWS, FINISHED]
    assert all(tuple(cells) == COLUMNS for cells in table.values())


@pytest.mark.parametrize("row", list(ROWS))
def test_bad_actions_do_what_the_doc_table_says(entries, row):
    actions, value, x64 = ROWS[row]
    with jax.enable_x64(x64):
        got = entries.outcomes(actions, value)
    for column, cell in doc_table()[row].items():
        check_cell(cell, *got[column])


def test_a_finished_state_does_what_the_doc_table_says(entries):
    got = entries.outcomes(np.full(3, NOOP), NOOP, state=entries.finished)
    for column, cell in doc_table()[FINISHED].items():
        check_cell(cell, *got[column])


def test_eager_jaxmarl_raises_what_eager_step_raises(entries):
    # The paragraph under the table. (Eager checked_step reporting the value rules in their own
    # width is test_input_checks.py's.)
    env, key = entries.env, entries.key
    cases = [(*ROWS[row][:2], entries.start) for row in ROWS if not ROWS[row][2]]
    cases = [c for c in cases if not isinstance(c[0], list)]  # eager step reads a list
    cases.append((np.full(3, NOOP), NOOP, entries.finished))
    for actions, value, state in cases:
        with pytest.raises((TypeError, ValueError)) as step_error:
            env.step(key, state, actions)
        with pytest.raises(step_error.type) as marl_error:
            entries.marl.step(key, state, {"predator_1": value})
        if not re.search("dtype|shape", str(step_error.value)):
            assert str(marl_error.value) == str(step_error.value)  # the same rule, same words
