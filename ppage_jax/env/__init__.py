"""The environment: :class:`GridWorld` (reset, step, observe; :mod:`ppage_jax.env.world`),
the rules it checks (:mod:`ppage_jax.env.checks`), the start layouts it draws
(:mod:`ppage_jax.env.layout`), and :func:`make`, which builds one from a config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ppage_jax.config import Config, load_config
from ppage_jax.config.env_spec import SpecError, env_spec
from ppage_jax.config.validation import spec_refusal
from ppage_jax.env.world import GridWorld, StepResult

__all__ = ["GridWorld", "StepResult", "make"]


def make(
    config: Config | str | None = None, overrides: Mapping[str, Any] | None = None
) -> GridWorld:
    """Build a GridWorld from a Config, a config path or shipped name, or None (the package
    defaults), with dotted ``overrides``. The validated config is translated to an
    :class:`EnvSpec` (:func:`~ppage_jax.config.env_spec.env_spec`); a value the env refuses
    (the memory limits) raises a ConfigError naming its config key and the file it came
    from, as loading the config reports a value the spec refuses
    (:func:`~ppage_jax.config.validation.spec_refusal`)."""
    if not isinstance(config, Config):
        config = load_config(config, overrides)
    elif overrides:
        config = config.with_overrides(overrides)
    try:
        return GridWorld(env_spec(config))
    except SpecError as err:
        raise spec_refusal(err, config.data, config.sources) from None
