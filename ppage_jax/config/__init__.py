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
import re
import reprlib
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.defaults import SECTIONS, defaults

DEFAULTS_SOURCE = "package defaults"

# Numbers reach the device as int32 / float32: every integer of a config must fit int32 and
# every number must be finite in float32.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38
# Grid side bounds (env.size): 2 <= size <= MAX_GRID_SIZE.
MAX_GRID_SIZE = 4096
# YAML safety: files above MAX_FILE_BYTES are refused, and aliases may add at most
# MAX_ALIAS_NODES nodes to a document once expanded (recursive aliases are refused).
MAX_FILE_BYTES = 4 * 2**20
MAX_ALIAS_NODES = 1000
# Error messages show values in a short form of at most this many characters.
MAX_VALUE_CHARS = 80
_MAX_MESSAGE_CHARS = 2000

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxtuple, _SHORT.maxset = 3, 6, 6, 6, 6
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = MAX_VALUE_CHARS, MAX_VALUE_CHARS, 40


def short_repr(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """``repr(value)`` cut to at most ``limit`` characters (nested and long values elided)."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # noqa: BLE001 (an odd object must never break an error message)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clip(text: str, limit: int = _MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ConfigError(ValueError):
    """A config value that is not allowed; names the file, the key, the value and the rule.

    The message shows the value in a short form (:func:`short_repr`); ``err.value`` holds it
    whole.
    """

    def __init__(self, source: str, key: str, value: Any, allowed: str):
        self.source, self.key, self.value, self.allowed = source, key, value, allowed
        super().__init__(
            _clip(
                f"{_clip(str(source), 300)}: {_clip(str(key), 200)} = "
                f"{short_repr(value)}: {allowed}"
            )
        )


class ConfigNotice(UserWarning):
    """A config was adjusted the way its overrides ask (e.g. params dropped); not an error."""


def notice(message: str) -> None:
    """Tell the user (on stderr, through :mod:`warnings`) how a config was adjusted.

    The warning is attributed to the first caller outside the package.
    """
    package = os.path.dirname(__file__)
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, ConfigNotice, stacklevel=level)


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
            value = float(value) if abs(value) <= FLOAT32_MAX else math.inf
        if isinstance(value, bool) and bool not in kinds:
            raise ValueError(self.describe())
        if not isinstance(value, kinds):
            raise ValueError(self.describe())
        if isinstance(value, float) and not (math.isfinite(value) and abs(value) <= FLOAT32_MAX):
            raise ValueError(
                f"{self.describe()}; numbers must be finite in float32 (|x| <= {FLOAT32_MAX:.4g})"
            )
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not INT32_MIN <= value <= INT32_MAX
        ):
            raise ValueError(
                f"{self.describe()}; integers must fit int32 [{INT32_MIN}, {INT32_MAX}]"
            )
        if self.check is not None and not _passes(self.check, value):
            raise ValueError(self.describe())
        return value

    def describe(self) -> str:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        names = {
            int: "an integer",
            float: "a number",
            bool: "true or false",
            str: "a string",
            list: "a list",
            dict: "a mapping",
        }
        text = " or ".join(names.get(k, k.__name__) for k in kinds)
        if self.allowed:
            text += f" {self.allowed}"
        if self.nullable:
            text += " (or null)"
        return f"must be {text}"


def float32_number(value: Any) -> bool:
    """True for a real number (not a bool) that is finite in float32 (|x| <= FLOAT32_MAX)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and abs(value) <= FLOAT32_MAX
    )


def _passes(check: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(check(value))
    except (TypeError, ValueError, OverflowError):  # e.g. a list check meeting odd items
        return False


def int_at_least(lo: int, nullable: bool = False, extra: str = "") -> Field:
    return Field(int, nullable, lambda v: v >= lo, f">= {lo}{extra}")


def positive(kind: type = float) -> Field:
    """A number (or integer, with ``kind=int``) that must be > 0."""
    return Field(kind, False, lambda v: v > 0, "> 0")


UNIT_INTERVAL = Field(float, False, lambda v: 0 <= v <= 1, "in [0, 1]")


_ROLE = {
    "count": int_at_least(0),
    "speed": int_at_least(1),
    "stamina": int_at_least(0, nullable=True, extra="; null means unlimited"),
}

# The rule for every name that becomes a file path or a table cell: agent name prefixes
# (agents.naming), env.name, sweep arm names and tracked run names.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
NAME_RULE = "of letters, digits, '_' or '-' starting with a letter (<= 64 characters)"


def is_safe_name(value: Any) -> bool:
    """True when ``value`` is a string that follows :data:`NAME_RULE` (no '/', '.', spaces
    or control characters, so it is safe as one path part and as a table cell)."""
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None


# Agents are named <prefix>_1, <prefix>_2, ... (agents.naming, PPAGE's keys).
_NAME_PREFIX = Field(str, False, is_safe_name, NAME_RULE)

# The schema of every section. A dict is a nested mapping with fixed keys; a Field is a leaf.
# Open mappings (observation params, reward params, shaping list) are checked by the
# registries through the validators registered with `register_validator`.
CORE_SCHEMA: dict[str, Any] = {
    "env": {
        "name": Field(str, False, is_safe_name, NAME_RULE),
        "size": Field(
            int, False, lambda v: 2 <= v <= MAX_GRID_SIZE, f">= 2 and <= {MAX_GRID_SIZE}"
        ),
        "obstacle_percentage": Field(float, False, lambda v: 0 <= v < 100, "in [0, 100)"),
        "seed": Field(int, nullable=True),
        "render_mode": Field(
            str,
            True,
            lambda v: v == "rgb_array",
            "'rgb_array' (there is no window; use ppage-jax render)",
        ),
        "window_size": int_at_least(16),
        "dynamics": {"allow_cell_sharing": Field(bool), "block_agents_by_obstacles": Field(bool)},
        "termination": {
            "capture_threshold": int_at_least(0),
            "max_steps": int_at_least(1, nullable=True, extra="; null means no truncation"),
        },
        "map": Field(list, nullable=True, allowed="of strings, '#' obstacle and '.' free"),
        "starts": Field(list, nullable=True, allowed="of [x, y] pairs, one per agent"),
    },
    "agents": {
        "predators": dict(_ROLE),
        "preys": dict(_ROLE),
        "naming": {"predator_prefix": _NAME_PREFIX, "prey_prefix": _NAME_PREFIX},
    },
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

# Validators that need a registry (observations, rewards, actions, training). Each takes the
# merged config and a `fail(key, value, allowed)` callback that raises a ConfigError naming the
# file the key came from.
Validator = Callable[[dict, Callable[..., None]], None]
_VALIDATORS: list[Validator] = []

# Sections whose schema lives outside the simulator core, imported the first time a config is
# loaded: the module calls `register_section` on import. `experiment` belongs to training, but
# its schema module imports no learner (loading a config never imports flax or optax).
SECTION_PROVIDERS: dict[str, str] = {"experiment": "ppage_jax.config.experiment"}
_SECTIONS: dict[str, tuple[dict, dict]] = {}


def register_validator(fn: Validator) -> Validator:
    """Register a check over the merged config; it reports problems through ``fail``."""
    _VALIDATORS.append(fn)
    return fn


def register_section(
    name: str, schema: dict, section_defaults: dict, validator: Validator | None = None
) -> None:
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

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
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
    return sorted(
        str(p.parent.relative_to(PACKAGED_CONFIGS)) for p in PACKAGED_CONFIGS.rglob("env.yaml")
    )


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
        if (
            candidate
            and packaged.exists()
            and packaged.resolve().is_relative_to(PACKAGED_CONFIGS.resolve())
        ):
            return packaged
    raise ConfigError(
        str(path),
        "<path>",
        str(path),
        f"must be an existing config directory or YAML file, or the name of a "
        f"shipped config: {shipped_configs()}",
    )


def _read_sections(path: Path, experiment: str | None = None):
    path = resolve_config_path(path)
    if path.is_dir():
        from ppage_jax.config.ppage_format import read_directory

        read = read_directory(path, experiment, _load_yaml)
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
        body = _load_yaml(path)
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


class ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads ``3e-4`` and ``1e6`` as floats (YAML 1.2), as PyYAML
    does not: its YAML 1.1 float pattern needs a dot and a signed exponent. YAML 1.1's
    base-60 numbers are not numbers here: ``1:30`` is the string ``'1:30'`` (never 90), so
    a numeric key given one is refused by its check."""


_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"
ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_FLOAT_TAG, _INT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver(
    _INT_TAG,
    re.compile(
        r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""",
        re.X,
    ),
    list("-+0123456789"),
)
ConfigLoader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"""^(?:
     [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _alias_growth(root: yaml.Node) -> float:
    """Nodes that aliases add once the document is expanded (inf for a recursive alias)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                return math.inf
            stack.append((child, False))
    return sizes[id(root)] - len(sizes)


def _check_unique_keys(root: yaml.Node, source: str) -> None:
    """Refuse a mapping (at any depth) that gives one key twice: ConfigError naming the
    file, the dotted key and both lines (PyYAML would keep the last silently)."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    seen_nodes: set[int] = set()
    while stack:
        node, prefix = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, f"{prefix}[{i}]") for i, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                dotted = f"{prefix}.{key}" if prefix else str(key)
                if key is not None and key_node.tag != "tag:yaml.org,2002:merge":
                    line = key_node.start_mark.line + 1
                    if key in first:
                        raise ConfigError(
                            source,
                            dotted,
                            key,
                            f"duplicate key at line {line} (first given at line "
                            f"{first[key]}); each key may appear once in a mapping",
                        )
                    first[key] = line
                stack.append((value_node, dotted))


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's error in one line: the problem and where (line and column, 1-based)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or " ".join(str(err).split())
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return _clip(f"{problem}{where}", 500)


def load_yaml(text: str | bytes, source: str, key: str = "<yaml>", shown: Any = None) -> Any:
    """Parse one YAML document with :class:`ConfigLoader`; bad YAML, an alias expansion
    beyond ``MAX_ALIAS_NODES`` nodes and nesting too deep raise :class:`ConfigError`."""
    loader = None
    try:
        loader = ConfigLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        growth = _alias_growth(node)
        if growth > MAX_ALIAS_NODES:
            raise ConfigError(
                source,
                key,
                shown,
                f"YAML aliases expand to too much ({growth} extra nodes; at most "
                f"{MAX_ALIAS_NODES} are allowed and recursive aliases never are)",
            )
        _check_unique_keys(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise ConfigError(source, key, shown, f"is not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:
        raise ConfigError(source, key, shown, "is nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def _load_yaml(file: Path) -> dict:
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                str(file),
                "<file>",
                f"{size} bytes",
                f"config files may hold at most {MAX_FILE_BYTES} bytes",
            )
        data = file.read_bytes()
    except OSError as err:
        raise ConfigError(
            str(file), "<file>", file.name, f"cannot be read: {err.strerror or err}"
        ) from None
    body = load_yaml(data, str(file))
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
    are set in place. Then adjust what the overrides imply (see :func:`_implied_changes`)."""
    if not isinstance(overrides, Mapping):
        raise ConfigError(
            "overrides",
            "<overrides>",
            overrides,
            "must be a mapping of dotted keys to values, e.g. {'env.size': 12}",
        )
    observation_type = data["observations"]["type"]
    for dotted, value in overrides.items():
        source = f"override {_clip(str(dotted), 200)}={short_repr(value)}"
        if not isinstance(dotted, str):
            raise ConfigError(source, str(dotted), value, "override keys are dotted strings")
        parts = dotted.split(".")
        node: Any = full_schema()
        for i, part in enumerate(parts):
            if isinstance(node, Field) and dict in _kinds(node):
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
                _merge(target[parts[-1]], value, dotted, source, sources)
            else:
                target[parts[-1]] = copy.deepcopy(value)
                sources[dotted] = source
    _implied_changes(data, sources, observation_type)


def _kinds(field: Field) -> tuple[type, ...]:
    return field.kind if isinstance(field.kind, tuple) else (field.kind,)


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


def _is_override(sources: Mapping[str, str], key: str) -> bool:
    return sources.get(key, "").startswith("override ")


def _from_override(sources: Mapping[str, str], prefix: str) -> bool:
    return any(
        _is_override(sources, key)
        for key in sources
        if key == prefix or key.startswith(prefix + ".") or key.startswith(prefix + "[")
    )


def _implied_changes(data: dict, sources: dict, observation_type: str) -> None:
    """What an override means beyond its key, each announced with :func:`notice`:

    - ``observations.type`` overridden to another builder: the params and per_agent that
      did not come from overrides are dropped (that builder's defaults apply);
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
    for validator in _VALIDATORS:
        validator(data, fail)


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


def num_obstacles(data: Mapping[str, Any]) -> int:
    """Static obstacle count: the map's '#' cells, else PPAGE's ``int((pct/100.0)*H*W)``
    capped by the free cells."""
    env = data["env"]
    if env["map"] is not None:
        return sum(row.count("#") for row in env["map"])
    size, cells = env["size"], env["size"] ** 2
    n_agents = data["agents"]["predators"]["count"] + data["agents"]["preys"]["count"]
    # PPAGE's expression, evaluated left to right: 29 % of 10x10 is 29 (not 28).
    return min(int((env["obstacle_percentage"] / 100.0) * size * size), cells - n_agents)


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a CLI ``key=value`` override; the value is read as YAML."""
    if "=" not in text:
        raise ConfigError("--set", text, text, "must look like dotted.key=value")
    key, raw = text.split("=", 1)
    return key.strip(), load_yaml(raw, "--set", key.strip(), raw)
