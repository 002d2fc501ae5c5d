"""GridWorld: reset, reset_to and step. The stage order lives here and only here."""
from __future__ import annotations

import functools
import operator
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax import stages
from ppage_jax.actions import action_table, noop_action
from ppage_jax.config import Config, num_obstacles
from ppage_jax.observations import (
    ObservationBuilder, global_state, global_state_size, make_observation)
from ppage_jax.rewards.compose import RewardComposer, term_entries
from ppage_jax.sampling import distinct_sample
from ppage_jax.state import (
    NO_TRUNCATION, UNLIMITED_STAMINA, EnvParams, Layout, State)

StepResult = tuple[jax.Array, State, jax.Array, jax.Array, jax.Array, dict]


class GridWorld:
    """The static half of the environment (shapes, roles, stage functions).

    Everything numeric lives in :class:`EnvParams` (``env.default_params``), so changing a
    weight, a speed or ``max_steps`` never recompiles. All methods are pure and work under
    ``jax.jit`` and ``jax.vmap``.
    """

    def __init__(self, config: Config):
        self.config = config
        env_cfg, agents = config["env"], config["agents"]
        speeds = [agents["predators"]["speed"]] * agents["predators"]["count"] + \
                 [agents["preys"]["speed"]] * agents["preys"]["count"]
        self.layout = Layout(
            size=env_cfg["size"],
            n_predators=agents["predators"]["count"],
            n_prey=agents["preys"]["count"],
            num_obstacles=num_obstacles(config.data),
            max_speed=max(speeds),
            allow_cell_sharing=env_cfg["dynamics"]["allow_cell_sharing"],
            block_agents_by_obstacles=env_cfg["dynamics"]["block_agents_by_obstacles"],
        )
        self.action_type = config["actions"]["type"]
        self.action_table = action_table(self.action_type)
        self.noop_action = noop_action(self.action_type)
        self.composer = RewardComposer(term_entries(config["rewards"]), self.layout)
        self.observation: ObservationBuilder = make_observation(
            config["observations"]["type"], self.layout, config["observations"]["params"],
            config["observations"]["per_agent"])
        self._fixed_map = self._parse_map(env_cfg["map"])
        self._fixed_starts = (None if env_cfg["starts"] is None
                              else np.asarray(env_cfg["starts"], np.int32))
        stamina = [agents["predators"]["stamina"]] * self.layout.n_predators + \
                  [agents["preys"]["stamina"]] * self.layout.n_prey
        max_steps = env_cfg["termination"]["max_steps"]
        self.default_params = EnvParams(
            speeds=jnp.asarray(speeds, jnp.int32),
            stamina=jnp.asarray([UNLIMITED_STAMINA if s is None else s for s in stamina],
                                jnp.int32),
            capture_threshold=jnp.asarray(env_cfg["termination"]["capture_threshold"], jnp.int32),
            max_steps=jnp.asarray(NO_TRUNCATION if max_steps is None else max_steps, jnp.int32),
            reward=self.composer.default_params(config["rewards"]["gamma"]),
        )

    # ----------------------------------------------------------------- static facts
    @property
    def num_agents(self) -> int:
        return self.layout.num_agents

    @property
    def agent_names(self) -> tuple[str, ...]:
        """Agent names in row order: predator_1..P, then prey_1..Q."""
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
        new = params.reward.weights
        for name, value in weights.items():
            new = new.at[..., self._term_index(name)].set(jnp.asarray(value, jnp.float32))
        return params.replace(reward=params.reward.replace(weights=new))

    def with_term_params(self, params: EnvParams, term: str, **values: Any) -> EnvParams:
        """New params with some of one term's params replaced (numbers; Choice by name)."""
        spec = self.composer.specs[self._term_index(term)]
        current = dict(params.reward.term_params[term])
        for key, value in values.items():
            if key not in spec.params:
                raise KeyError(f"unknown param {key!r} of term {term!r}; "
                               f"its params: {sorted(spec.params)}")
            declared = spec.params[key]
            if isinstance(value, str):
                value = declared.index(value)
            current[key] = jnp.asarray(value, current[key].dtype)
        term_params = dict(params.reward.term_params)
        term_params[term] = current
        return params.replace(reward=params.reward.replace(term_params=term_params))

    def _term_index(self, name: str) -> int:
        if name not in self.reward_terms:
            raise KeyError(f"{name!r} is not a configured reward term; configured: "
                           f"{list(self.reward_terms)}")
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

    def reset(self, key: jax.Array, params: EnvParams | None = None) -> tuple[jax.Array, State]:
        """Draw a fresh layout: (obs float32[A, obs_size], state)."""
        positions, obstacles = self._draw_layout(key)
        return self.reset_to(positions, obstacles, params)

    def reset_to(self, positions: jax.Array, obstacles: jax.Array,
                 params: EnvParams | None = None) -> tuple[jax.Array, State]:
        """Start an episode from an explicit layout: positions int32[A,2], obstacles int32[K,2]."""
        params = self.default_params if params is None else params
        positions = jnp.asarray(positions, jnp.int32).reshape(self.num_agents, 2)
        obstacles = jnp.asarray(obstacles, jnp.int32).reshape(self.layout.num_obstacles, 2)
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
    def observe(self, state: State, params: EnvParams | None = None) -> jax.Array:
        """float32[A, observation_size] for every agent (captured ones included)."""
        return self.observation(state, self.default_params if params is None else params)

    def global_state(self, state: State) -> jax.Array:
        """float32[global_state_size], the same for every agent (for centralised critics):
        [x, y, is_predator, captured] per agent in row order, then the obstacle map row-major.
        """
        return global_state(self.layout, state)

    def _substep(self, k: jax.Array, carry, *, budget, directions, params: EnvParams):
        """One sub-step: move -> capture -> reward terms (does nothing once terminated).

        Only the first ``max(params.speeds)`` sub-steps run, so traced speeds below the static
        ``max_speed`` behave exactly like a config built with those speeds.
        """
        state, unit_terms = carry
        is_predator = jnp.asarray(self.is_predator)
        runs = (k < params.speeds.max()) & ((k == 0) | ~state.terminated)
        positions = stages.move(
            state.positions, runs & (k < budget), directions, state.captured,
            state.obstacle_map, is_predator, size=self.layout.size,
            block_by_obstacles=self.layout.block_agents_by_obstacles,
            allow_cell_sharing=self.layout.allow_cell_sharing)
        captured, events = stages.capture(positions, state.captured, is_predator)
        captures_total = state.captures_total + events.num_captured
        terminated, _ = stages.flags(captures_total, state.turn, params.capture_threshold,
                                     params.max_steps)
        after = state.replace(positions=positions, captured=captured,
                              captures_total=captures_total, terminated=terminated)
        unit = jnp.where(runs, self.composer.substep_unit(state, after, events, params.reward),
                         0.0)
        return after, unit_terms + unit

    def step(self, key: jax.Array, state: State, actions: jax.Array,
             params: EnvParams | None = None) -> StepResult:
        """One turn: ``max_speed`` sub-steps of move -> capture -> reward, then flags, observe.

        Returns ``(obs, state, reward float32[A], terminated, truncated, info)`` with
        ``info["reward_terms"]`` float32[A, T] (weighted, summing to ``reward``),
        ``info["reward_terms_unit"]`` float32[A, T] (the same per unit weight: role-masked,
        unweighted, so ``reward_terms == reward_terms_unit * weights`` even for zero weights),
        ``info["captured"]`` bool[A], ``info["captures"]`` (prey captured this turn) and
        ``info["captures_total"]`` (this episode so far).
        """
        del key  # the dynamics are deterministic; the key is part of the API
        params = self.default_params if params is None else params
        actions = jnp.asarray(actions, jnp.int32)
        valid = (actions >= 0) & (actions < self.num_actions)
        directions = jnp.asarray(self.action_table)[jnp.where(valid, actions, self.noop_action)]
        moves = (directions != 0).any(axis=1)
        budget = jnp.where(moves, jnp.minimum(params.speeds, state.stamina), 0)

        start = state.replace(terminated=jnp.asarray(state.terminated, bool))
        zeros = jnp.zeros((self.num_agents, len(self.reward_terms)), jnp.float32)
        substep = lambda k, c: self._substep(k, c, budget=budget, directions=directions,
                                             params=params)
        # Only the per-unit-weight terms are summed over sub-steps; they are weighed once
        # per turn (the weighting is linear, and reward_terms == unit * weights exactly).
        if self.layout.max_speed == 1:
            state, unit_terms = substep(jnp.int32(0), (start, zeros))
        else:
            state, unit_terms = lax.fori_loop(
                0, self.layout.max_speed, substep, (start, zeros), unroll=True)

        unlimited = state.stamina >= UNLIMITED_STAMINA
        stamina = jnp.where(unlimited, state.stamina, jnp.maximum(state.stamina - budget, 0))
        turn = state.turn + 1
        terminated, truncated = stages.flags(state.captures_total, turn,
                                             params.capture_threshold, params.max_steps)
        state = state.replace(stamina=stamina, turn=turn, terminated=terminated,
                              truncated=truncated)
        unit_terms = unit_terms + self.composer.turn_unit(start, state, terminated,
                                                          params.reward)
        terms = self.composer.weigh(unit_terms, params.reward)
        # Column by column, left to right (as NumPy sums a short axis): XLA's reduce over a
        # tiny trailing axis costs a third of a 3v3 step on CPU.
        columns = [terms[:, t] for t in range(terms.shape[1])]
        reward = (functools.reduce(operator.add, columns) if columns
                  else jnp.zeros(self.num_agents, jnp.float32))
        info = {"reward_terms": terms, "reward_terms_unit": unit_terms,
                "captured": state.captured,
                "captures": state.captures_total - start.captures_total,
                "captures_total": state.captures_total}
        return self.observe(state, params), state, reward, terminated, truncated, info


def make(config: Config | str | None = None,
         overrides: Mapping[str, Any] | None = None) -> GridWorld:
    """Build a GridWorld from a Config (or a config path, or None for the defaults)."""
    from ppage_jax.config import load_config

    if not isinstance(config, Config):
        config = load_config(config, overrides)
    elif overrides:
        config = config.with_overrides(overrides)
    return GridWorld(config)
