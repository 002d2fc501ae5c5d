"""Loading a config: the files of a directory (or one YAML file) merged over the package
defaults, then dotted overrides, then every check; the result is a :class:`Config`."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ppage_jax.config.experiment.section import (
    EXPERIMENT_DEFAULTS,
    EXPERIMENT_SCHEMA,
    validate_experiment,
)
from ppage_jax.config.fields import ConfigError, Field, clip, notice, short_repr
from ppage_jax.config.ppage_format import read_directory
from ppage_jax.config.safe_yaml import load_yaml, read_yaml_file
from ppage_jax.config.schema import full_defaults, full_schema, register_section
from ppage_jax.config.shipped import resolve_config_path
from ppage_jax.config.validation import OVERRIDE_PREFIX, implied_changes, source_of, validate
from ppage_jax.defaults import SECTIONS

# The experiment section is the config package's own (its schema names no learner).
register_section("experiment", EXPERIMENT_SCHEMA, EXPERIMENT_DEFAULTS, validate_experiment)


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

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        """A new validated Config with dotted overrides applied."""
        data = copy.deepcopy(dict(self.data))
        sources = dict(self.sources)
        _apply_overrides(data, sources, overrides)
        validate(data, sources)
        return Config(data, sources, self.path)


def load_config(
    path: str | os.PathLike | None = None,
    overrides: Mapping[str, Any] | None = None,
    experiment: str | None = None,
) -> Config:
    """Load a PPAGE-style config directory (or one YAML file holding several sections).

    ``path=None`` gives the package defaults. ``overrides`` maps dotted keys
    (``"env.size"``, ``"rewards.shaping"``) to values; strings are not parsed here (the CLI
    parses ``--set`` values as YAML). ``experiment`` names the experiment file of a directory
    (default ``experiment.yaml``, or the only one). PPAGE's own directories load as they ship
    (see :mod:`ppage_jax.config.ppage_format`).
    """
    data = full_defaults()
    sources: dict[str, str] = {}
    if path is not None:
        for source, section, body in _read_sections(Path(path), experiment):
            _merge(data[section], body, section, source, sources)
    _apply_overrides(data, sources, overrides or {})
    validate(data, sources)
    return Config(data, sources, None if path is None else str(path))


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a CLI ``key=value`` override; the value is read as YAML."""
    if "=" not in text:
        raise ConfigError("--set", text, text, "must look like dotted.key=value")
    key, raw = text.split("=", 1)
    return key.strip(), load_yaml(raw, "--set", key.strip(), raw)


def _read_sections(path: Path, experiment: str | None = None) -> Iterator[tuple[str, str, Any]]:
    """``(source file, section, body)`` of every section a directory or YAML file gives."""
    path = resolve_config_path(path)
    if path.is_dir():
        read = read_directory(path, experiment, read_yaml_file)
        for message in read.notices:
            notice(message)
        yield from read.sections
    elif experiment is not None:
        raise ConfigError(
            str(path),
            "<experiment>",
            experiment,
            "an experiment file is chosen only in a config directory",
        )
    elif path.is_file():
        body = read_yaml_file(path)
        for section, value in body.items():
            if section not in SECTIONS:
                raise ConfigError(
                    str(path), section, value, f"unknown section; expected some of {list(SECTIONS)}"
                )
            yield str(path), section, value
    else:
        raise ConfigError(
            str(path), "<path>", str(path), "must be an existing config directory or YAML file"
        )


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
            raise ConfigError(
                source, dotted, value, f"unknown key; allowed keys of {prefix}: {sorted(schema)}"
            )
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
    """Apply dotted overrides; keys inside open mappings (``observations.params.radius``)
    are set in place. Then adjust what the overrides imply (see
    :func:`~ppage_jax.config.validation.implied_changes`)."""
    if not isinstance(overrides, Mapping):
        raise ConfigError(
            "overrides",
            "<overrides>",
            overrides,
            "must be a mapping of dotted keys to values, e.g. {'env.size': 12}",
        )
    observation_type = data["observations"]["type"]
    for dotted, value in overrides.items():
        source = f"{OVERRIDE_PREFIX}{clip(str(dotted), 200)}={short_repr(value)}"
        if not isinstance(dotted, str):
            raise ConfigError(source, str(dotted), value, "override keys are dotted strings")
        parts = dotted.split(".")
        node: Any = full_schema()
        for i, part in enumerate(parts):
            if isinstance(node, Field) and dict in node.kinds:
                _set_inside(data, parts, i, value, source)  # parts[i:] lie in an open mapping
                sources[dotted] = source
                break
            if not isinstance(node, dict) or part not in node:
                where = ".".join(parts[:i]) or "<top level>"
                allowed = sorted(node) if isinstance(node, dict) else []
                raise ConfigError(
                    source, dotted, value, f"unknown key; allowed keys under {where}: {allowed}"
                )
            node = node[part]
        else:
            target = data
            for part in parts[:-1]:
                target = target[part]
            if isinstance(node, dict):
                if value is None:
                    raise ConfigError(
                        source,
                        dotted,
                        value,
                        f"a section cannot be set to null; set its keys instead "
                        f"({dotted}.KEY, keys: {sorted(node)})",
                    )
                _merge(target[parts[-1]], value, dotted, source, sources)
            else:
                target[parts[-1]] = copy.deepcopy(value)
                sources[dotted] = source
    implied_changes(data, sources, observation_type)


def _set_inside(data: dict, parts: list[str], start: int, value: Any, source: str) -> None:
    """Set ``parts`` (an open mapping at ``parts[:start]``, then keys inside it) to value."""
    holder = data
    for part in parts[: start - 1]:
        holder = holder[part]
    if holder[parts[start - 1]] is None:
        holder[parts[start - 1]] = {}
    node = holder[parts[start - 1]]
    for i in range(start, len(parts)):
        if not isinstance(node, dict):
            raise ConfigError(
                source, ".".join(parts), value, f"{'.'.join(parts[:i])} is not a mapping"
            )
        if i == len(parts) - 1:
            node[parts[i]] = copy.deepcopy(value)
        else:
            if node.get(parts[i]) is None:
                node[parts[i]] = {}
            node = node[parts[i]]
