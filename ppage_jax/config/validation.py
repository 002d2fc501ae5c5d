"""Checking a merged config: every leaf against the schema, the registered validators, the
checks of its :class:`~ppage_jax.config.env_spec.EnvSpec` (a SpecError reported at the
field's config key, as :func:`ppage_jax.make` reports it) and the sections' validators; and
what an override implies beyond its own key, announced with
:func:`~ppage_jax.config.fields.notice`."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ppage_jax.config.env_spec import EnvSpec, SpecError, config_key, env_spec
from ppage_jax.config.fields import ConfigError, float32_problem, notice, short_repr
from ppage_jax.config.schema import full_schema, section_validators, spec_checks, validators
from ppage_jax.defaults import REGISTRY_LOADERS

DEFAULTS_SOURCE = "package defaults"
OVERRIDE_PREFIX = "override "


def source_of(sources: Mapping[str, str], dotted: str) -> str:
    """The file (or override, or defaults) that supplied a dotted key. A list item
    (``"rewards.shaping[2].weight"``) comes from the file that gave the list."""
    parts = [part.split("[", 1)[0] for part in dotted.split(".")]
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in sources:
            return sources[key]
    return DEFAULTS_SOURCE


def spec_refusal(
    err: SpecError, data: Mapping[str, Any], sources: Mapping[str, str]
) -> ConfigError:
    """The ConfigError of a value the EnvSpec of ``data`` refuses: at the config key of the
    field (:func:`~ppage_jax.config.env_spec.config_key`), naming the file that gave it and
    the value there, with the spec's rule (the fields it mentions written as config keys)."""
    key = config_key(err.field, data)
    allowed = err.rule_for(lambda field: config_key(field, data))
    return ConfigError(source_of(sources, key), key, _value_at(data, key, err.value), allowed)


def _value_at(data: Mapping[str, Any], dotted: str, missing: Any) -> Any:
    """The value at a dotted key (``"rewards.shaping[1].params.radius"``); ``missing``
    where there is none."""
    node: Any = data
    for part in re.findall(r"[^.\[\]]+", dotted):
        try:
            node = node[int(part) if isinstance(node, list) else part]
        except (KeyError, IndexError, TypeError, ValueError):
            return missing
    return node


def _is_override(sources: Mapping[str, str], key: str) -> bool:
    return sources.get(key, "").startswith(OVERRIDE_PREFIX)


def _from_override(sources: Mapping[str, str], prefix: str) -> bool:
    return any(
        _is_override(sources, key)
        for key in sources
        if key == prefix or key.startswith(prefix + ".") or key.startswith(prefix + "[")
    )


def implied_changes(data: dict, sources: dict, observation_type: str) -> None:
    """What an override means beyond its key, each announced with :func:`notice`:

    - ``observations.type`` overridden to another builder (it was ``observation_type``): the
      params and per_agent that did not come from overrides are dropped (that builder's
      defaults apply);
    - ``env.map`` overridden while ``env.obstacle_percentage`` came from a file: the map
      replaces the percentage.
    """
    obs = data["observations"]
    if _is_override(sources, "observations.type") and obs["type"] != observation_type:
        dropped = []
        if not _is_override(sources, "observations.params"):
            keep = {
                key: value
                for key, value in (obs["params"] or {}).items()
                if _is_override(sources, f"observations.params.{key}")
            }
            dropped += [
                f"observations.params.{key}" for key in obs["params"] or {} if key not in keep
            ]
            obs["params"] = keep
        if obs["per_agent"] is not None and not _from_override(sources, "observations.per_agent"):
            dropped.append("observations.per_agent")
            obs["per_agent"] = None
        if dropped:
            notice(
                f"observations.type={obs['type']!r} (override) takes that builder's default "
                f"params; dropped {', '.join(dropped)} (set observations.params.KEY to keep "
                f"one)"
            )
    env = data["env"]
    if (
        env["map"] is not None
        and _from_override(sources, "env.map")
        and "env.obstacle_percentage" in sources
        and not _from_override(sources, "env.obstacle_percentage")
    ):
        notice(
            f"env.map (override) replaces env.obstacle_percentage="
            f"{short_repr(env['obstacle_percentage'])} from "
            f"{sources['env.obstacle_percentage']}: the map fixes the obstacles"
        )
        del sources["env.obstacle_percentage"]


def load_registries() -> None:
    """Register the shipped reward terms, potentials and observation builders
    (``REGISTRY_LOADERS``): a config's terms and builders are checked against their
    registries. It loads JAX's core (the terms are JAX functions), not the learners, the
    pictures or the checkpoints; a repeated call costs nothing."""
    for load in REGISTRY_LOADERS:
        load()


def validate(data: dict, sources: Mapping[str, str]) -> None:
    """Check the merged ``data`` (coercing leaves in place, filling derived values); the
    first problem raises a :class:`ConfigError` naming the source of its key."""
    load_registries()

    def fail(key: str, value: Any, allowed: str) -> NoReturn:
        raise ConfigError(source_of(sources, key), key, value, allowed)

    def walk(node: dict, schema: dict, prefix: str) -> None:
        for key, rule in schema.items():
            dotted = f"{prefix}.{key}" if prefix else key
            if isinstance(rule, dict):
                walk(node[key], rule, dotted)
            else:
                try:
                    node[key] = rule.validate(node[key])
                except ValueError as err:
                    fail(dotted, node[key], str(err))

    walk(data, full_schema(), "")
    for validator in validators():
        validator(data, fail)
    try:
        spec = env_spec(data)
        for check in spec_checks():
            check(spec)
    except SpecError as err:
        raise spec_refusal(err, data, sources) from None
    _settle_env(data, sources, spec, fail)
    for validator in section_validators():
        validator(data, fail)
    _check_reward_numbers(data["rewards"], fail)


def _settle_env(
    data: dict, sources: Mapping[str, str], spec: EnvSpec, fail: Callable[..., None]
) -> None:
    """What the config says beyond its valid EnvSpec: a capture threshold that can never be
    reached is announced; a map fixes ``env.obstacle_percentage`` (its density, so a saved
    config reloads), and a percentage given beside a map must equal it."""
    if spec.capture_threshold > spec.n_prey > 0:
        notice(
            f"env.termination.capture_threshold = {spec.capture_threshold} can never be "
            f"reached: it counts captured prey, each prey is captured at most once, and there "
            f"are {spec.n_prey} (agents.preys.count); episodes end only at the step limit"
        )
    env = data["env"]
    if spec.fixed_map is None:
        return
    density = spec.obstacle_percentage
    if "env.obstacle_percentage" in sources and not math.isclose(
        env["obstacle_percentage"], density, rel_tol=1e-9, abs_tol=1e-9
    ):
        fail(
            "env.obstacle_percentage",
            env["obstacle_percentage"],
            f"must not be set together with env.map: the map fixes the obstacles "
            f"({density:g} % of the cells)",
        )
    env["obstacle_percentage"] = density


def _check_reward_numbers(rewards: dict, fail: Callable[..., None]) -> None:
    """After the reward registry's checks: refuse a weight or numeric param that float32 would
    turn into 0 (:func:`~ppage_jax.config.fields.float32_problem`), and announce a shaping
    entry that gives no weight (it is weighted 1.0)."""
    numbers = [
        (f"rewards.base.params.{k}", v) for k, v in (rewards["base"]["params"] or {}).items()
    ]
    for i, item in enumerate(rewards["shaping"] or []):
        where = f"rewards.shaping[{i}]"
        if "weight" not in item:
            notice(
                f"{where} ({item['name']}) gives no weight: it is weighted 1.0 "
                f"(write weight: 1.0 to say so)"
            )
        numbers.append((f"{where}.weight", item.get("weight", 1.0)))
        numbers += [(f"{where}.params.{k}", v) for k, v in (item.get("params") or {}).items()]
    for key, value in numbers:
        real = isinstance(value, int | float) and not isinstance(value, bool)
        if real and value != 0 and abs(value) <= 1 and float32_problem(float(value)):
            fail(key, value, float32_problem(float(value)))
