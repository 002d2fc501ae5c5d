"""The reward composer: configured terms -> weighted per-term contributions.

``step`` adds nothing of its own: the reward is ``sum_t weight_t * mask_t * raw_t`` over the
configured terms, and ``info["reward_terms"]`` holds each weighted column.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.config import FLOAT32_MAX, float32_number, register_validator
from ppage_jax.rewards.registry import (
    APPLIES_TO,
    CaptureEvents,
    Choice,
    PotentialContext,
    RewardContext,
    TermSpec,
    get_term,
    known_terms_help,
    reward_terms,
)
from ppage_jax.state import Layout, RewardParams, State

SHAPING_KEYS = ("name", "weight", "params", "applies_to")
FINITE = f"must be a finite number in float32 range (|x| <= {FLOAT32_MAX:.4g})"


@dataclasses.dataclass(frozen=True)
class TermEntry:
    """One configured term: registry name, weight, params (defaults filled) and role."""

    name: str
    weight: float
    params: Mapping[str, Any]
    applies_to: str


def term_entries(rewards: Mapping[str, Any]) -> list[TermEntry]:
    """The configured terms in order: ``base`` (if enabled), then the ``shaping`` list."""
    raw = []
    if rewards["base"]["enabled"]:
        raw.append(
            {
                "name": "base",
                "weight": rewards["base"]["weight"],
                "params": rewards["base"]["params"],
            }
        )
    raw.extend(rewards["shaping"] or [])
    entries = []
    for item in raw:
        spec = get_term(item["name"])
        params = spec.defaults()
        params.update(item.get("params") or {})
        entries.append(
            TermEntry(
                spec.name,
                float(item.get("weight", 1.0)),
                params,
                item.get("applies_to") or spec.applies_to,
            )
        )
    return entries


def role_mask(applies_to: str, is_predator: np.ndarray) -> np.ndarray:
    """float32[A] 0/1 mask of the agents a term applies to."""
    return {"predator": is_predator, "prey": ~is_predator, "all": np.ones_like(is_predator)}[
        applies_to
    ].astype(np.float32)


def param_value(spec: TermSpec, key: str, value: Any) -> jax.Array:
    """The array a term's parameter ``key`` holds in RewardParams: a Choice's index (int32),
    else the number (float32)."""
    declared = spec.params[key]
    if isinstance(declared, Choice):
        return jnp.asarray(declared.index(value), dtype=jnp.int32)
    return jnp.asarray(value, dtype=jnp.float32)


def _call_potential(fn: Callable, state: State, ctx: PotentialContext) -> jax.Array:
    if len(inspect.signature(fn).parameters) == 1:
        return fn(state)
    return fn(state, ctx)


def term_value(
    spec: TermSpec,
    prev: State,
    state: State,
    events: CaptureEvents | None,
    is_predator: jax.Array,
    params: Mapping[str, jax.Array],
    grid_size: int,
) -> jax.Array:
    """float32[A]: the raw value of one term as ``step`` calls it: phi(state) for a
    potential, else its value for the sub-step prev -> state."""
    if spec.potential:
        ctx = PotentialContext(is_predator=is_predator, params=params, grid_size=grid_size)
        return _call_potential(spec.fn, state, ctx)
    assert events is not None, "a term (not a potential) reads its sub-step's events"
    return spec.fn(
        RewardContext(
            prev=prev,
            state=state,
            events=events,
            is_predator=is_predator,
            params=params,
            grid_size=grid_size,
        )
    )


def _checked_column(spec: TermSpec, value: Any, num_agents: int) -> jax.Array:
    """``value`` as the composer uses it; a term of another shape than float32[A] is refused
    with a ValueError naming the term and the shape (static: raised once, at trace time)."""
    shape = tuple(getattr(value, "shape", ()))
    if shape != (num_agents,):
        kind = "potential" if spec.potential else "reward term"
        raise ValueError(
            f"{kind} {spec.name!r} returned shape {shape}; a term must return float32"
            f"[{num_agents}] (one value per agent, predators first); check it with "
            f"ppage_jax.testing.check_reward_term"
        )
    return value


class RewardComposer:
    """Static structure of the reward: the ordered term names and their functions."""

    def __init__(self, entries: Sequence[TermEntry], layout: Layout):
        self.entries = tuple(entries)
        self.names = tuple(e.name for e in entries)
        self.specs = tuple(get_term(n) for n in self.names)
        self.layout = layout
        self._is_predator = layout.is_predator

    @property
    def has_potentials(self) -> bool:
        return any(s.potential for s in self.specs)

    def default_params(self, gamma: float) -> RewardParams:
        """Traced reward params holding the configured weights, masks and term params."""
        return RewardParams(
            weights=jnp.asarray([e.weight for e in self.entries], dtype=jnp.float32).reshape(-1),
            role_masks=jnp.asarray(
                np.stack([role_mask(e.applies_to, self._is_predator) for e in self.entries])
                if self.entries
                else np.zeros((0, self.layout.num_agents), np.float32)
            ),
            term_params={
                e.name: {k: param_value(s, k, v) for k, v in e.params.items()}
                for e, s in zip(self.entries, self.specs, strict=True)
            },
            gamma=jnp.asarray(gamma, dtype=jnp.float32),
        )

    def _mask(self, raw_columns: list[jax.Array], params: RewardParams) -> jax.Array:
        n_agents = self.layout.num_agents
        if not raw_columns:
            return jnp.zeros((n_agents, 0), jnp.float32)
        raw = jnp.stack(raw_columns, axis=1).astype(jnp.float32)
        return raw * params.role_masks.T

    def weigh(self, unit: jax.Array, params: RewardParams) -> jax.Array:
        """float32[A, T]: per-unit-weight contributions times the traced weights."""
        return unit * params.weights[None, :]

    def substep_unit(
        self, prev: State, state: State, events: CaptureEvents, params: RewardParams
    ) -> jax.Array:
        """float32[A, T]: role-masked raw term values of one sub-step, per unit weight."""
        is_predator, size, n = (
            jnp.asarray(self._is_predator),
            self.layout.size,
            self.layout.num_agents,
        )
        columns = [
            jnp.zeros(n, jnp.float32)
            if spec.potential
            else _checked_column(
                spec,
                term_value(
                    spec, prev, state, events, is_predator, params.term_params[spec.name], size
                ),
                n,
            )
            for spec in self.specs
        ]
        return self._mask(columns, params)

    def potentials(self, state: State, params: RewardParams) -> jax.Array:
        """float32[A, T]: phi(state) of each potential term (0 for the other terms)."""
        is_predator, size, n = (
            jnp.asarray(self._is_predator),
            self.layout.size,
            self.layout.num_agents,
        )
        columns = [
            _checked_column(
                spec,
                term_value(
                    spec, state, state, None, is_predator, params.term_params[spec.name], size
                ),
                n,
            )
            if spec.potential
            else jnp.zeros(self.layout.num_agents, jnp.float32)
            for spec in self.specs
        ]
        return (
            jnp.stack(columns, axis=1)
            if columns
            else jnp.zeros((self.layout.num_agents, 0), jnp.float32)
        )

    def nonfinite_fault(self, unit: Any, weighted: Any, weights: Any, turn: int) -> str | None:
        """For concrete float32[A, T] terms of the step from ``turn`` (per unit weight and
        weighted) and their weights float32[T]: the first term, in column order, with a value
        that is not finite (its first agent), in one line; None when every value is finite."""
        unit, weighted = np.asarray(unit), np.asarray(weighted)
        bad = ~np.isfinite(unit) | ~np.isfinite(weighted)
        if not bad.any():
            return None
        t = int(np.argmax(bad.any(axis=0)))
        i = int(np.argmax(bad[:, t]))
        spec = self.specs[t]
        kind = "potential" if spec.potential else "reward term"
        return (
            f"{kind} {spec.name!r} is not finite for {self.layout.agent_names[i]} on the step "
            f"from turn {turn}: "
            f"{float(weighted[i, t])} (weight {float(np.asarray(weights)[t])} x "
            f"{float(unit[i, t])} per unit weight); a term must return finite float32 values "
            "(check it with ppage_jax.testing.check_reward_term)"
        )

    def turn(
        self, start: State, end: State, terminated: jax.Array, params: RewardParams
    ) -> jax.Array:
        """float32[A, T]: potential shaping of one turn, gamma*phi(s')*(1-terminated) - phi(s)."""
        return self.weigh(self.turn_unit(start, end, terminated, params), params)

    def turn_unit(
        self, start: State, end: State, terminated: jax.Array, params: RewardParams
    ) -> jax.Array:
        """float32[A, T]: role-masked potential shaping of one turn, per unit weight."""
        if not self.has_potentials:
            return jnp.zeros((self.layout.num_agents, len(self.specs)), jnp.float32)
        phi_start = self.potentials(start, params)
        phi_end = self.potentials(end, params) * (1.0 - terminated.astype(jnp.float32))
        shaping = params.gamma * phi_end - phi_start
        columns = [shaping[:, t] for t in range(len(self.specs))]
        return self._mask(columns, params)


@register_validator
def validate_rewards(data: dict, fail: Callable[..., None]) -> None:
    """Check rewards.base.params and every rewards.shaping entry against the registry."""
    rewards = data["rewards"]
    _check_params("base", "rewards.base.params", rewards["base"]["params"], fail)
    shaping = rewards["shaping"] or []
    seen = set()
    for i, item in enumerate(shaping):
        where = f"rewards.shaping[{i}]"
        if not isinstance(item, dict) or "name" not in item:
            fail(where, item, f"must be a mapping with keys {list(SHAPING_KEYS)} ('name' required)")
        extra = sorted(set(item) - set(SHAPING_KEYS))
        if extra:
            fail(
                f"{where}.{extra[0]}",
                item[extra[0]],
                f"unknown key; allowed keys of a shaping entry: {list(SHAPING_KEYS)}",
            )
        name = item["name"]
        if not isinstance(name, str):
            fail(
                f"{where}.name",
                name,
                f"must be a reward term name; known terms: {list(reward_terms())}",
            )
        if name == "base":
            fail(
                f"{where}.name",
                name,
                "'base' is not a shaping term: it is added once by rewards.base.enabled, and "
                "listing it here would count the base reward twice (PPAGE issue #32)",
            )
        if name not in reward_terms():
            fail(f"{where}.name", name, f"unknown reward term; {known_terms_help()}")
        if name in seen:
            fail(f"{where}.name", name, "is listed twice; give each term once")
        seen.add(name)
        weight = item.get("weight", 1.0)
        if not float32_number(weight):
            fail(f"{where}.weight", weight, FINITE)
        applies_to = item.get("applies_to")
        if applies_to is not None and applies_to not in APPLIES_TO:
            fail(f"{where}.applies_to", applies_to, f"must be one of {list(APPLIES_TO)}")
        params = item.get("params") or {}
        if not isinstance(params, dict):
            fail(f"{where}.params", params, "must be a mapping of param names to values")
        _check_params(name, f"{where}.params", params, fail)


def _check_params(
    name: str, where: str, params: Mapping[str, Any], fail: Callable[..., None]
) -> None:
    spec = get_term(name)
    for key, value in params.items():
        if key not in spec.params:
            fail(
                f"{where}.{key}",
                value,
                f"unknown param of reward term {name!r}; its params: {sorted(spec.params)}",
            )
        declared = spec.params[key]
        if isinstance(declared, Choice):
            if value not in declared.options:
                fail(f"{where}.{key}", value, f"must be one of {list(declared.options)}")
        elif not float32_number(value):
            fail(f"{where}.{key}", value, FINITE)
