"""YAML -> validated Config: PPAGE's six-file layout, package defaults, dotted overrides.

A config directory holds up to six files (``env.yaml``, ``agents.yaml``, ``observations.yaml``,
``rewards.yaml``, ``actions.yaml``, ``experiment.yaml``), each with a single top-level key equal
to its name, exactly as in PPAGE. Missing files and keys are filled from the package defaults.
Every key is checked: an unknown key, a wrong type or a value out of range raises a
:class:`ConfigError` that names the file, the dotted key, the value and what is allowed.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.defaults import SECTIONS, defaults

DEFAULTS_SOURCE = "package defaults"


class ConfigError(ValueError):
    """A config value that is not allowed; names the file, the key, the value and the rule."""

    def __init__(self, source: str, key: str, value: Any, allowed: str):
        self.source, self.key, self.value, self.allowed = source, key, value, allowed
        super().__init__(f"{source}: {key} = {value!r}: {allowed}")


@dataclasses.dataclass(frozen=True)
class Field:
    """One leaf of the schema: accepted types, nullability and a range check."""

    kind: type | tuple[type, ...]
    nullable: bool = False
    check: Callable[[Any], bool] | None = None
    allowed: str = ""

    def validate(self, value: Any) -> Any:
        """Return the value coerced to its kind, or raise ValueError(allowed)."""
        if value is None:
            if self.nullable:
                return None
            raise ValueError(self.describe())
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and bool not in kinds:
            raise ValueError(self.describe())
        if not isinstance(value, kinds):
            raise ValueError(self.describe())
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(self.describe())
        if self.check is not None and not self.check(value):
            raise ValueError(self.describe())
        return value

    def describe(self) -> str:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        names = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
                 list: "a list", dict: "a mapping"}
        text = " or ".join(names.get(k, k.__name__) for k in kinds)
        if self.allowed:
            text += f" {self.allowed}"
        if self.nullable:
            text += " (or null)"
        return f"must be {text}"


def int_at_least(lo: int, nullable: bool = False, extra: str = "") -> Field:
    return Field(int, nullable, lambda v: v >= lo, f">= {lo}{extra}")


def positive(kind: type = float) -> Field:
    """A number (or integer, with ``kind=int``) that must be > 0."""
    return Field(kind, False, lambda v: v > 0, "> 0")


UNIT_INTERVAL = Field(float, False, lambda v: 0 <= v <= 1, "in [0, 1]")


def _choice(*options: str) -> Field:
    return Field(str, False, lambda v: v in options, f"one of {list(options)}")


_ROLE = {
    "count": int_at_least(0),
    "speed": int_at_least(1),
    "stamina": int_at_least(0, nullable=True, extra="; null means unlimited"),
}

# The schema of every section. A dict is a nested mapping with fixed keys; a Field is a leaf.
# Open mappings (observation params, reward params, shaping list) are checked by the
# registries through the validators registered with `register_validator`.
CORE_SCHEMA: dict[str, Any] = {
    "env": {
        "name": Field(str),
        "size": int_at_least(2),
        "obstacle_percentage": Field(float, False, lambda v: 0 <= v < 100, "in [0, 100)"),
        "seed": Field(int, nullable=True),
        "render_mode": Field(str, True, lambda v: v == "rgb_array",
                             "'rgb_array' (there is no window; use ppage-jax render)"),
        "window_size": int_at_least(16),
        "dynamics": {"allow_cell_sharing": Field(bool), "block_agents_by_obstacles": Field(bool)},
        "termination": {
            "capture_threshold": int_at_least(0),
            "max_steps": int_at_least(1, nullable=True, extra="; null means no truncation"),
        },
        "map": Field(list, nullable=True, allowed="of strings, '#' obstacle and '.' free"),
        "starts": Field(list, nullable=True, allowed="of [x, y] pairs, one per agent"),
    },
    "agents": {"predators": dict(_ROLE), "preys": dict(_ROLE)},
    "observations": {
        "type": Field(str),
        "params": Field(dict),
        "per_agent": Field(dict, nullable=True),
    },
    "rewards": {
        "gamma": Field(float, False, lambda v: 0 <= v <= 1, "in [0, 1]"),
        "base": {"enabled": Field(bool), "weight": Field(float), "params": Field(dict)},
        "shaping": Field(list, nullable=True),
        "normalization": {
            "enabled": Field(bool, False, lambda v: v is False,
                             "false (reward normalisation is not implemented; PPAGE ignores it)")
        },
    },
    "actions": {"type": Field(str), "params": Field(dict, False, lambda v: not v,
                                                    "empty (no action table takes params)")},
}

# Validators that need a registry (observations, rewards, actions, training). Each takes the
# merged config and a `fail(key, value, allowed)` callback that raises a ConfigError naming the
# file the key came from.
Validator = Callable[[dict, Callable[..., None]], None]
_VALIDATORS: list[Validator] = []

# Sections whose schema lives outside the simulator core, imported the first time a config is
# loaded: the module calls `register_section` on import. `experiment` belongs to training, but
# its schema module imports no learner (loading a config never imports flax or optax).
SECTION_PROVIDERS: dict[str, str] = {"experiment": "ppage_jax.train.schema"}
_SECTIONS: dict[str, tuple[dict, dict]] = {}


def register_validator(fn: Validator) -> Validator:
    """Register a check over the merged config; it reports problems through ``fail``."""
    _VALIDATORS.append(fn)
    return fn


def register_section(name: str, schema: dict, section_defaults: dict,
                     validator: Validator | None = None) -> None:
    """Register the schema, defaults and (optional) validator of a config section.

    ``schema`` maps keys to a :class:`Field` or a nested dict, as the core sections do;
    ``section_defaults`` is the section's default body.
    """
    if name not in SECTIONS:
        raise ValueError(f"unknown config section {name!r}; sections: {list(SECTIONS)}")
    _SECTIONS[name] = (schema, copy.deepcopy(section_defaults))
    if validator is not None and validator not in _VALIDATORS:
        _VALIDATORS.append(validator)


def _load_providers() -> None:
    import importlib

    for name, module in SECTION_PROVIDERS.items():
        if name not in _SECTIONS:
            importlib.import_module(module)


def full_schema() -> dict:
    """The schema of every section: the core's plus the registered sections'."""
    _load_providers()
    return {**CORE_SCHEMA, **{name: schema for name, (schema, _) in _SECTIONS.items()}}


def full_defaults() -> dict:
    """The default merged config: the core defaults plus the registered sections'."""
    _load_providers()
    data = defaults()
    for name, (_, body) in _SECTIONS.items():
        data[name] = copy.deepcopy(body)
    return data


@dataclasses.dataclass(frozen=True)
class Config:
    """A merged, validated config: ``data[section][key]`` plus where each value came from."""

    data: Mapping[str, Any]
    sources: Mapping[str, str]
    path: str | None = None

    def __getitem__(self, section: str) -> Any:
        return self.data[section]

    def get(self, dotted: str) -> Any:
        """The value at a dotted path such as ``"env.termination.max_steps"``."""
        node: Any = self.data
        for part in dotted.split("."):
            node = node[part]
        return node

    def source_of(self, dotted: str) -> str:
        """The file (or override, or defaults) that supplied a dotted key."""
        return source_of(self.sources, dotted)

    def to_dict(self) -> dict:
        return copy.deepcopy(dict(self.data))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def hash(self, sections: Iterable[str] = SECTIONS) -> str:
        """Short SHA-256 of the given sections (all by default) in canonical JSON."""
        blob = json.dumps({s: self.data[s] for s in sections}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Config":
        """A new validated Config with dotted overrides applied."""
        data = copy.deepcopy(dict(self.data))
        sources = dict(self.sources)
        _apply_overrides(data, sources, overrides)
        _validate(data, sources)
        return Config(data, sources, self.path)


def source_of(sources: Mapping[str, str], dotted: str) -> str:
    # A list item ("rewards.shaping[2].weight") comes from the file that gave the list.
    parts = [part.split("[", 1)[0] for part in dotted.split(".")]
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in sources:
            return sources[key]
    return DEFAULTS_SOURCE


def load_config(path: str | os.PathLike | None = None,
                overrides: Mapping[str, Any] | None = None) -> Config:
    """Load a PPAGE-style config directory (or one YAML file holding several sections).

    ``path=None`` gives the package defaults. ``overrides`` maps dotted keys
    (``"env.size"``, ``"rewards.shaping"``) to values; strings are not parsed here (the CLI
    parses ``--set`` values as YAML).
    """
    data = full_defaults()
    sources: dict[str, str] = {}
    if path is not None:
        for source, section, body in _read_sections(Path(path)):
            _merge(data[section], body, section, source, sources)
    _apply_overrides(data, sources, overrides or {})
    _validate(data, sources)
    return Config(data, sources, None if path is None else str(path))


# The shipped configs travel inside the package (``ppage_jax/configs``, the repository's
# ``configs/`` folder), so a name such as "default", "1v1" or "ablation/both" works from any
# directory after a plain ``pip install``.
PACKAGED_CONFIGS = Path(__file__).resolve().parent / "configs"


def shipped_configs() -> list[str]:
    """Names of the configs shipped with the package (directories holding YAML files)."""
    if not PACKAGED_CONFIGS.is_dir():
        return []
    return sorted(str(p.parent.relative_to(PACKAGED_CONFIGS))
                  for p in PACKAGED_CONFIGS.rglob("env.yaml"))


def resolve_config_path(path: str | os.PathLike) -> Path:
    """An existing path as given, else the shipped config of that name.

    ``"configs/default"`` also resolves to the shipped ``default`` when no such folder exists
    relative to the working directory.
    """
    given = Path(path)
    if given.exists():
        return given
    name = str(path).replace("\\", "/").strip("/")
    for candidate in (name, name.removeprefix("configs/")):
        packaged = PACKAGED_CONFIGS / candidate
        if candidate and packaged.exists() and packaged.resolve().is_relative_to(
                PACKAGED_CONFIGS.resolve()):
            return packaged
    raise ConfigError(str(path), "<path>", str(path),
                      f"must be an existing config directory or YAML file, or the name of a "
                      f"shipped config: {shipped_configs()}")


def _read_sections(path: Path):
    path = resolve_config_path(path)
    if path.is_dir():
        names = {f"{s}.yaml": s for s in SECTIONS} | {f"{s}.yml": s for s in SECTIONS}
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
        for file in files:
            if file.name not in names:
                raise ConfigError(str(file), "<file>", file.name,
                                  f"unknown config file; expected some of "
                                  f"{[s + '.yaml' for s in SECTIONS]}")
            body = _load_yaml(file)
            section = names[file.name]
            if set(body) != {section}:
                raise ConfigError(str(file), "<top level>", sorted(body),
                                  f"a {file.name} holds exactly one top-level key, {section!r}")
            yield str(file), section, body[section]
    elif path.is_file():
        body = _load_yaml(path)
        for section, value in body.items():
            if section not in SECTIONS:
                raise ConfigError(str(path), section, value,
                                  f"unknown section; expected some of {list(SECTIONS)}")
            yield str(path), section, value
    else:
        raise ConfigError(str(path), "<path>", str(path),
                          "must be an existing config directory or YAML file")


def _load_yaml(file: Path) -> dict:
    try:
        body = yaml.safe_load(file.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(str(file), "<yaml>", None, f"is not valid YAML: {err}") from None
    if not isinstance(body, dict):
        raise ConfigError(str(file), "<top level>", body, "must be a mapping")
    return body


def _merge(target: dict, body: Any, prefix: str, source: str, sources: dict) -> None:
    """Deep-merge ``body`` into ``target`` (schema-shaped dicts merge, leaves replace)."""
    schema = _schema_at(prefix)
    if not isinstance(body, dict):
        if body is None and isinstance(schema, dict):
            return  # an empty section in a file: keep the defaults
        raise ConfigError(source, prefix, body, "must be a mapping")
    for key, value in body.items():
        dotted = f"{prefix}.{key}"
        if not isinstance(key, str) or key not in schema:
            raise ConfigError(source, dotted, value,
                              f"unknown key; allowed keys of {prefix}: {sorted(schema)}")
        if isinstance(schema[key], dict):
            _merge(target[key], value, dotted, source, sources)
        else:
            target[key] = copy.deepcopy(value)
            sources[dotted] = source


def _schema_at(dotted: str) -> Any:
    node: Any = full_schema()
    for part in dotted.split("."):
        node = node[part]
    return node


def _apply_overrides(data: dict, sources: dict, overrides: Mapping[str, Any]) -> None:
    for dotted, value in overrides.items():
        source = f"override {dotted}={value!r}"
        parts = dotted.split(".")
        node: Any = full_schema()
        for i, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                where = ".".join(parts[:i]) or "<top level>"
                allowed = sorted(node) if isinstance(node, dict) else []
                raise ConfigError(source, dotted, value,
                                  f"unknown key; allowed keys under {where}: {allowed}")
            node = node[part]
        if isinstance(node, dict):
            target = data
            for part in parts[:-1]:
                target = target[part]
            _merge(target[parts[-1]], value, dotted, source, sources)
        else:
            target = data
            for part in parts[:-1]:
                target = target[part]
            target[parts[-1]] = copy.deepcopy(value)
            sources[dotted] = source


def _validate(data: dict, sources: Mapping[str, str]) -> None:
    def fail(key: str, value: Any, allowed: str) -> None:
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
    if data["env"]["map"] is not None and "env.obstacle_percentage" in sources:
        fail("env.obstacle_percentage", data["env"]["obstacle_percentage"],
             "must not be set together with env.map: the map fixes the obstacles")
    if data["actions"]["type"] not in ACTION_TABLES:
        fail("actions.type", data["actions"]["type"],
             f"unknown action table; known: {sorted(ACTION_TABLES)}")
    for validator in _VALIDATORS:
        validator(data, fail)


def _validate_layout(data: dict, fail: Callable[..., None]) -> None:
    env, agents = data["env"], data["agents"]
    size = env["size"]
    n_agents = agents["predators"]["count"] + agents["preys"]["count"]
    if n_agents < 1:
        fail("agents.predators.count", agents["predators"]["count"],
             "predators and prey together must number at least 1")
    if n_agents > size * size:
        fail("agents.preys.count", agents["preys"]["count"],
             f"{n_agents} agents do not fit on {size * size} cells ({size}x{size})")
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
        ok = (len(starts) == n_agents and all(
            isinstance(p, list) and len(p) == 2 and all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c < size for c in p)
            for p in starts))
        if not ok:
            fail("env.starts", starts,
                 f"must be {n_agents} [x, y] pairs (predators first) with 0 <= x, y < {size}")
        if len({tuple(p) for p in starts}) != n_agents:
            fail("env.starts", starts, "start cells must be distinct")
        if rows is not None and any(rows[y][x] == "#" for x, y in starts):
            fail("env.starts", starts, "a start cell is an obstacle in env.map")


def num_obstacles(data: Mapping[str, Any]) -> int:
    """Static obstacle count: the map's '#' cells, else floor(pct/100*H*W) capped by free cells."""
    env = data["env"]
    if env["map"] is not None:
        return sum(row.count("#") for row in env["map"])
    cells = env["size"] ** 2
    n_agents = data["agents"]["predators"]["count"] + data["agents"]["preys"]["count"]
    return min(int(env["obstacle_percentage"] / 100 * cells), cells - n_agents)


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a CLI ``key=value`` override; the value is read as YAML."""
    if "=" not in text:
        raise ConfigError("--set", text, text, "must look like dotted.key=value")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError("--set", key, raw, f"value is not valid YAML: {err}") from None
    return key.strip(), value
