"""The schema of ``experiment.curriculum``: which leaves may be scheduled, the schedule kinds
and their keys, and the check that stores a curriculum flattened in the config.

``experiment.curriculum`` maps a leaf to a schedule::

    curriculum:
      reward.weights.predator_distance: {schedule: linear, from: 0.5, to: 0.0, end: 1500000}
      reward.term_params.base.step_cost: {schedule: step, values: [0, 5], boundaries: [500000]}
      speeds.preys: {schedule: constant, value: 2}
      max_steps: {schedule: cosine, from: 100, to: 500, begin: 0, end: 1000000}

Leaves: ``reward.weights.<term>``, ``reward.term_params.<term>.<param>`` (numeric params),
``reward.gamma``, ``speeds.<predators|preys>``, ``stamina.<predators|preys>``,
``capture_threshold`` and ``max_steps`` (integer leaves take the rounded value), and the
algorithm's traced hyperparameters by name (``learning_rate``, ``ent_coef``, ...; declared with
``param(..., traced=True)`` in :mod:`ppage_jax.config.experiment.base`, e.g. ``ent_coef:
{schedule: linear, from: 0.05, to: 0.0, end: 1000000}``). Schedules, over the env steps one
seed has taken before an update:

- ``constant``: ``value``;
- ``linear`` / ``cosine``: from ``from`` at ``begin`` (default 0) to ``to`` at ``end``, then
  held (cosine: ``to + (from - to) * (1 + cos(pi * f)) / 2``, ``f`` the fraction done);
- ``step``: ``values[i]`` from ``boundaries[i - 1]`` on (``len(values) = len(boundaries) + 1``,
  at most :data:`MAX_PIECES` values).

Nested mappings are read as dotted keys (``--set experiment.curriculum.max_steps.schedule=step``
works). The training package turns a validated curriculum into traced arrays.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.experiment.algorithms import ALGORITHM_PARAMS
from ppage_jax.config.experiment.base import checks, traced_names
from ppage_jax.config.experiment.roles import ROLE_KEYS
from ppage_jax.config.fields import FLOAT32_MAX, INT32_MAX, Field
from ppage_jax.config.schema import REWARD_TERMS

KINDS = ("constant", "linear", "cosine", "step")
MAX_PIECES = 16
SCHEDULE_KEYS = {
    "constant": ("schedule", "value"),
    "linear": ("schedule", "from", "to", "begin", "end"),
    "cosine": ("schedule", "from", "to", "begin", "end"),
    "step": ("schedule", "values", "boundaries"),
}
# The leaves that take integers (a scheduled value is rounded).
INTEGER_LEAVES = ("speeds", "stamina", "capture_threshold", "max_steps")


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a scheduled value goes: ``leaf`` of EnvParams, with a term index/name, a term
    param or agent rows where the leaf has them."""

    key: str  # the curriculum key, e.g. "reward.weights.survival"
    leaf: str  # weights, term_param, gamma, speeds, stamina,
    # capture_threshold, max_steps, or hyperparam (a traced training hyperparameter, param)
    index: int | None = None  # the term's column of weights
    term: str | None = None  # term_param: the term and its param
    param: str | None = None
    rows: tuple[int, ...] = ()  # agent rows of speeds / stamina

    @property
    def integer(self) -> bool:
        return self.leaf in INTEGER_LEAVES

    @property
    def param_name(self) -> str:
        """The term param or hyperparameter the value goes to (``term_param``, ``hyperparam``)."""
        if self.param is None:
            raise ValueError(f"{self.key} targets no param")
        return self.param


def flatten(spec: Any, leaves: Collection[str] = (), prefix: str = "") -> dict[str, Any]:
    """Dotted keys -> schedule mappings. Nested mappings are read down to a known leaf (or a
    mapping with ``schedule``); two bodies of the same leaf merge, the later winning, so
    ``--set experiment.curriculum.reward.weights.survival.end=9`` edits one number."""
    if prefix in leaves or not isinstance(spec, Mapping) or "schedule" in spec:
        return {prefix: spec}
    out: dict[str, Any] = {}
    for key, value in spec.items():
        for leaf, body in flatten(value, leaves, f"{prefix}.{key}" if prefix else str(key)).items():
            if isinstance(out.get(leaf), Mapping) and isinstance(body, Mapping):
                body = {**out[leaf], **body}
            out[leaf] = body
    return out


def targets(data: Mapping[str, Any]) -> dict[str, tuple[Target, Any]]:
    """Every schedulable key of the merged config ``data``: its target and what its values
    must pass (a ``(low, high)`` range, or the Field of a traced hyperparameter)."""
    spec = env_spec(data)
    counts = [spec.n_predators, spec.n_prey]
    speeds = [spec.predator_speed, spec.prey_speed]
    max_speed = max(s for s, n in zip(speeds, counts, strict=True) if n) if any(counts) else 1
    inf = math.inf
    out: dict[str, tuple[Target, Any]] = {}
    for i, name in enumerate(term.name for term in spec.rewards):
        out[f"reward.weights.{name}"] = (Target("", "weights", index=i), (-inf, inf))
        declared = REWARD_TERMS.get(name)
        for param in declared.numeric_params if declared is not None else ():
            out[f"reward.term_params.{name}.{param}"] = (
                Target("", "term_param", term=name, param=param),
                (-inf, inf),
            )
    out["reward.gamma"] = (Target("", "gamma"), (0.0, 1.0))
    first = 0
    for role, n in zip(ROLE_KEYS, counts, strict=True):
        rows = tuple(range(first, first + n))
        first += n
        if n:
            out[f"speeds.{role}"] = (Target("", "speeds", rows=rows), (1, max_speed))
            out[f"stamina.{role}"] = (Target("", "stamina", rows=rows), (0, INT32_MAX))
    out["capture_threshold"] = (Target("", "capture_threshold"), (0, INT32_MAX))
    out["max_steps"] = (Target("", "max_steps"), (1, INT32_MAX))
    out.update(_hyperparam_targets(data))
    return {key: (dataclasses.replace(t, key=key), bounds) for key, (t, bounds) in out.items()}


def _hyperparam_targets(data: Mapping[str, Any]) -> dict[str, tuple[Target, Any]]:
    """The configured algorithm's traced hyperparameters, each with the Field its values
    must pass (none when the algorithm is unknown: the schema reports that)."""
    name = data["experiment"]["algorithm"]["name"]
    if name not in ALGORITHM_PARAMS:
        return {}
    cls = ALGORITHM_PARAMS[name]
    fields = checks(cls)
    return {n: (Target("", "hyperparam", param=n), fields[n]) for n in traced_names(cls)}


def _number(fail: Callable[..., None], key: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or abs(value) > FLOAT32_MAX
    ):
        fail(key, value, "must be a finite number")
    return float(value)


def _steps(fail: Callable[..., None], key: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT32_MAX:
        fail(key, value, f"must be an integer number of env steps >= {low}")
    return value


def validate_curriculum(data: dict, fail: Callable[..., None]) -> None:
    """Check ``experiment.curriculum`` against the config and store it flattened in place."""
    where = "experiment.curriculum"
    allowed = targets(data)
    spec = flatten(data["experiment"]["curriculum"] or {}, allowed)
    if "" in spec:
        fail(
            where,
            data["experiment"]["curriculum"],
            "must map EnvParams leaves to schedules, e.g. {max_steps: {schedule: constant, "
            "value: 100}}",
        )
    out = {}
    for key, body in spec.items():
        dotted = f"{where}.{key}"
        if key not in allowed:
            fail(dotted, body, f"is not a schedulable leaf; allowed: {sorted(allowed)}")
        if not isinstance(body, Mapping) or "schedule" not in body:
            fail(dotted, body, f"must be a schedule mapping with 'schedule' one of {list(KINDS)}")
        kind = body["schedule"]
        if kind not in KINDS:
            fail(f"{dotted}.schedule", kind, f"must be one of {list(KINDS)}")
        for name in body:
            if name not in SCHEDULE_KEYS[kind]:
                fail(
                    f"{dotted}.{name}",
                    body[name],
                    f"unknown key of a {kind} schedule; its keys: {list(SCHEDULE_KEYS[kind])}",
                )
        for name in SCHEDULE_KEYS[kind]:
            if name not in body and name != "begin":
                fail(f"{dotted}.{name}", None, f"is required by a {kind} schedule")
        clean: dict[str, Any] = {"schedule": kind}
        if kind == "constant":
            outputs = [_number(fail, f"{dotted}.value", body["value"])]
            clean["value"] = body["value"]
        elif kind in ("linear", "cosine"):
            outputs = [_number(fail, f"{dotted}.{n}", body[n]) for n in ("from", "to")]
            begin = _steps(fail, f"{dotted}.begin", body.get("begin", 0), 0)
            end = _steps(fail, f"{dotted}.end", body["end"], begin + 1)
            clean.update({"from": body["from"], "to": body["to"], "begin": begin, "end": end})
        else:
            values, bounds = body["values"], body["boundaries"]
            if not isinstance(values, list) or not 1 <= len(values) <= MAX_PIECES:
                fail(f"{dotted}.values", values, f"must be a list of 1 to {MAX_PIECES} numbers")
            outputs = [_number(fail, f"{dotted}.values", v) for v in values]
            if not isinstance(bounds, list) or len(bounds) != len(values) - 1:
                fail(
                    f"{dotted}.boundaries",
                    bounds,
                    f"must be a list of len(values) - 1 = {len(values) - 1} env-step counts",
                )
            steps = [_steps(fail, f"{dotted}.boundaries", b, 1) for b in bounds]
            if any(b >= c for b, c in zip(steps, steps[1:], strict=False)):
                fail(f"{dotted}.boundaries", bounds, "must be strictly increasing")
            clean.update({"values": list(values), "boundaries": list(bounds)})
        rule = allowed[key][1]
        if isinstance(rule, Field):  # a traced hyperparameter
            for value in outputs:
                try:
                    rule.validate(value)
                except ValueError as err:
                    fail(dotted, body, f"its values {err} for {key}")
            out[key] = clean
            continue
        low, high = rule
        for value in outputs:
            if not low <= value <= high:
                hint = (
                    "; the static max speed is the largest configured agents.*.speed: "
                    "configure the fastest speed and schedule lower ones"
                    if key.startswith("speeds.")
                    else ""
                )
                fail(dotted, body, f"its values must lie in [{low}, {high}] for {key}{hint}")
        out[key] = clean
    data["experiment"]["curriculum"] = out
