"""The observation-builder registry: ``register_observation``, ``make_observation`` and the
validator of ``observations.yaml``.

A builder is registered as ``factory(layout, **params) -> ObservationBuilder``; its keyword
arguments are the YAML ``observations.params`` and their defaults are the defaults. The
built ``build(state, params)`` is pure array code (jit/vmap safe) returning the same number
of features for every agent. The built :class:`ObservationBuilder` also declares what the
observation's readers need: its value ``bounds`` (the adapters' spaces), its ``slots`` (the
``set`` encoder) and its spatial ``shape`` (the ``cnn`` encoder), so a builder and everything
it feeds are declared in one place.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ppage_jax.config import Field, register_validator, short_repr
from ppage_jax.config.schema import READINGS, declare_observation
from ppage_jax.defaults import ROLES
from ppage_jax.state import EnvParams, Layout, State

DISTANCE_TYPES = ("euclidean", "manhattan")

# View radii (in cells) lie in [0, MAX_RADIUS]; larger views are refused before any
# builder allocates them.
MAX_RADIUS = 1024
RADIUS = Field(
    int, False, lambda v: 0 <= v <= MAX_RADIUS, f"in [0, {MAX_RADIUS}] (view radius, in cells)"
)
FLAG = Field(bool)
DISTANCE = Field(str, False, lambda v: v in DISTANCE_TYPES, f"one of {list(DISTANCE_TYPES)}")


# Said after the known builders when a config names a builder that is not registered.
UNREGISTERED_HINT = (
    "(register it with @pj.register_observation in a module and pass --import "
    "MODULE_OR_FILE, or install a package with a ppage_jax.plugins entry point)"
)

# (low, high) of every feature: float[A, size] (one row per observer) or float[size] (alike)
Bounds = tuple[np.ndarray, np.ndarray]


@dataclasses.dataclass(frozen=True)
class SlotGroup:
    """``count`` slots of ``width`` features starting at feature ``start``. A slot is present
    when its feature ``present`` is non-zero (None: when any feature is); its features ``x``,
    ``y`` are its position (an offset from the observer, or ``absolute`` grid coordinates) and
    ``channels`` the 0/1 flags it adds at that cell (-1: a constant 1; a set encoder stores the
    sums of these flags as small integers)."""

    name: str
    start: int
    width: int
    count: int
    present: int | None
    x: int
    y: int
    channels: tuple[int, ...]
    absolute: bool = False

    @property
    def stop(self) -> int:
        return self.start + self.width * self.count


@dataclasses.dataclass(frozen=True)
class Slots:
    """The fixed slots of an observation, for an encoder that reads them as a set: the slot
    ``groups`` (empty ones included), the ``radius`` of the egocentric window their offsets
    fall in (a view radius, at most the grid size - 1), and the features ``own`` holding the
    observer's absolute (x, y) (None when the observation lacks them)."""

    groups: tuple[SlotGroup, ...]
    radius: int
    own: tuple[int, int] | None = None


@dataclasses.dataclass(frozen=True)
class ObservationBuilder:
    """A built observation function with its static size and what its readers need to know.

    ``build(state, params)`` returns float32[A, size]; ``params`` is the traced EnvParams.
    ``shape`` is the unflattened per-agent shape (e.g. ``(H, W, C)``) of a spatial
    observation (the ``cnn`` encoder reads it); None when it is not spatial.
    ``bounds()`` returns the real :data:`Bounds` of every feature, computed with NumPy
    alone (the adapters ask for them before any JAX backend starts); None: unbounded.
    ``slots`` are the observation's fixed :class:`Slots` (the ``set`` encoder reads them);
    None when it has none.
    """

    name: str
    size: int
    build: Callable[[State, EnvParams], jax.Array]
    shape: tuple[int, ...] | None = None
    bounds: Callable[[], Bounds] | None = None
    slots: Slots | None = None

    def __call__(self, state: State, params: EnvParams) -> jax.Array:
        return self.build(state, params)


@dataclasses.dataclass(frozen=True)
class _Entry:
    factory: Callable[..., ObservationBuilder]
    checks: Mapping[str, Field]
    per_role: tuple[str, ...]
    reads_as: str = "flat"  # "slots", "spatial" or "flat" (config.schema.READINGS)


_BUILDERS: dict[str, _Entry] = {}


def register_observation(
    name: str,
    *,
    checks: Mapping[str, Field] | None = None,
    per_role: Sequence[str] = (),
    reads_as: str = "flat",
):
    """Register ``factory(layout: Layout, **params) -> ObservationBuilder`` as ``name``.

    The factory's keyword arguments are the builder's YAML params (``observations.params``);
    their defaults are the defaults, and any other key is rejected. ``checks`` maps a param
    to the :class:`~ppage_jax.config.Field` its values must satisfy. ``per_role`` names the
    params that ``observations.per_agent`` may set per role; the factory then receives them
    as one value per agent (row order) and must pad to the largest shape. ``reads_as`` says
    which encoder reads it, so a config's ``network`` is checked when it loads: ``"slots"``
    (the builder declares ``slots``; the set encoder), ``"spatial"`` (it declares ``shape``;
    cnn) or ``"flat"`` (mlp only).
    """
    if reads_as not in READINGS:
        raise ValueError(f"observation {name!r}: reads_as must be one of {READINGS}")

    def decorator(factory: Callable[..., ObservationBuilder]):
        if not callable(factory):
            raise TypeError(f"observation builder {name!r} must be callable")
        if name in _BUILDERS:
            raise ValueError(f"observation builder {name!r} is already registered")
        _BUILDERS[name] = _Entry(factory, dict(checks or {}), tuple(per_role), reads_as)
        declare_observation(name, reads_as)
        return factory

    return decorator


def observation_builders() -> tuple[str, ...]:
    """Names of every registered observation builder."""
    return tuple(sorted(_BUILDERS))


def builder_params(name: str) -> dict[str, Any]:
    """The YAML params a builder takes, with their defaults."""
    factory = _get(name).factory
    return {p.name: p.default for p in list(inspect.signature(factory).parameters.values())[1:]}


def _get(name: str) -> _Entry:
    try:
        return _BUILDERS[name]
    except KeyError:
        raise KeyError(
            f"unknown observation builder {name!r}; known: {list(observation_builders())} "
            f"{UNREGISTERED_HINT}"
        ) from None


def _param_problems(name: str, params: Mapping[str, Any]):
    """Yield (key, value, allowed) for each param the builder does not accept."""
    entry, allowed = _get(name), builder_params(name)
    for key, value in params.items():
        if key not in allowed:
            yield key, value, f"unknown param of {name!r}; its params: {sorted(allowed)}"
        elif key in entry.checks:
            try:
                entry.checks[key].validate(value)
            except ValueError as err:
                yield key, value, str(err)


def _per_agent_problems(name: str, per_agent: Any):
    """Yield (dotted key under per_agent, value, allowed) for each bad per-role entry."""
    entry = _get(name)
    if not entry.per_role:
        takers = [n for n in observation_builders() if _BUILDERS[n].per_role]
        yield (
            "",
            per_agent,
            (f"{name!r} takes no per-role params; use null (builders that do: {takers})"),
        )
        return
    for role, body in per_agent.items():
        if role not in ROLES:
            yield f".{role}", body, f"unknown role; allowed roles: {list(ROLES)}"
        elif not isinstance(body, dict):
            yield f".{role}", body, f"must be a mapping of per-role params {list(entry.per_role)}"
        else:
            for key, value in body.items():
                if key not in entry.per_role:
                    yield (
                        f".{role}.{key}",
                        value,
                        f"not a per-role param of {name!r}; allowed: {list(entry.per_role)}",
                    )
                else:
                    try:
                        entry.checks[key].validate(value)
                    except ValueError as err:
                        yield f".{role}.{key}", value, str(err)


def make_observation(
    name: str,
    layout: Layout,
    params: Mapping[str, Any] | None = None,
    per_agent: Mapping[str, Mapping[str, Any]] | None = None,
) -> ObservationBuilder:
    """Build the registered observation ``name`` for a layout.

    ``per_agent`` (``{role: {param: value}}``, roles ``predator``/``prey``) overrides
    per-role params; they reach the factory as one value per agent. Raises ``KeyError`` for
    an unknown builder and ``ValueError`` for a bad param.
    """
    entry, params = _get(name), dict(params or {})
    for key, value, allowed in _param_problems(name, params):
        raise ValueError(f"observation {name!r}: params.{key} = {short_repr(value)}: {allowed}")
    if per_agent:
        for key, value, allowed in _per_agent_problems(name, per_agent):
            raise ValueError(
                f"observation {name!r}: per_agent{key} = {short_repr(value)}: {allowed}"
            )
        defaults = builder_params(name)
        roles = np.where(layout.is_predator, "predator", "prey")
        for key in entry.per_role:
            base = params.get(key, defaults[key])
            params[key] = tuple(per_agent.get(role, {}).get(key, base) for role in roles)
    built = entry.factory(layout, **params)
    declared = {"slots": built.slots is not None, "spatial": built.shape is not None}
    if (
        any(declared.values())
        and entry.reads_as == "flat"
        or (entry.reads_as != "flat" and not declared[entry.reads_as])
    ):
        raise TypeError(
            f"observation {name!r} registered reads_as={entry.reads_as!r} but its builder "
            f"declares slots={declared['slots']}, shape={declared['spatial']}"
        )
    return built


@register_validator
def validate_observations(data: dict, fail: Callable[..., None]) -> None:
    """observations.type must be registered; params and per_agent must be its params."""
    obs = data["observations"]
    if obs["type"] not in _BUILDERS:
        fail(
            "observations.type",
            obs["type"],
            f"unknown observation builder; known: {list(observation_builders())} "
            f"{UNREGISTERED_HINT}",
        )
    for key, value, allowed in _param_problems(obs["type"], obs["params"]):
        fail(f"observations.params.{key}", value, allowed)
    if obs["per_agent"] is not None:
        for key, value, allowed in _per_agent_problems(obs["type"], obs["per_agent"]):
            fail(f"observations.per_agent{key}", value, allowed)
