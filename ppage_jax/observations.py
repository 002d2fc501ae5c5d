"""Observation builders: a registry of factories, each giving float32[A, size] per state."""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp

from ppage_jax.config import register_validator
from ppage_jax.state import Layout, State


@dataclasses.dataclass(frozen=True)
class ObservationBuilder:
    """A built observation function with its static size (and spatial shape, if any)."""

    name: str
    size: int
    build: Callable[[State], jax.Array]
    shape: tuple[int, ...] | None = None

    def __call__(self, state: State) -> jax.Array:
        return self.build(state)


_BUILDERS: dict[str, Callable[..., ObservationBuilder]] = {}


def register_observation(name: str):
    """Register ``factory(layout: Layout, **params) -> ObservationBuilder`` as ``name``.

    The factory's keyword arguments are the builder's YAML params (``observations.params``);
    their defaults are the defaults, and any other key is rejected.
    """
    def decorator(factory: Callable[..., ObservationBuilder]):
        if not callable(factory):
            raise TypeError(f"observation builder {name!r} must be callable")
        if name in _BUILDERS:
            raise ValueError(f"observation builder {name!r} is already registered")
        _BUILDERS[name] = factory
        return factory

    return decorator


def observation_builders() -> tuple[str, ...]:
    """Names of every registered observation builder."""
    return tuple(sorted(_BUILDERS))


def builder_params(name: str) -> dict[str, Any]:
    """The YAML params a builder takes, with their defaults."""
    factory = _get(name)
    return {p.name: p.default for p in list(inspect.signature(factory).parameters.values())[1:]}


def _get(name: str) -> Callable[..., ObservationBuilder]:
    try:
        return _BUILDERS[name]
    except KeyError:
        raise KeyError(f"unknown observation builder {name!r}; known: "
                       f"{list(observation_builders())}") from None


def make_observation(name: str, layout: Layout, params: Mapping[str, Any] | None = None
                     ) -> ObservationBuilder:
    """Build the registered observation ``name`` for a layout."""
    return _get(name)(layout, **dict(params or {}))


@register_validator
def validate_observations(data: dict, fail: Callable[..., None]) -> None:
    """observations.type must be registered and observations.params must be its params."""
    obs = data["observations"]
    if obs["type"] not in _BUILDERS:
        fail("observations.type", obs["type"],
             f"unknown observation builder; known: {list(observation_builders())}")
    allowed = builder_params(obs["type"])
    for key, value in obs["params"].items():
        if key not in allowed:
            fail(f"observations.params.{key}", value,
                 f"unknown param of {obs['type']!r}; its params: {sorted(allowed)}")
    if obs["per_agent"] is not None:
        fail("observations.per_agent", obs["per_agent"],
             f"per-role params are not supported by {obs['type']!r}; use null")


@register_observation("local_only")
def local_only(layout: Layout) -> ObservationBuilder:
    """Own [x, y] and a captured flag: 3 features."""
    def build(state: State) -> jax.Array:
        return jnp.concatenate(
            [state.positions.astype(jnp.float32),
             state.captured.astype(jnp.float32)[:, None]], axis=1)

    return ObservationBuilder("local_only", 3, build)
