"""Checking a merged config: every leaf against the schema, the grid layout (agents, map,
start cells), the action table and the registered validators; and what an override implies
beyond its own key, announced with :func:`~ppage_jax.config.fields.notice`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.config.fields import ConfigError, float32_problem, notice, short_repr
from ppage_jax.config.schema import full_schema, validators
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
    _validate_layout(data, fail)
    threshold, n_prey = (
        data["env"]["termination"]["capture_threshold"],
        data["agents"]["preys"]["count"],
    )
    if threshold > n_prey > 0:
        notice(
            f"env.termination.capture_threshold = {threshold} can never be reached: it counts "
            f"captured prey, each prey is captured at most once, and there are {n_prey} "
            f"(agents.preys.count); episodes end only at the step limit"
        )
    env = data["env"]
    if env["map"] is not None:
        # The map fixes the obstacles; the percentage reports its density (so a saved
        # config reloads), and a percentage given beside a map must equal it.
        density = 100.0 * sum(row.count("#") for row in env["map"]) / env["size"] ** 2
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
    if data["actions"]["type"] not in ACTION_TABLES:
        fail(
            "actions.type",
            data["actions"]["type"],
            f"unknown action table; known: {sorted(ACTION_TABLES)}",
        )
    for validator in validators():
        validator(data, fail)
    _check_reward_numbers(data["rewards"], fail)


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


def _validate_layout(data: dict, fail: Callable[..., None]) -> None:
    env, agents = data["env"], data["agents"]
    size = env["size"]
    n_agents = agents["predators"]["count"] + agents["preys"]["count"]
    if n_agents < 1:
        fail(
            "agents.predators.count",
            agents["predators"]["count"],
            "predators and prey together must number at least 1",
        )
    naming = agents["naming"]
    if naming["prey_prefix"] == naming["predator_prefix"]:
        fail(
            "agents.naming.prey_prefix",
            naming["prey_prefix"],
            "must differ from agents.naming.predator_prefix (agent names are unique)",
        )
    if n_agents > size * size:
        fail(
            "agents.preys.count",
            agents["preys"]["count"],
            f"{n_agents} agents do not fit on {size * size} cells ({size}x{size})",
        )
    rows = env["map"]
    if rows is not None:
        if len(rows) != size or any(not isinstance(r, str) or len(r) != size for r in rows):
            fail("env.map", rows, f"must be {size} strings of {size} characters (env.size)")
        if any(set(r) - {"#", "."} for r in rows):
            fail("env.map", rows, "may only contain '#' (obstacle) and '.' (free)")
        free = sum(r.count(".") for r in rows)
        if free < n_agents:
            fail("env.map", rows, f"has {free} free cells for {n_agents} agents")
    starts = env["starts"]
    if starts is not None:
        ok = len(starts) == n_agents and all(
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < size for c in p)
            for p in starts
        )
        if not ok:
            fail(
                "env.starts",
                starts,
                f"must be {n_agents} [x, y] pairs (predators first) with 0 <= x, y < {size}",
            )
        if len({tuple(p) for p in starts}) != n_agents:
            fail("env.starts", starts, "start cells must be distinct")
        if rows is not None and any(rows[y][x] == "#" for x, y in starts):
            fail("env.starts", starts, "a start cell is an obstacle in env.map")
