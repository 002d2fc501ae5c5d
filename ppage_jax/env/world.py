"""GridWorld, built from a typed EnvSpec: reset, reset_to, step, observe, the action mask and
the params helpers. The stage order lives here and only here; the rules it checks live in
:mod:`ppage_jax.env.checks`, the start layouts in :mod:`ppage_jax.env.layout`."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
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
from ppage_jax.config.env_spec import EnvSpec, RewardTerm, SpecError
from ppage_jax.env.checks import (
    action_array,
    action_fault,
    check_layout,
    check_memory,
    check_running,
    checkify_layout,
    checkify_step,
    dict_actions,
    finite_float32,
    layout_arrays,
    rows_or_noop,
    state_bytes,
)
from ppage_jax.env.layout import LayoutGenerator
from ppage_jax.observations import (
    ObservationBuilder,
    global_state,
    global_state_size,
    make_observation,
)
from ppage_jax.rewards.compose import RewardComposer
from ppage_jax.rewards.registry import Choice
from ppage_jax.state import NO_TRUNCATION, UNLIMITED_STAMINA, EnvParams, Layout, State, Structure
from ppage_jax.types import Actions, Flag, GlobalState, Info, Key, Observations, Rewards

# (obs, state, reward, terminated, truncated, info), as step returns it.
StepResult = tuple[Observations, State, Rewards, Flag, Flag, Info]


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
        check_memory(
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
        self.composer = RewardComposer(spec.rewards, self.layout)
        try:
            self.observation: ObservationBuilder = make_observation(
                spec.observation_type, self.layout, spec.observation_kwargs, spec.per_agent_kwargs
            )
        except KeyError as err:  # an unknown builder
            raise SpecError("observation_type", spec.observation_type, err.args[0]) from None
        check_memory(
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
        self.generator = LayoutGenerator(self.layout, spec.fixed_map, spec.fixed_starts)
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
            finite_float32(f"weight of {name!r}", value)
            new = new.at[..., index].set(jnp.asarray(value, jnp.float32))
        return params.replace(reward=params.reward.replace(weights=new))

    def with_rewards(
        self, terms: Sequence[RewardTerm], gamma: float, params: EnvParams | None = None
    ) -> EnvParams:
        """``params`` (default: ``default_params``) with the reward of ``terms`` (weights,
        term params, roles) and discount ``gamma``, in this env's term structure: ``terms``
        names each of this env's terms once, in any order (a term kept out of a design at
        weight 0), so params of other designs share this env's compiled programs."""
        given = {t.name: t for t in terms}
        if sorted(given) != sorted(self.reward_terms) or len(given) != len(terms):
            raise ValueError(
                f"reward terms {[t.name for t in terms]} do not match this env's terms "
                f"{list(self.reward_terms)}: give each of them once (a term a design lacks "
                "at weight 0)"
            )
        ordered = [given[name] for name in self.reward_terms]
        reward = RewardComposer(ordered, self.layout).default_params(gamma)
        return self._params(params).replace(reward=reward)

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
                finite_float32(f"param {key!r} of {term!r}", value)
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
    def reset(self, key: Key, params: EnvParams | None = None) -> tuple[Observations, State]:
        """Draw a fresh layout (``env.generator``, a
        :class:`~ppage_jax.env.layout.LayoutGenerator`): (obs float32[A, F], state)."""
        positions, obstacles = self.generator(key)
        return self._start(positions, obstacles, self._params(params))

    def reset_to(
        self, positions: ArrayLike, obstacles: ArrayLike, params: EnvParams | None = None
    ) -> tuple[Observations, State]:
        """Start an episode from an explicit layout: positions int[A, 2] (predators first),
        obstacles int[K, 2], as [x, y].

        Shapes and integer dtypes are checked (never reshaped). Concrete inputs are also
        checked against ``LAYOUT_RULES`` (:mod:`ppage_jax.env.checks`: a cell off the grid,
        an agent on an obstacle, a prey on a predator's cell, two obstacles on one cell):
        ValueError. Traced inputs are not; use :meth:`checked_reset_to` for that inside ``jit``.
        """
        params = self._params(params)
        positions, obstacles = layout_arrays(self.layout, positions, obstacles)
        concrete = not isinstance(positions, Tracer) and not isinstance(obstacles, Tracer)
        if concrete:
            positions, obstacles = check_layout(self.layout, positions, obstacles)
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
        positions, obstacles = layout_arrays(self.layout, positions, obstacles)
        positions, obstacles = checkify_layout(self.layout, positions, obstacles)
        return self._start(positions.astype(jnp.int32), obstacles.astype(jnp.int32), params)

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

    def actions_from_dict(self, actions: Mapping[str, Any]) -> Any:
        """The action array of ``{agent name: action}``, the form the adapters take: one
        integer scalar per agent (an agent left out takes the no-op), stacked in the values'
        own integer width (JAX's promotion of them when one is traced, NumPy's otherwise).

        Not a mapping, or a value that is not an integer scalar (a float, NaN, a bool, an
        array of another shape), raises TypeError / ValueError naming the agent, an unknown
        agent name ValueError; the values are range-checked by :meth:`action_rows` and
        :meth:`step`, not here.
        """
        return dict_actions(actions, self.agent_names, self.noop_action, self.num_actions)

    def _action_fault(self, actions: Any) -> tuple[str | None, Any]:
        """:func:`~ppage_jax.env.checks.action_fault` of concrete ``actions`` for this env."""
        return action_fault(
            actions, self.num_actions, self.noop_action, self.agent_names, self.action_type
        )

    def action_rows(self, actions: Actions) -> jax.Array:
        """int32[A]: the action-table rows ``step`` takes for ``actions`` (an integer array of
        shape (A,), any width; :meth:`actions_from_dict` builds one from a dict), checked as
        ``step`` checks them. A wrong dtype or shape raises TypeError / ValueError (also under
        ``jit``); a concrete action outside ``[0, num_actions)`` raises ValueError naming the
        first (compared in its own width); a traced one becomes the no-op
        (:meth:`checked_step` reports it)."""
        actions = action_array(actions, self.num_agents)
        if not isinstance(actions, Tracer):
            fault, rows = self._action_fault(actions)
            if fault is not None:
                raise ValueError(f"step: {fault}")
            return jnp.asarray(rows)
        return rows_or_noop(actions, self.num_actions, self.noop_action)

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
        actions = action_array(actions, self.num_agents)
        fault = None
        if not isinstance(actions, Tracer):
            fault, actions = self._action_fault(actions)
        checked = functools.partial(self._step_checked, fault=fault)
        return checkify.checkify(checked)(key, state, actions, params)

    def _step_checked(self, key, state, actions, params, *, fault: str | None):
        actions = checkify_step(actions, state, self.num_actions, fault)
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
            check_running(state)
            rows = self.action_rows(actions)
        else:  # checked_step reported them; out-of-range traced actions are the no-op
            actions = action_array(actions, self.num_agents)
            rows = rows_or_noop(actions, self.num_actions, self.noop_action)
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
