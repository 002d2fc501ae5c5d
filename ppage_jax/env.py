"""GridWorld, built from a typed EnvSpec: reset, reset_to and step. The stage order lives
here and only here. :func:`make` builds one from a config."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import Tracer
from jax.experimental import checkify
from jax.typing import ArrayLike

from ppage_jax import stages
from ppage_jax.actions import action_table, noop_action
from ppage_jax.config import (
    FLOAT32_MAX,
    Config,
    ConfigError,
    float32_number,
    load_config,
    short_repr,
)
from ppage_jax.config.env_spec import EnvSpec, SpecError, config_key, env_spec
from ppage_jax.observations import (
    ObservationBuilder,
    global_state,
    global_state_size,
    make_observation,
)
from ppage_jax.rewards.compose import RewardComposer, TermEntry
from ppage_jax.rewards.registry import APPLIES_TO, Choice, get_term
from ppage_jax.sampling import distinct_sample
from ppage_jax.state import NO_TRUNCATION, UNLIMITED_STAMINA, EnvParams, Layout, State, Structure
from ppage_jax.types import Actions, Flag, GlobalState, Info, Key, Observations, Rewards

# (obs, state, reward, terminated, truncated, info), as step returns it.
StepResult = tuple[Observations, State, Rewards, Flag, Flag, Info]

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


def state_bytes(layout: Layout) -> int:
    """Bytes of one environment's State: positions, captured, stamina, obstacles, map, scalars."""
    return (
        layout.num_agents * (2 * 4 + 1 + 4) + layout.num_obstacles * 2 * 4 + layout.size**2 + 4 * 4
    )


def _check_memory(field: str, value: Any, needed: int, what: str, instead: str) -> None:
    if needed > MEMORY_LIMIT_BYTES:
        raise SpecError(
            field,
            value,
            f"{what} would take {needed / 2**20:.1f} MiB per environment, above "
            f"the limit of {MEMORY_LIMIT_BYTES // 2**20} MiB; use {instead}",
        )


def _term_entries(spec: EnvSpec) -> list[TermEntry]:
    """The composer's entries of ``spec.rewards`` (registered terms, their params checked
    and completed with the declared defaults); a bad one raises SpecError."""
    entries = []
    for i, term in enumerate(spec.rewards):
        where = f"rewards[{i}]"
        try:
            declared = get_term(term.name)
        except KeyError as err:
            raise SpecError(f"{where}.name", term.name, err.args[0]) from None
        if term.name in (e.name for e in entries):
            raise SpecError(f"{where}.name", term.name, "is listed twice; give each term once")
        if term.applies_to is not None and term.applies_to not in APPLIES_TO:
            raise SpecError(f"{where}.applies_to", term.applies_to, f"must be one of {APPLIES_TO}")
        params = declared.defaults()
        for key, value in term.params:
            kind = declared.params.get(key)
            if key not in declared.params:
                allowed = f"unknown param of {term.name!r}; its params: {sorted(declared.params)}"
            elif isinstance(kind, Choice):
                allowed = "" if value in kind.options else f"must be one of {list(kind.options)}"
            else:
                allowed = "" if float32_number(value) else "must be a number finite in float32"
            if allowed:
                raise SpecError(f"{where}.params.{key}", value, allowed)
            params[key] = value
        applies_to = term.applies_to or declared.applies_to
        entries.append(TermEntry(declared.name, term.weight, params, applies_to))
    return entries


def _finite_float32(what: str, value: Any) -> None:
    """Refuse a concrete number that is not finite in float32 (traced values pass)."""
    if isinstance(value, Tracer):
        return
    host = np.asarray(value)
    if host.dtype.kind not in "iuf" or not np.all(np.abs(host.astype(np.float64)) <= FLOAT32_MAX):
        raise ValueError(
            f"{what} = {short_repr(value)} must be a number finite in float32 "
            f"(|x| <= {FLOAT32_MAX:.4g})"
        )


def _layout_faults(
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


class GridWorld:
    """A grid of predators and prey, built from an :class:`EnvSpec` (its static half: shapes,
    roles, stage functions; ``GridWorld(spec, **fields)`` or ``GridWorld(size=12, ...)``).

    Shapes: ``A`` agents (``n_predators`` predators first, then ``n_prey`` prey), ``F``
    observation features (``observation_size``), ``T`` reward terms, ``K`` obstacles, ``N``
    actions, ``H = W = size``.

    - observation: float32[A, F], one row per agent (captured prey included), built by the
      spec's observation builder (``env.observation``); ``observation_shape`` gives the
      unflattened shape of builders with spatial structure.
    - action: int32[A], one index per agent into the action table (``action_table``
      int32[N, 2] of [dx, dy] moves, ``noop_action`` its no-op). An agent moves up to its
      speed cells per turn while its stamina lasts; a captured prey stays where it is.
    - reward: float32[A], the sum over the T configured terms of weight x role mask x term;
      ``info["reward_terms"]`` float32[A, T] holds the weighted columns in
      ``reward_terms`` order and ``info["reward_terms_unit"]`` the same per unit weight.
    - termination: ``terminated`` (bool) once the captured prey reach
      ``capture_threshold``; ``truncated`` (bool) once ``turn`` reaches ``max_steps``. Both
      may be true on the same step; a finished state must be reset (or stepped through
      :class:`ppage_jax.wrappers.AutoResetEnv`).
    - state: :class:`State`
        - positions: int32[A, 2], [x, y] per agent.
        - captured: bool[A], True for a captured prey (never for a predator).
        - stamina: int32[A], moves left (``UNLIMITED_STAMINA`` or more: unlimited).
        - obstacles: int32[K, 2], [x, y] per obstacle; obstacle_map: bool[H, W] ([y, x]).
        - turn, captures_total: int32 scalars; terminated, truncated: bool scalars.

    Everything numeric lives in :class:`EnvParams` (``env.default_params``), so changing a
    weight, a speed or ``max_steps`` never recompiles. All methods are pure and work under
    ``jax.jit`` and ``jax.vmap``. ``env.spec`` is the spec it was built from; a value the env
    refuses raises :class:`SpecError`, a one-line ValueError naming the spec field
    (:func:`make` reports it as a ConfigError naming the config key instead).
    """

    def __init__(self, spec: EnvSpec | None = None, **fields: Any):
        if spec is None:
            spec = EnvSpec()
        elif not isinstance(spec, EnvSpec):
            raise TypeError(
                f"GridWorld takes an EnvSpec (and keyword fields), got {type(spec).__name__}; "
                "build one from a config with ppage_jax.make(config)"
            )
        if fields:
            spec = spec.replace(**fields)
        self.spec = spec
        self.layout = Layout(
            size=spec.size,
            n_predators=spec.n_predators,
            n_prey=spec.n_prey,
            num_obstacles=spec.num_obstacles,
            max_speed=max(spec.speeds),
            allow_cell_sharing=spec.allow_cell_sharing,
            block_agents_by_obstacles=spec.block_agents_by_obstacles,
            predator_prefix=spec.predator_prefix,
            prey_prefix=spec.prey_prefix,
        )
        _check_memory(
            "size",
            spec.size,
            state_bytes(self.layout),
            f"the state ({self.layout.num_agents} agents, "
            f"{self.layout.num_obstacles} obstacles, {self.layout.size}x"
            f"{self.layout.size} cells)",
            "a smaller grid or fewer obstacles",
        )
        self.action_type = spec.action_type
        self.action_table = action_table(self.action_type)
        self.noop_action = noop_action(self.action_type)
        self.composer = RewardComposer(_term_entries(spec), self.layout)
        try:
            self.observation: ObservationBuilder = make_observation(
                spec.observation_type, self.layout, spec.observation_kwargs, spec.per_agent_kwargs
            )
        except KeyError as err:  # an unknown builder
            raise SpecError("observation_type", spec.observation_type, err.args[0]) from None
        _check_memory(
            "observation_type",
            spec.observation_type,
            4 * self.num_agents * self.observation.size,
            f"the observations ({self.num_agents} agents x "
            f"{self.observation.size} float32 features)",
            "a builder with fewer features (e.g. grid), a smaller radius or fewer obstacles",
        )
        self.structure = Structure(
            reward_terms=self.composer.names,
            observation=self.observation.name,
            n_predators=self.layout.n_predators,
            n_prey=self.layout.n_prey,
            num_obstacles=self.layout.num_obstacles,
        )
        self._fixed_map = self._parse_map(spec.fixed_map)
        self._fixed_starts = (
            None if spec.fixed_starts is None else np.asarray(spec.fixed_starts, np.int32)
        )
        self.default_params = EnvParams(
            speeds=jnp.asarray(spec.speeds, jnp.int32),
            stamina=jnp.asarray(
                [UNLIMITED_STAMINA if s is None else s for s in spec.stamina], jnp.int32
            ),
            capture_threshold=jnp.asarray(spec.capture_threshold, jnp.int32),
            max_steps=jnp.asarray(
                NO_TRUNCATION if spec.max_steps is None else spec.max_steps, jnp.int32
            ),
            reward=self.composer.default_params(spec.gamma),
            structure=self.structure,
        )

    # ----------------------------------------------------------------- static facts
    @property
    def num_agents(self) -> int:
        return self.layout.num_agents

    @property
    def agent_names(self) -> tuple[str, ...]:
        """Agent names in row order: predator_1..P, then prey_1..Q (agents.naming)."""
        return self.layout.agent_names

    @property
    def is_predator(self) -> np.ndarray:
        return self.layout.is_predator

    @property
    def num_actions(self) -> int:
        return int(self.action_table.shape[0])

    @property
    def observation_size(self) -> int:
        return self.observation.size

    @property
    def observation_shape(self) -> tuple[int, ...] | None:
        """Unflattened shape for builders with spatial structure, else None."""
        return self.observation.shape

    @property
    def global_state_size(self) -> int:
        """Length of :meth:`global_state`."""
        return global_state_size(self.layout)

    @property
    def reward_terms(self) -> tuple[str, ...]:
        """Term names in the column order of ``info["reward_terms"]``."""
        return self.composer.names

    # ----------------------------------------------------------------- params helpers
    def with_weights(self, params: EnvParams, **weights: float) -> EnvParams:
        """New params with some term weights replaced (traced: never recompiles).

        Works on stacked params too (weights float32[..., T]); a value may be an array
        broadcasting over the leading axes.
        """
        new = self._params(params).reward.weights
        for name, value in weights.items():
            index = self._term_index(name)
            _finite_float32(f"weight of {name!r}", value)
            new = new.at[..., index].set(jnp.asarray(value, jnp.float32))
        return params.replace(reward=params.reward.replace(weights=new))

    def with_term_params(self, params: EnvParams, term: str, **values: Any) -> EnvParams:
        """New params with some of one term's params replaced (numbers; Choice by name)."""
        spec = self.composer.specs[self._term_index(term)]
        current = dict(self._params(params).reward.term_params[term])
        for key, value in values.items():
            if key not in spec.params:
                raise KeyError(
                    f"unknown param {key!r} of term {term!r}; its params: {sorted(spec.params)}"
                )
            declared = spec.params[key]
            if isinstance(declared, Choice):
                if not isinstance(value, str) or value not in declared.options:
                    raise ValueError(
                        f"param {key!r} of term {term!r} = {value!r}: must be one of "
                        f"{list(declared.options)}"
                    )
                value = declared.index(value)
            elif isinstance(value, str):
                raise ValueError(f"param {key!r} of term {term!r} = {value!r}: must be a number")
            else:
                _finite_float32(f"param {key!r} of {term!r}", value)
            current[key] = jnp.asarray(value, current[key].dtype)
        term_params = dict(params.reward.term_params)
        term_params[term] = current
        return params.replace(reward=params.reward.replace(term_params=term_params))

    def _params(self, params: EnvParams | None) -> EnvParams:
        """``params`` (``default_params`` for None), refused if built for another structure."""
        if params is None:
            return self.default_params
        theirs = getattr(params, "structure", None)
        if theirs is not None and theirs != self.structure:
            raise ValueError(
                "these EnvParams were built for another environment structure ("
                + "; ".join(self.structure.differences(theirs))
                + ", this env vs the params); derive params from this env's default_params "
                "(with_weights, with_term_params, replace)"
            )
        return params

    def _term_index(self, name: str) -> int:
        if name not in self.reward_terms:
            raise KeyError(
                f"{name!r} is not a configured reward term; configured: {list(self.reward_terms)}"
            )
        return self.reward_terms.index(name)

    # ----------------------------------------------------------------- reset
    @staticmethod
    def _parse_map(rows) -> np.ndarray | None:
        if rows is None:
            return None
        return np.array([[c == "#" for c in row] for row in rows], dtype=bool)

    def _draw_layout(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Agents on distinct uniform cells, then obstacles uniformly on the remaining cells."""
        size, n_agents, n_obs = self.layout.size, self.num_agents, self.layout.num_obstacles
        if self._fixed_map is not None:
            ys, xs = np.nonzero(self._fixed_map)
            obstacles = jnp.asarray(np.stack([xs, ys], axis=1).reshape(-1, 2), jnp.int32)
            if self._fixed_starts is not None:
                return jnp.asarray(self._fixed_starts), obstacles
            free = np.flatnonzero(~self._fixed_map.reshape(-1))
            cells = distinct_sample(key, jnp.asarray(free, jnp.int32), n_agents)
        elif self._fixed_starts is not None:
            taken = np.zeros(size * size, bool)
            taken[self._fixed_starts[:, 1] * size + self._fixed_starts[:, 0]] = True
            free = jnp.asarray(np.flatnonzero(~taken), jnp.int32)
            cells = distinct_sample(key, free, n_obs)
            obstacles = jnp.stack([cells % size, cells // size], axis=1)
            return jnp.asarray(self._fixed_starts), obstacles.astype(jnp.int32)
        else:
            cells = distinct_sample(key, size * size, n_agents + n_obs)
        xy = jnp.stack([cells % size, cells // size], axis=1).astype(jnp.int32)
        if self._fixed_map is not None:
            return xy, obstacles
        return xy[:n_agents], xy[n_agents:]

    def reset(self, key: Key, params: EnvParams | None = None) -> tuple[Observations, State]:
        """Draw a fresh layout: (obs float32[A, F], state)."""
        positions, obstacles = self._draw_layout(key)
        return self._start(positions, obstacles, self._params(params))

    def reset_to(
        self, positions: ArrayLike, obstacles: ArrayLike, params: EnvParams | None = None
    ) -> tuple[Observations, State]:
        """Start an episode from an explicit layout: positions int[A, 2] (predators first),
        obstacles int[K, 2], as [x, y].

        Shapes and integer dtypes are checked (never reshaped). Concrete inputs are also
        checked against LAYOUT_RULES (a cell off the grid, an agent on an obstacle, a prey
        on a predator's cell, two obstacles on one cell): ValueError. Traced inputs are not; use
        :meth:`checked_reset_to` for that inside ``jit``.
        """
        params = self._params(params)
        positions, obstacles = self._layout_arrays(positions, obstacles)
        concrete = not isinstance(positions, Tracer) and not isinstance(obstacles, Tracer)
        if concrete:
            host_p, host_o = np.asarray(positions), np.asarray(obstacles)
            faults = _layout_faults(np, host_p, host_o, self.layout.size, self.is_predator)
            for rule, row in zip(LAYOUT_RULES, faults, strict=True):
                if row >= 0:
                    values = host_p if rule.startswith("positions") else host_o
                    raise ValueError(
                        "reset_to: "
                        + rule.format(i=int(row), v=values[row].tolist(), size=self.layout.size)
                    )
            positions, obstacles = host_p.astype(np.int32), host_o.astype(np.int32)
        return self._start(
            jnp.asarray(positions, jnp.int32), jnp.asarray(obstacles, jnp.int32), params
        )

    def checked_reset_to(
        self, positions: jax.Array, obstacles: jax.Array, params: EnvParams | None = None
    ) -> tuple[checkify.Error, tuple[Observations, State]]:
        """:meth:`reset_to` with its layout rules checked on traced inputs too (``jit``,
        ``vmap``), through ``jax.experimental.checkify``: returns ``(error, (obs, state))``;
        ``error.throw()`` raises the first broken rule, ``error.get()`` returns it or None.
        """
        return checkify.checkify(self._reset_to_checked)(positions, obstacles, params)

    def _reset_to_checked(self, positions, obstacles, params):
        params = self._params(params)
        positions, obstacles = self._layout_arrays(positions, obstacles)
        positions, obstacles = jnp.asarray(positions), jnp.asarray(obstacles)
        faults = _layout_faults(jnp, positions, obstacles, self.layout.size, self.is_predator)
        for rule, row in zip(LAYOUT_RULES, faults, strict=True):
            values = positions if rule.startswith("positions") else obstacles
            if values.shape[0]:
                checkify.check(
                    row < 0,
                    "reset_to: " + rule.format(i="{i}", v="{v}", size=self.layout.size),
                    i=row,
                    v=values[row],
                )
        return self._start(positions.astype(jnp.int32), obstacles.astype(jnp.int32), params)

    def _layout_arrays(self, positions, obstacles):
        """Check the shapes (A, 2), (K, 2) and integer dtypes of a layout, never reshaping."""
        arrays = []
        for name, value, rows, what in (
            ("positions", positions, self.num_agents, "[x, y] per agent, predators first"),
            ("obstacles", obstacles, self.layout.num_obstacles, "[x, y] per obstacle"),
        ):
            if not isinstance(value, jax.Array):
                value = np.asarray(value)
            if rows == 0 and value.size == 0:
                value = np.zeros((0, 2), np.int32)  # no obstacles: [] of any dtype will do
            expected = f"an integer array of shape ({rows}, 2) ({what})"
            if value.shape != (rows, 2):
                raise ValueError(
                    f"reset_to: {name} must be {expected}; got shape {tuple(value.shape)}"
                )
            if not jnp.issubdtype(value.dtype, jnp.integer):
                raise TypeError(f"reset_to: {name} must be {expected}; got dtype {value.dtype}")
            arrays.append(value)
        return tuple(arrays)

    def _start(
        self, positions: jax.Array, obstacles: jax.Array, params: EnvParams
    ) -> tuple[Observations, State]:
        """The first (obs, state) of an episode from int32 positions and obstacles."""
        size = self.layout.size
        obstacle_map = jnp.zeros((size, size), bool).at[obstacles[:, 1], obstacles[:, 0]].set(True)
        zero = jnp.zeros((), jnp.int32)
        state = State(
            positions=positions,
            captured=jnp.zeros(self.num_agents, bool),
            stamina=params.stamina,
            obstacles=obstacles,
            obstacle_map=obstacle_map,
            turn=zero,
            captures_total=zero,
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
        )
        return self.observe(state, params), state

    # ----------------------------------------------------------------- step
    def observe(self, state: State, params: EnvParams | None = None) -> Observations:
        """float32[A, observation_size] for every agent (captured ones included)."""
        return self.observation(state, self._params(params))

    def global_state(self, state: State) -> GlobalState:
        """float32[global_state_size], the same for every agent (for centralised critics):
        [x, y, is_predator, captured] per agent in row order, then the obstacle map row-major.
        """
        return global_state(self.layout, state)

    def action_mask(self, state: State, params: EnvParams | None = None) -> jax.Array:
        """bool[A, num_actions]: False for each move that would leave the agent where it is.

        A move is masked when the per-axis clip to the grid cancels it, when its target is an
        obstacle and ``block_agents_by_obstacles`` is on, and for an agent that cannot move
        this turn (a captured prey, or no stamina or zero speed left): such an agent has
        only the no-op. The no-op is never masked. Moves refused because another agent holds
        the target cell (``allow_cell_sharing: false``) are not masked: that depends on the
        other agents' moves and their order. PPAGE itself does not mask; adapters offer it.
        """
        params = self.default_params if params is None else params
        table = jnp.asarray(self.action_table)
        positions = state.positions[:, None, :]  # [A, 1, 2]
        target = jnp.clip(positions + table[None], 0, self.layout.size - 1)  # [A, N, 2]
        moves = (target != positions).any(-1)
        if self.layout.block_agents_by_obstacles:
            moves = moves & ~state.obstacle_map[target[..., 1], target[..., 0]]
        can_move = ~state.captured & (jnp.minimum(params.speeds, state.stamina) > 0)
        return (moves & can_move[:, None]) | (table == 0).all(-1)[None, :]

    def move_agents(self, state: State, moving: jax.Array, directions: jax.Array) -> jax.Array:
        """int32[A, 2]: the positions after one move sub-step of ``state``, every agent with
        ``moving`` (bool[A]) taking one cell along its direction (int[A, 2]) under this env's
        grid, obstacle and cell-sharing rules (:func:`ppage_jax.stages.move`)."""
        return stages.move(
            state.positions,
            moving,
            directions,
            state.captured,
            state.obstacle_map,
            jnp.asarray(self.is_predator),
            size=self.layout.size,
            block_by_obstacles=self.layout.block_agents_by_obstacles,
            allow_cell_sharing=self.layout.allow_cell_sharing,
        )

    def _substep(self, k: jax.Array, carry, *, budget, directions, params: EnvParams):
        """One sub-step: move -> capture -> reward terms (does nothing once terminated).

        Only the first ``max(params.speeds)`` sub-steps run, so traced speeds below the static
        ``max_speed`` behave exactly like a config built with those speeds.
        """
        state, unit_terms = carry
        is_predator = jnp.asarray(self.is_predator)
        runs = (k < params.speeds.max()) & ((k == 0) | ~state.terminated)
        positions = self.move_agents(state, runs & (k < budget), directions)
        captured, events = stages.capture(positions, state.captured, is_predator)
        captures_total = state.captures_total + events.num_captured
        terminated, _ = stages.flags(
            captures_total, state.turn, params.capture_threshold, params.max_steps
        )
        after = state.replace(
            positions=positions,
            captured=captured,
            captures_total=captures_total,
            terminated=terminated,
        )
        unit = jnp.where(runs, self.composer.substep_unit(state, after, events, params.reward), 0.0)
        return after, unit_terms + unit

    def _host_or_jax(self, value: Any, what: str, expected: str) -> Any:
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

    def _action_array(self, actions: Any) -> Any:
        """``actions`` as an array after the static checks: an integer dtype (of any width)
        and the shape (A,); TypeError / ValueError otherwise, also at trace time."""
        expected = (
            f"an integer array of shape ({self.num_agents},) (one action per agent, "
            f"predators first)"
        )
        actions = self._host_or_jax(actions, "actions", expected)
        if not jnp.issubdtype(actions.dtype, jnp.integer):
            raise TypeError(f"step: actions must be {expected}; got dtype {actions.dtype}")
        if actions.shape != (self.num_agents,):
            raise ValueError(f"step: actions must be {expected}; got shape {tuple(actions.shape)}")
        return actions

    def actions_from_dict(self, actions: Mapping[str, Any]) -> Any:
        """The action array of ``{agent name: action}``, the form the adapters take: one
        integer scalar per agent (an agent left out takes the no-op), stacked in the values'
        own integer width (JAX's promotion of them when one is traced, NumPy's otherwise).

        Not a mapping, or a value that is not an integer scalar (a float, NaN, a bool, an
        array of another shape), raises TypeError / ValueError naming the agent, an unknown
        agent name ValueError; the values are range-checked by :meth:`action_rows` and
        :meth:`step`, not here.
        """
        names = list(self.agent_names)
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"step: actions must be a dict {{agent name: action}} (agents: {names}); "
                f"got {type(actions).__name__}"
            )
        for name in actions:
            if name not in names:
                raise ValueError(f"unknown agent {name!r}; agents: {names}")
        noop = np.asarray(self.noop_action, np.int32)
        expected = f"an integer scalar (an index into the action table, [0, {self.num_actions}))"
        values = []
        for name in names:
            what = f"actions[{name!r}]"
            value = self._host_or_jax(actions.get(name, noop), what, expected)
            if not jnp.issubdtype(value.dtype, jnp.integer):
                raise TypeError(f"step: {what} must be {expected}; got dtype {value.dtype}")
            if value.shape != ():
                raise ValueError(f"step: {what} must be {expected}; got shape {value.shape}")
            values.append(value)
        if any(isinstance(v, Tracer) for v in values):
            return jnp.stack(values)
        return np.stack([np.asarray(v) for v in values])

    def _action_fault(self, actions: Any) -> tuple[str | None, Any]:
        """For concrete actions: ``(the broken ACTION_RULE or None, the actions as int32 with
        out-of-range ones replaced by the no-op)``, compared in the actions' own width, before
        any cast to int32 could wrap them into the table."""
        host = np.asarray(actions)
        bad = (host < 0) | (host >= self.num_actions)
        fault = None
        if bad.any():
            i = int(np.argmax(bad))
            fault = ACTION_RULE.format(i=i, v=int(host[i]), n=self.num_actions) + (
                f" ({self.agent_names[i]}; {self.action_type}, whose no-op is {self.noop_action})"
            )
        return fault, np.where(bad, self.noop_action, host).astype(np.int32)

    def action_rows(self, actions: Actions) -> jax.Array:
        """int32[A]: the action-table rows ``step`` takes for ``actions`` (an integer array of
        shape (A,), any width; :meth:`actions_from_dict` builds one from a dict), checked as
        ``step`` checks them. A wrong dtype or shape raises TypeError / ValueError (also under
        ``jit``); a concrete action outside ``[0, num_actions)`` raises ValueError naming the
        first (compared in its own width); a traced one becomes the no-op
        (:meth:`checked_step` reports it)."""
        actions = self._action_array(actions)
        if not isinstance(actions, Tracer):
            fault, rows = self._action_fault(actions)
            if fault is not None:
                raise ValueError(f"step: {fault}")
            return jnp.asarray(rows)
        valid = (actions >= 0) & (actions < self.num_actions)
        return jnp.where(valid, actions, self.noop_action).astype(jnp.int32)

    def _check_running(self, state: State) -> None:
        """Refuse (ValueError) to step a concrete state whose episode has ended; a traced
        one steps on (:meth:`checked_step` reports it)."""
        flags = (state.terminated, state.truncated, state.turn)
        if any(isinstance(x, Tracer) for x in flags):
            return
        terminated = bool(np.asarray(state.terminated))
        truncated = bool(np.asarray(state.truncated))
        if terminated or truncated:
            how = " and ".join(
                w for w, on in (("terminated", terminated), ("truncated", truncated)) if on
            )
            raise ValueError(
                "step: " + FINISHED_RULE.format(how=how, turn=int(np.asarray(state.turn)))
            )

    def checked_step(
        self, key: Key, state: State, actions: Actions, params: EnvParams | None = None
    ) -> tuple[checkify.Error, StepResult]:
        """:meth:`step` with its input rules checked on traced inputs too (``jit``, ``vmap``),
        through ``jax.experimental.checkify``: an action outside ``[0, num_actions)`` and a
        state whose episode has ended (terminated or truncated). Returns ``(error, (obs,
        state, reward, terminated, truncated, info))``; ``error.throw()`` raises the first
        broken rule, ``error.get()`` returns it or None. The step itself is what ``step``
        does under ``jit``: an out-of-range action is the no-op, a finished state steps on.

        Concrete actions are checked in their own width. Under ``jit`` with
        ``jax_enable_x64`` off, JAX keeps the low 32 bits of an int64 NumPy argument at the
        ``jit`` boundary, silently, before this method runs (``2**32`` arrives as 0, a move,
        and is not reported): pass int32 actions into jitted code (docs/semantics.md, "Bad
        inputs to a step").
        """
        actions = self._action_array(actions)
        fault = None
        if not isinstance(actions, Tracer):
            fault, actions = self._action_fault(actions)
        checked = functools.partial(self._step_checked, fault=fault)
        return checkify.checkify(checked)(key, state, actions, params)

    def _step_checked(self, key, state, actions, params, *, fault: str | None):
        if fault is not None:  # found on the concrete actions, in their own width
            checkify.check(
                jnp.asarray(False), "step: " + fault.replace("{", "{{").replace("}", "}}")
            )
        actions = jnp.asarray(actions)
        bad = (actions < 0) | (actions >= self.num_actions)
        i = jnp.argmax(bad)
        checkify.check(
            ~bad.any(),
            "step: " + ACTION_RULE.format(i="{i}", v="{v}", n=self.num_actions),
            i=i,
            v=actions[i],
        )
        terminated = jnp.asarray(state.terminated, bool)
        truncated = jnp.asarray(state.truncated, bool)
        checkify.check(
            ~(terminated | truncated),
            "step: "
            + FINISHED_RULE.format(
                how="terminated {terminated}, truncated {truncated}", turn="{turn}"
            ),
            terminated=terminated,
            truncated=truncated,
            turn=state.turn,
        )
        return self._step(key, state, actions, params, check=False)

    def step(
        self, key: Key, state: State, actions: Actions, params: EnvParams | None = None
    ) -> StepResult:
        """One turn: ``max_speed`` sub-steps of move -> capture -> reward, then flags, observe.

        Returns ``(obs, state, reward float32[A], terminated, truncated, info)`` with
        ``info["reward_terms"]`` float32[A, T] (weighted, summing to ``reward``),
        ``info["reward_terms_unit"]`` float32[A, T] (the same per unit weight: role-masked,
        unweighted, so ``reward_terms == reward_terms_unit * weights`` even for zero weights),
        ``info["captured"]`` bool[A], ``info["captures"]`` (prey captured this turn) and
        ``info["captures_total"]`` (this episode so far).

        ``actions`` is an integer array of shape (A,) (:meth:`action_rows`); another dtype or
        shape, or a list under ``jit``, raises TypeError / ValueError, also at trace time.
        Concrete inputs are checked too: an action outside ``[0, num_actions)`` (in its own
        integer width), a state whose episode has ended and a reward term that comes out NaN
        or infinite (named) raise ValueError. Traced ones are not (an out-of-range action is
        the no-op, a finished state steps on as in PPAGE; no host sync); use
        :meth:`checked_step` for the first two inside ``jit``. docs/semantics.md tabulates
        what each entry point does with a bad input.
        """
        return self._step(key, state, actions, params, check=True)

    def _step(self, key, state, actions, params, *, check: bool) -> StepResult:
        del key  # the dynamics are deterministic; the key is part of the API
        params = self._params(params)
        if check:
            self._check_running(state)
            rows = self.action_rows(actions)
        else:  # checked_step reported them; out-of-range traced actions are the no-op
            actions = self._action_array(actions)
            valid = (actions >= 0) & (actions < self.num_actions)
            rows = jnp.where(valid, actions, self.noop_action).astype(jnp.int32)
        directions = jnp.asarray(self.action_table)[rows]
        moves = (directions != 0).any(axis=1)
        budget = jnp.where(moves, jnp.minimum(params.speeds, state.stamina), 0)

        start = state.replace(terminated=jnp.asarray(state.terminated, bool))
        zeros = jnp.zeros((self.num_agents, len(self.reward_terms)), jnp.float32)

        def substep(k, c):
            return self._substep(k, c, budget=budget, directions=directions, params=params)

        # Only the per-unit-weight terms are summed over sub-steps; they are weighed once
        # per turn (the weighting is linear, and reward_terms == unit * weights exactly).
        if self.layout.max_speed == 1:
            state, unit_terms = substep(jnp.int32(0), (start, zeros))
        else:
            state, unit_terms = lax.fori_loop(
                0, self.layout.max_speed, substep, (start, zeros), unroll=True
            )

        unlimited = state.stamina >= UNLIMITED_STAMINA
        stamina = jnp.where(unlimited, state.stamina, jnp.maximum(state.stamina - budget, 0))
        turn = state.turn + 1
        terminated, truncated = stages.flags(
            state.captures_total, turn, params.capture_threshold, params.max_steps
        )
        state = state.replace(
            stamina=stamina, turn=turn, terminated=terminated, truncated=truncated
        )
        unit_terms = unit_terms + self.composer.turn_unit(start, state, terminated, params.reward)
        terms = self.composer.weigh(unit_terms, params.reward)
        if check and not isinstance(terms, Tracer):
            weights, turn = params.reward.weights, int(start.turn)
            fault = self.composer.nonfinite_fault(unit_terms, terms, weights, turn)
            if fault is not None:
                raise ValueError(f"step: {fault}")
        # Column by column, left to right (as NumPy sums a short axis): XLA's reduce over a
        # tiny trailing axis costs a third of a 3v3 step on CPU.
        columns = [terms[:, t] for t in range(terms.shape[1])]
        reward = (
            functools.reduce(operator.add, columns)
            if columns
            else jnp.zeros(self.num_agents, jnp.float32)
        )
        info = {
            "reward_terms": terms,
            "reward_terms_unit": unit_terms,
            "captured": state.captured,
            "captures": state.captures_total - start.captures_total,
            "captures_total": state.captures_total,
        }
        return self.observe(state, params), state, reward, terminated, truncated, info


def make(
    config: Config | str | None = None, overrides: Mapping[str, Any] | None = None
) -> GridWorld:
    """Build a GridWorld from a Config, a config path or shipped name, or None (the package
    defaults), with dotted ``overrides``. The validated config is translated to an
    :class:`EnvSpec` (:func:`~ppage_jax.config.env_spec.env_spec`); a value the env refuses
    (the memory limits) raises a ConfigError naming its config key and the file it came
    from."""
    if not isinstance(config, Config):
        config = load_config(config, overrides)
    elif overrides:
        config = config.with_overrides(overrides)
    try:
        return GridWorld(env_spec(config))
    except SpecError as err:
        key = config_key(err.field)
        raise ConfigError(config.source_of(key), key, config.get(key), err.allowed) from None
