"""The rules a :class:`~ppage_jax.env.GridWorld` holds its spec and its inputs to, and their
checks: the construction checks (the memory limits: SpecError; a spec's reward terms are
checked by :func:`~ppage_jax.rewards.compose.checked_entries`) and the input guards of
``reset_to`` and ``step``, concrete (ValueError / TypeError) and traced
(``jax.experimental.checkify``, for ``checked_reset_to`` and ``checked_step``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.experimental import checkify

from ppage_jax.config import FLOAT32_MAX, short_repr
from ppage_jax.config.env_spec import SpecError
from ppage_jax.state import Layout, State

# A spec whose single-environment state, or observation of all agents, would take more
# bytes than this is refused with the estimate (SpecError; a ConfigError from `make`).
MEMORY_LIMIT_BYTES = 64 * 2**20

# The layout rules of `reset_to`, in the order they are checked ({i}: the offending row).
LAYOUT_RULES = (
    "positions[{i}] = {v} is off the {size}x{size} grid (x and y must lie in [0, {size}))",
    "obstacles[{i}] = {v} is off the {size}x{size} grid (x and y must lie in [0, {size}))",
    "positions[{i}] = {v}: the agent stands on an obstacle",
    "positions[{i}] = {v}: the prey shares its cell with a predator (no episode starts so: "
    "reset puts every agent on a cell of its own, and a prey on a predator's cell is captured)",
    "obstacles[{i}] = {v} shares its cell with another obstacle (obstacles must be distinct)",
)


# The input rules of `step` (concrete inputs: ValueError; `checked_step`: checkify).
ACTION_RULE = "actions[{i}] = {v} is outside the action table (an action must lie in [0, {n}))"
FINISHED_RULE = (
    "this state's episode has ended ({how}) at turn {turn}; reset it (env.reset, "
    "env.reset_to) or step through ppage_jax.wrappers.AutoResetEnv"
)


# ----------------------------------------------------------------- construction checks
def state_bytes(layout: Layout) -> int:
    """Bytes of one environment's State: positions, captured, stamina, obstacles, map, scalars."""
    return (
        layout.num_agents * (2 * 4 + 1 + 4) + layout.num_obstacles * 2 * 4 + layout.size**2 + 4 * 4
    )


def check_memory(field: str, value: Any, needed: int, what: str, instead: str) -> None:
    """Refuse (SpecError naming ``field``) ``needed`` bytes above MEMORY_LIMIT_BYTES."""
    if needed > MEMORY_LIMIT_BYTES:
        raise SpecError(
            field,
            value,
            f"{what} would take {needed / 2**20:.1f} MiB per environment, above "
            f"the limit of {MEMORY_LIMIT_BYTES // 2**20} MiB; use {instead}",
        )


# ----------------------------------------------------------------- numbers
def finite_float32(what: str, value: Any) -> None:
    """Refuse a concrete number that is not finite in float32 (traced values pass)."""
    if isinstance(value, Tracer):
        return
    host = np.asarray(value)
    if host.dtype.kind not in "iuf" or not np.all(np.abs(host.astype(np.float64)) <= FLOAT32_MAX):
        raise ValueError(
            f"{what} = {short_repr(value)} must be a number finite in float32 "
            f"(|x| <= {FLOAT32_MAX:.4g})"
        )


# ----------------------------------------------------------------- layouts (reset_to)
def layout_faults(
    xp: Any, positions: Any, obstacles: Any, size: int, is_predator: np.ndarray
) -> list[Any]:
    """The first offending row of each of LAYOUT_RULES (-1 if none), for NumPy (``xp=np``)
    or traced (``xp=jnp``) integer arrays of any width: O(cells) work."""

    def first(bad):
        if bad.shape[0] == 0:
            return xp.asarray(-1)
        return xp.where(bad.any(), xp.argmax(bad), -1)

    def cells(xy):
        xy = xp.clip(xy, 0, size - 1).astype(xp.int32)
        return xy[:, 1] * size + xy[:, 0]

    off_agent = ((positions < 0) | (positions >= size)).any(axis=1)
    off_obstacle = ((obstacles < 0) | (obstacles >= size)).any(axis=1)

    def count(xy, on_grid):  # how many of the rows with on_grid stand on each cell
        weights = on_grid.astype(xp.int32)
        if xp is np:
            return np.bincount(cells(xy), weights, minlength=size * size)
        return jnp.zeros(size * size, jnp.int32).at[cells(xy)].add(weights)

    counts = count(obstacles, ~off_obstacle)
    on_obstacle = (counts[cells(positions)] > 0) & ~off_agent
    predators = count(positions, ~off_agent & is_predator)
    on_predator = (predators[cells(positions)] > 0) & ~off_agent & ~is_predator
    repeated = (counts[cells(obstacles)] > 1) & ~off_obstacle
    return [
        first(off_agent),
        first(off_obstacle),
        first(on_obstacle),
        first(on_predator),
        first(repeated),
    ]


def layout_arrays(layout: Layout, positions: Any, obstacles: Any) -> tuple[Any, Any]:
    """Check the shapes (A, 2), (K, 2) and integer dtypes of a layout, never reshaping."""
    arrays = []
    for name, value, rows, what in (
        ("positions", positions, layout.num_agents, "[x, y] per agent, predators first"),
        ("obstacles", obstacles, layout.num_obstacles, "[x, y] per obstacle"),
    ):
        if not isinstance(value, jax.Array):
            value = np.asarray(value)
        if rows == 0 and value.size == 0:
            value = np.zeros((0, 2), np.int32)  # no obstacles: [] of any dtype will do
        expected = f"an integer array of shape ({rows}, 2) ({what})"
        if value.shape != (rows, 2):
            raise ValueError(f"reset_to: {name} must be {expected}; got shape {tuple(value.shape)}")
        if not jnp.issubdtype(value.dtype, jnp.integer):
            raise TypeError(f"reset_to: {name} must be {expected}; got dtype {value.dtype}")
        arrays.append(value)
    positions, obstacles = arrays
    return positions, obstacles


def check_layout(layout: Layout, positions: Any, obstacles: Any) -> tuple[np.ndarray, np.ndarray]:
    """Concrete ``positions`` and ``obstacles`` (checked by :func:`layout_arrays`) as int32
    NumPy arrays; the first broken rule of LAYOUT_RULES raises ValueError."""
    host_p, host_o = np.asarray(positions), np.asarray(obstacles)
    faults = layout_faults(np, host_p, host_o, layout.size, layout.is_predator)
    for rule, row in zip(LAYOUT_RULES, faults, strict=True):
        if row >= 0:
            values = host_p if rule.startswith("positions") else host_o
            raise ValueError(
                "reset_to: " + rule.format(i=int(row), v=values[row].tolist(), size=layout.size)
            )
    return host_p.astype(np.int32), host_o.astype(np.int32)


def checkify_layout(layout: Layout, positions: Any, obstacles: Any) -> tuple[jax.Array, jax.Array]:
    """``positions`` and ``obstacles`` (checked by :func:`layout_arrays`) as JAX arrays, each
    rule of LAYOUT_RULES checked through ``checkify`` (traced inputs too)."""
    positions, obstacles = jnp.asarray(positions), jnp.asarray(obstacles)
    faults = layout_faults(jnp, positions, obstacles, layout.size, layout.is_predator)
    for rule, row in zip(LAYOUT_RULES, faults, strict=True):
        values = positions if rule.startswith("positions") else obstacles
        if values.shape[0]:
            checkify.check(
                row < 0,
                "reset_to: " + rule.format(i="{i}", v="{v}", size=layout.size),
                i=row,
                v=values[row],
            )
    return positions, obstacles


# ----------------------------------------------------------------- actions and states (step)
def host_or_jax(value: Any, what: str, expected: str) -> Any:
    """``value`` as a JAX array (kept) or a NumPy array. A list or tuple holding traced
    values (under ``jit`` a list is a pytree whose items are traced one by one) and a
    ragged or non-numeric sequence raise TypeError naming ``what``."""
    if isinstance(value, jax.Array):
        return value
    if isinstance(value, list | tuple) and any(
        isinstance(leaf, Tracer) for leaf in jax.tree.leaves(value)
    ):
        raise TypeError(
            f"step: {what} must be {expected}; got a {type(value).__name__} of traced "
            f"values (under jit each item of a {type(value).__name__} is traced on its "
            "own): pass an array, e.g. jnp.asarray(actions)"
        )
    try:
        return np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"step: {what} must be {expected}; got {short_repr(value)}") from None


def action_array(actions: Any, num_agents: int) -> Any:
    """``actions`` as an array after the static checks: an integer dtype (of any width)
    and the shape (A,); TypeError / ValueError otherwise, also at trace time."""
    expected = f"an integer array of shape ({num_agents},) (one action per agent, predators first)"
    actions = host_or_jax(actions, "actions", expected)
    if not jnp.issubdtype(actions.dtype, jnp.integer):
        raise TypeError(f"step: actions must be {expected}; got dtype {actions.dtype}")
    if actions.shape != (num_agents,):
        raise ValueError(f"step: actions must be {expected}; got shape {tuple(actions.shape)}")
    return actions


def dict_actions(
    actions: Mapping[str, Any], agent_names: tuple[str, ...], noop_action: int, num_actions: int
) -> Any:
    """The action array of ``{agent name: action}`` (``GridWorld.actions_from_dict``): one
    integer scalar per agent, an agent left out taking ``noop_action``, stacked in the
    values' own integer width; the checks are those that method documents."""
    names = list(agent_names)
    if not isinstance(actions, Mapping):
        raise TypeError(
            f"step: actions must be a dict {{agent name: action}} (agents: {names}); "
            f"got {type(actions).__name__}"
        )
    for name in actions:
        if name not in names:
            raise ValueError(f"unknown agent {name!r}; agents: {names}")
    noop = np.asarray(noop_action, np.int32)
    expected = f"an integer scalar (an index into the action table, [0, {num_actions}))"
    values = []
    for name in names:
        what = f"actions[{name!r}]"
        value = host_or_jax(actions.get(name, noop), what, expected)
        if not jnp.issubdtype(value.dtype, jnp.integer):
            raise TypeError(f"step: {what} must be {expected}; got dtype {value.dtype}")
        if value.shape != ():
            raise ValueError(f"step: {what} must be {expected}; got shape {value.shape}")
        values.append(value)
    if any(isinstance(v, Tracer) for v in values):
        return jnp.stack(values)
    return np.stack([np.asarray(v) for v in values])


def action_fault(
    actions: Any,
    num_actions: int,
    noop_action: int,
    agent_names: tuple[str, ...],
    action_type: str,
) -> tuple[str | None, Any]:
    """For concrete actions: ``(the broken ACTION_RULE or None, the actions as int32 with
    out-of-range ones replaced by the no-op)``, compared in the actions' own width, before
    any cast to int32 could wrap them into the table."""
    host = np.asarray(actions)
    bad = (host < 0) | (host >= num_actions)
    fault = None
    if bad.any():
        i = int(np.argmax(bad))
        fault = ACTION_RULE.format(i=i, v=int(host[i]), n=num_actions) + (
            f" ({agent_names[i]}; {action_type}, whose no-op is {noop_action})"
        )
    return fault, np.where(bad, noop_action, host).astype(np.int32)


def rows_or_noop(actions: Any, num_actions: int, noop_action: int) -> jax.Array:
    """int32 action-table rows of (traced) ``actions``, one outside ``[0, num_actions)``
    replaced by the no-op (what ``step`` does with it under ``jit``)."""
    valid = (actions >= 0) & (actions < num_actions)
    return jnp.where(valid, actions, noop_action).astype(jnp.int32)


def check_running(state: State) -> None:
    """Refuse (ValueError) to step a concrete state whose episode has ended; a traced
    one steps on (``checked_step`` reports it)."""
    flags = (state.terminated, state.truncated, state.turn)
    if any(isinstance(x, Tracer) for x in flags):
        return
    terminated = bool(np.asarray(state.terminated))
    truncated = bool(np.asarray(state.truncated))
    if terminated or truncated:
        how = " and ".join(
            w for w, on in (("terminated", terminated), ("truncated", truncated)) if on
        )
        raise ValueError("step: " + FINISHED_RULE.format(how=how, turn=int(np.asarray(state.turn))))


def checkify_step(actions: Any, state: State, num_actions: int, fault: str | None) -> jax.Array:
    """``actions`` as a JAX array, the input rules of ``step`` checked through ``checkify``
    (traced inputs too): ``fault`` (found by :func:`action_fault` on concrete actions, in
    their own width), ACTION_RULE, then FINISHED_RULE."""
    if fault is not None:  # found on the concrete actions, in their own width
        checkify.check(jnp.asarray(False), "step: " + fault.replace("{", "{{").replace("}", "}}"))
    actions = jnp.asarray(actions)
    bad = (actions < 0) | (actions >= num_actions)
    i = jnp.argmax(bad)
    checkify.check(
        ~bad.any(),
        "step: " + ACTION_RULE.format(i="{i}", v="{v}", n=num_actions),
        i=i,
        v=actions[i],
    )
    terminated = jnp.asarray(state.terminated, bool)
    truncated = jnp.asarray(state.truncated, bool)
    checkify.check(
        ~(terminated | truncated),
        "step: "
        + FINISHED_RULE.format(how="terminated {terminated}, truncated {truncated}", turn="{turn}"),
        terminated=terminated,
        truncated=truncated,
        turn=state.turn,
    )
    return actions
