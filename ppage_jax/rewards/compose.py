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

from ppage_jax.config import (
    FLOAT32_RULE,
    float32_number,
    register_spec_check,
    register_validator,
)
from ppage_jax.config.env_spec import RewardTerm, SpecError
from ppage_jax.rewards.registry import (
    CaptureEvents,
    Choice,
    PotentialContext,
    RewardContext,
    TermSpec,
    get_term,
    known_terms_help,
)
from ppage_jax.state import Layout, RewardParams, State

SHAPING_KEYS = ("name", "weight", "params", "applies_to")


@dataclasses.dataclass(frozen=True)
class TermEntry:
    """One configured term: registry name, weight, params (defaults filled) and role."""

    name: str
    weight: float
    params: Mapping[str, Any]
    applies_to: str


def checked_entries(terms: Sequence[RewardTerm]) -> list[TermEntry]:
    """The composer's entries of reward terms in order (an EnvSpec's ``rewards``), each
    checked and its params completed with the declared defaults: a registered term, listed
    once, with the term's params (a Choice one of its options, else a number finite in
    float32). A bad one raises SpecError at ``rewards[i]``."""
    entries: list[TermEntry] = []
    for i, term in enumerate(terms):
        where = f"rewards[{i}]"
        try:
            declared = get_term(term.name)
        except KeyError:
            raise SpecError(
                f"{where}.name", term.name, f"unknown reward term; {known_terms_help()}"
            ) from None
        if term.name in (e.name for e in entries):
            raise SpecError(f"{where}.name", term.name, "is listed twice; give each term once")
        params = declared.defaults()
        for key, value in term.params:
            kind = declared.params.get(key)
            if key not in declared.params:
                allowed = (
                    f"unknown param of reward term {term.name!r}; its params: "
                    f"{sorted(declared.params)}"
                )
            elif isinstance(kind, Choice):
                allowed = "" if value in kind.options else f"must be one of {list(kind.options)}"
            else:
                allowed = "" if float32_number(value) else FLOAT32_RULE
            if allowed:
                raise SpecError(f"{where}.params.{key}", value, allowed)
            params[key] = value
        applies_to = term.applies_to or declared.applies_to
        entries.append(TermEntry(declared.name, float(term.weight), params, applies_to))
    return entries


# A config's reward terms are checked on its EnvSpec, as a GridWorld checks them.
register_spec_check(lambda spec: checked_entries(spec.rewards))


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
    """Static structure of the reward: the ordered term names and their functions, built
    from reward terms (an EnvSpec's ``rewards``), each checked by :func:`checked_entries`."""

    def __init__(self, terms: Sequence[RewardTerm], layout: Layout):
        self.entries = tuple(checked_entries(terms))
        self.names = tuple(e.name for e in self.entries)
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
    """Check the YAML of the rewards.shaping list: each entry a mapping with a 'name' and
    the keys of SHAPING_KEYS, its params a mapping, and no 'base' (the terms themselves are
    checked on the EnvSpec, by :func:`checked_entries`)."""
    for i, item in enumerate(data["rewards"]["shaping"] or []):
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
        if item["name"] == "base":
            fail(
                f"{where}.name",
                item["name"],
                "'base' is not a shaping term: it is added once by rewards.base.enabled, and "
                "listing it here would count the base reward twice (PPAGE issue #32)",
            )
        if not isinstance(item.get("params") or {}, dict):
            fail(f"{where}.params", item["params"], "must be a mapping of param names to values")
