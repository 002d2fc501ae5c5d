"""YAML -> validated Config: PPAGE's six-file layout, package defaults, dotted overrides.

A config directory holds up to six files (``env.yaml``, ``agents.yaml``, ``observations.yaml``,
``rewards.yaml``, ``actions.yaml``, ``experiment.yaml``), each with a single top-level key equal
to its name, exactly as in PPAGE. Missing files and keys are filled from the package defaults.
Every key is checked: an unknown key, a wrong type or a value out of range raises a
:class:`ConfigError` that names the file, the dotted key, the value and what is allowed.

The package is the floor the simulator and training stand on: it imports nothing above it.

- :mod:`~ppage_jax.config.fields`: :class:`Field`, the common rules, errors and notices;
- :mod:`~ppage_jax.config.safe_yaml`: reading YAML safely;
- :mod:`~ppage_jax.config.schema`: the core sections' schema and what registers into it;
- :mod:`~ppage_jax.config.loading`: :class:`Config`, :func:`load_config`, overrides;
- :mod:`~ppage_jax.config.validation`: the checks of a merged config;
- :mod:`~ppage_jax.config.shipped`: the shipped configs by name;
- :mod:`~ppage_jax.config.ppage_format`: PPAGE's directories as they ship;
- :mod:`~ppage_jax.config.env_spec`: :class:`EnvSpec`, the typed spec an env is built from,
  and :func:`env_spec`, the one translation from a config;
- :mod:`~ppage_jax.config.experiment`: the ``experiment`` section (its schema, roles and
  curriculum) and every algorithm's hyperparameter declaration, one module per family.
"""

from __future__ import annotations

from ppage_jax.config.env_spec import MAX_GRID_SIZE
from ppage_jax.config.fields import (
    FLOAT32_MAX,
    FLOAT32_RULE,
    FLOAT32_TINY,
    INT32_MAX,
    INT32_MIN,
    MAX_VALUE_CHARS,
    NAME_PATTERN,
    NAME_RULE,
    UNIT_INTERVAL,
    ConfigError,
    ConfigNotice,
    Field,
    float32_number,
    float32_problem,
    int_at_least,
    is_safe_name,
    notice,
    positive,
    short_repr,
)
from ppage_jax.config.loading import Config, load_config, parse_override
from ppage_jax.config.safe_yaml import MAX_ALIAS_NODES, MAX_FILE_BYTES, ConfigLoader, load_yaml
from ppage_jax.config.schema import (
    CORE_SCHEMA,
    Validator,
    full_defaults,
    full_schema,
    register_section,
    register_spec_check,
    register_validator,
)
from ppage_jax.config.shipped import PACKAGED_CONFIGS, resolve_config_path, shipped_configs
from ppage_jax.config.validation import DEFAULTS_SOURCE, source_of
from ppage_jax.defaults import SECTIONS

__all__ = [
    "CORE_SCHEMA",
    "DEFAULTS_SOURCE",
    "FLOAT32_MAX",
    "FLOAT32_RULE",
    "FLOAT32_TINY",
    "INT32_MAX",
    "INT32_MIN",
    "MAX_ALIAS_NODES",
    "MAX_FILE_BYTES",
    "MAX_GRID_SIZE",
    "MAX_VALUE_CHARS",
    "NAME_PATTERN",
    "NAME_RULE",
    "PACKAGED_CONFIGS",
    "SECTIONS",
    "UNIT_INTERVAL",
    "Config",
    "ConfigError",
    "ConfigLoader",
    "ConfigNotice",
    "Field",
    "Validator",
    "float32_number",
    "float32_problem",
    "full_defaults",
    "full_schema",
    "int_at_least",
    "is_safe_name",
    "load_config",
    "load_yaml",
    "notice",
    "parse_override",
    "positive",
    "register_section",
    "register_spec_check",
    "register_validator",
    "resolve_config_path",
    "shipped_configs",
    "short_repr",
    "source_of",
]
