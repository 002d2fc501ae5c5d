"""What a config is checked against: the schema of the simulator's sections, and what the
packages built on the config register into it (checks over the merged config, checks of
its EnvSpec, whole sections, reward terms).

A dict in a schema is a nested mapping with fixed keys; a :class:`~ppage_jax.config.fields.Field`
is a leaf. The core schema is about YAML: each key's type, the keys there are, and the rules
of the PPAGE keys an :class:`~ppage_jax.config.env_spec.EnvSpec` leaves out (``env.name``,
``env.seed``, ...); the env's own rules are the spec's (its checks run when a config is
validated). Open mappings (observation params, reward params, the shaping list) are checked
by the registries through the validators registered with :func:`register_validator`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ppage_jax.config.fields import NAME_RULE, Field, int_at_least, is_safe_name
from ppage_jax.defaults import SECTIONS, defaults

if TYPE_CHECKING:
    from ppage_jax.config.env_spec import EnvSpec

_ROLE = {"count": Field(int), "speed": Field(int), "stamina": Field(int, nullable=True)}

CORE_SCHEMA: dict[str, Any] = {
    "env": {
        "name": Field(str, False, is_safe_name, NAME_RULE),
        "size": Field(int),
        "obstacle_percentage": Field(float),
        "seed": Field(int, nullable=True),
        "render_mode": Field(
            str,
            True,
            lambda v: v == "rgb_array",
            "'rgb_array' (there is no window; use ppage-jax render)",
        ),
        "window_size": int_at_least(16),
        "dynamics": {"allow_cell_sharing": Field(bool), "block_agents_by_obstacles": Field(bool)},
        "termination": {"capture_threshold": Field(int), "max_steps": Field(int, nullable=True)},
        "map": Field(list, nullable=True, allowed="of strings, '#' obstacle and '.' free"),
        "starts": Field(list, nullable=True, allowed="of [x, y] pairs, one per agent"),
    },
    "agents": {
        "predators": dict(_ROLE),
        "preys": dict(_ROLE),
        "naming": {"predator_prefix": Field(str), "prey_prefix": Field(str)},
    },
    "observations": {
        "type": Field(str),
        "params": Field(dict),
        "per_agent": Field(dict, nullable=True),
    },
    "rewards": {
        "gamma": Field(float),
        "base": {"enabled": Field(bool), "weight": Field(float), "params": Field(dict)},
        "shaping": Field(list, nullable=True),
        "normalization": {
            "enabled": Field(
                bool,
                False,
                lambda v: v is False,
                "false (reward normalisation is not implemented; PPAGE ignores it)",
            )
        },
    },
    "actions": {
        "type": Field(str),
        "params": Field(dict, False, lambda v: not v, "empty (no action table takes params)"),
    },
}

# A check over the merged config: it takes the config and a `fail(key, value, allowed)`
# callback that raises a ConfigError naming the file the key came from.
Validator = Callable[[dict, Callable[..., None]], None]
_VALIDATORS: list[Validator] = []
# A check of the config's EnvSpec that a registry adds: it raises SpecError.
SpecCheck = Callable[["EnvSpec"], object]
_SPEC_CHECKS: list[SpecCheck] = []
# Sections beyond the core's: name -> (schema, defaults, validator or None).
_SECTIONS: dict[str, tuple[dict, dict, Validator | None]] = {}


def register_validator(fn: Validator) -> Validator:
    """Register a check over the merged config; it reports problems through ``fail``. It
    runs before the EnvSpec's checks (it is how a registry checks the YAML of an open
    mapping or list)."""
    _VALIDATORS.append(fn)
    return fn


def register_spec_check(fn: SpecCheck) -> SpecCheck:
    """Register a check of a config's EnvSpec (after its own checks): it raises a
    :class:`~ppage_jax.config.env_spec.SpecError`, reported at the field's config key."""
    _SPEC_CHECKS.append(fn)
    return fn


def register_section(
    name: str, schema: dict, section_defaults: dict, validator: Validator | None = None
) -> None:
    """Register the schema, defaults and (optional) validator of a config section.

    ``schema`` maps keys to a :class:`~ppage_jax.config.fields.Field` or a nested dict, as the
    core sections do; ``section_defaults`` is the section's default body. The section's
    validator runs after the EnvSpec's checks.
    """
    if name not in SECTIONS:
        raise ValueError(f"unknown config section {name!r}; sections: {list(SECTIONS)}")
    _SECTIONS[name] = (schema, copy.deepcopy(section_defaults), validator)


def validators() -> tuple[Validator, ...]:
    """The checks registered with :func:`register_validator`."""
    return tuple(_VALIDATORS)


def spec_checks() -> tuple[SpecCheck, ...]:
    """The checks registered with :func:`register_spec_check`."""
    return tuple(_SPEC_CHECKS)


def section_validators() -> tuple[Validator, ...]:
    """The validators of the registered sections."""
    return tuple(validator for _, _, validator in _SECTIONS.values() if validator is not None)


def full_schema() -> dict:
    """The schema of every section: the core's plus the registered sections'."""
    return {**CORE_SCHEMA, **{name: schema for name, (schema, _, _) in _SECTIONS.items()}}


def full_defaults() -> dict:
    """The default merged config: the core defaults plus the registered sections'."""
    data = defaults()
    for name, (_, body, _) in _SECTIONS.items():
        data[name] = copy.deepcopy(body)
    return data


@dataclasses.dataclass(frozen=True)
class DeclaredTerm:
    """What checking a config needs of a registered reward term: the agents its formula
    rewards (``applies_to``: predator, prey or all) and its numeric params (a curriculum may
    schedule them)."""

    applies_to: str
    numeric_params: tuple[str, ...] = ()


# Reward terms by name, declared by the reward registry as it registers them.
REWARD_TERMS: dict[str, DeclaredTerm] = {}


def declare_term(name: str, applies_to: str, numeric_params: Iterable[str] = ()) -> None:
    """Declare reward term ``name`` (see :class:`DeclaredTerm`)."""
    REWARD_TERMS[name] = DeclaredTerm(applies_to, tuple(numeric_params))


def forget_term(name: str) -> None:
    """Remove reward term ``name`` (unregistered)."""
    REWARD_TERMS.pop(name, None)


# How each observation builder is read by a network's encoder, declared by the observation
# registry as it registers them: "slots" (the set encoder), "spatial" (cnn) or "flat".
READINGS = ("flat", "slots", "spatial")
OBSERVATION_READINGS: dict[str, str] = {}


def declare_observation(name: str, reads_as: str) -> None:
    """Declare how observation builder ``name`` is read (one of :data:`READINGS`)."""
    if reads_as not in READINGS:
        raise ValueError(f"observation {name!r}: reads_as {reads_as!r} is not one of {READINGS}")
    OBSERVATION_READINGS[name] = reads_as
