"""Reading one reward design (an arm) of a sweep or search file: a config directory, or edits
of the base config (weights, disabled terms, term params, roles), and the traced training
hyperparameters it sets. Every problem fails through the file's
:class:`~ppage_jax.analysis.batch.reading.SpecReader`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ppage_jax.analysis.batch.reading import SpecReader, display_path
from ppage_jax.analysis.batch.spec import Arm
from ppage_jax.config import SECTIONS, Config, load_config
from ppage_jax.config.env_spec import RewardTerm, env_spec
from ppage_jax.rewards.registry import (
    APPLIES_TO,
    Choice,
    get_term,
    known_terms_help,
    reward_terms,
)

ARM_KEYS = ("config", "weights", "disable", "params", "applies_to", "hyperparams")


def read_arm(
    read: SpecReader,
    name: str,
    spec: Any,
    base_config: Config,
    sets: dict,
    base: Path,
    where: str | None = None,
) -> Arm:
    """One arm of a sweep file (``where``: its key in error messages, default
    ``sweep.arms.<name>``; a reward search reads its design and references with it)."""
    where = where or f"sweep.arms.{name}"
    spec = read.mapping(where, spec, ARM_KEYS)
    hyperparams = _read_hyperparams(read, where, spec.get("hyperparams"), base_config)
    if "config" in spec:
        extra = sorted(set(spec) - {"config", "hyperparams"})
        if extra:
            read.fail(
                f"{where}.{extra[0]}",
                spec[extra[0]],
                "an arm given by 'config' takes no other keys but 'hyperparams' "
                "(edit its rewards.yaml)",
            )
        directory = read.resolve(f"{where}.config", spec["config"], base)
        arm_config = load_config(directory, sets)
        _check_same_structure(read, where, arm_config, base_config)
        arm_spec = env_spec(arm_config)
        return Arm(
            name,
            arm_spec.rewards,
            float(arm_spec.gamma),
            display_path(directory),
            hyperparams,
        )

    base_spec = env_spec(base_config)
    terms = {t.name: t for t in base_spec.rewards}
    known = reward_terms()
    weights = read.mapping(f"{where}.weights", spec.get("weights"))
    for term, weight in weights.items():
        key = f"{where}.weights.{term}"
        if term not in known:
            read.fail(key, weight, f"unknown reward term; {known_terms_help()}")
        weight = read.number(key, weight)
        if term in terms:
            terms[term] = dataclasses.replace(terms[term], weight=weight)
        else:
            terms[term] = RewardTerm(term, weight)
    disable = spec.get("disable") or []
    if not isinstance(disable, list):
        read.fail(f"{where}.disable", disable, "must be a list of term names")
    for term in disable:
        if term not in terms:
            read.fail(
                f"{where}.disable", term, f"is not a term of this arm; its terms: {list(terms)}"
            )
        terms[term] = dataclasses.replace(terms[term], weight=0.0)
    for term, values in read.mapping(f"{where}.params", spec.get("params")).items():
        key = f"{where}.params.{term}"
        if term not in terms:
            read.fail(key, values, f"is not a term of this arm; its terms: {list(terms)}")
        values = read.mapping(key, values)
        params = dict(terms[term].params)
        for param, value in values.items():
            declared = declared_param(read, f"{key}.{param}", value, term, param)
            if isinstance(declared, Choice):
                if value not in declared.options:
                    read.fail(f"{key}.{param}", value, f"must be one of {list(declared.options)}")
            else:
                value = read.number(f"{key}.{param}", value)
            params[param] = value
        terms[term] = dataclasses.replace(terms[term], params=params)
    for term, role in read.mapping(f"{where}.applies_to", spec.get("applies_to")).items():
        key = f"{where}.applies_to.{term}"
        if term not in terms:
            read.fail(key, role, f"is not a term of this arm; its terms: {list(terms)}")
        if role not in APPLIES_TO:
            read.fail(key, role, f"must be one of {list(APPLIES_TO)}")
        terms[term] = dataclasses.replace(terms[term], applies_to=role)
    return Arm(
        name,
        tuple(terms.values()),
        float(base_spec.gamma),
        f"{display_path(base_config.path)} + edits",
        hyperparams,
    )


def declared_param(read: SpecReader, key: str, value: Any, term: str, param: str) -> Any:
    """Reward term ``term``'s declaration of ``param`` (a :class:`Choice` or its number's
    default); a param the term does not declare fails at ``key``."""
    declared = get_term(term).params
    if param not in declared:
        read.fail(
            key, value, f"unknown param of reward term {term!r}; its params: {sorted(declared)}"
        )
    return declared[param]


def _read_hyperparams(
    read: SpecReader, where: str, values: Any, config: Config
) -> dict[str, float]:
    """An arm's ``hyperparams``: traced training hyperparameters of the configured algorithm
    (:mod:`ppage_jax.train.kit.traced`), each validated like its config key."""
    from ppage_jax.config.experiment.base import check_value
    from ppage_jax.train.registry import hyperparams_class

    algo = config["experiment"]["algorithm"]["name"]
    out = {}
    for name, value in read.mapping(f"{where}.hyperparams", values).items():
        try:
            out[str(name)] = check_value(hyperparams_class(algo), name, value, repr(algo))
        except ValueError as err:
            read.fail(f"{where}.hyperparams.{name}", value, str(err))
    return out


def _check_same_structure(read: SpecReader, where: str, arm: Config, base: Config) -> None:
    """Arms may differ only in ``rewards``; name the first other key that differs."""

    def first_difference(a: Any, b: Any, prefix: str) -> str | None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                found = first_difference(a.get(key), b.get(key), f"{prefix}.{key}")
                if found:
                    return found
            return None
        return prefix if a != b else None

    for section in SECTIONS:
        if section == "rewards":
            continue
        key = first_difference(arm[section], base[section], section)
        if key:
            read.fail(
                f"{where}.config",
                arm.path,
                f"mismatched structure: {key} is {arm.get(key)!r} here but "
                f"{base.get(key)!r} in the base config {base.path}; arms may differ "
                f"only in rewards",
            )
