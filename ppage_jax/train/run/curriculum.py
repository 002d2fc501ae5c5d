"""Curricula: schedules over env steps for traced ``EnvParams`` leaves, applied inside the
compiled update loop.

``experiment.curriculum`` maps a leaf to a schedule::

    curriculum:
      reward.weights.predator_distance: {schedule: linear, from: 0.5, to: 0.0, end: 1500000}
      reward.term_params.base.step_cost: {schedule: step, values: [0, 5], boundaries: [500000]}
      speeds.preys: {schedule: constant, value: 2}
      max_steps: {schedule: cosine, from: 100, to: 500, begin: 0, end: 1000000}

Leaves: ``reward.weights.<term>``, ``reward.term_params.<term>.<param>`` (numeric params),
``reward.gamma``, ``speeds.<predators|preys>``, ``stamina.<predators|preys>``,
``capture_threshold`` and ``max_steps`` (integer leaves take the rounded value), and the
algorithm's traced hyperparameters by name (``learning_rate``, ``ent_coef``, ...;
:mod:`ppage_jax.train.kit.traced`, e.g. ``ent_coef: {schedule: linear, from: 0.05, to: 0.0,
end: 1000000}``). Schedules,
over the env steps one seed has taken (``progress.env_steps``) before an update:

- ``constant``: ``value``;
- ``linear`` / ``cosine``: from ``from`` at ``begin`` (default 0) to ``to`` at ``end``, then
  held (cosine: ``to + (from - to) * (1 + cos(pi * f)) / 2``, ``f`` the fraction done);
- ``step``: ``values[i]`` from ``boundaries[i - 1]`` on (``len(values) = len(boundaries) + 1``,
  at most :data:`MAX_PIECES` values).

Every number and the kind of each schedule are traced (:class:`Curriculum`), so changing a
schedule never recompiles; only the set of scheduled leaves is static. Nested mappings are
read as dotted keys (``--set experiment.curriculum.max_steps.schedule=step`` works).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.config import Field
from ppage_jax.state import EnvParams
from ppage_jax.types import pytree_dataclass, static_field

KINDS = ("constant", "linear", "cosine", "step")
MAX_PIECES = 16
SCHEDULE_KEYS = {
    "constant": ("schedule", "value"),
    "linear": ("schedule", "from", "to", "begin", "end"),
    "cosine": ("schedule", "from", "to", "begin", "end"),
    "step": ("schedule", "values", "boundaries"),
}
ROLE_KEYS = ("predators", "preys")
INT32_MAX = 2**31 - 1
# Column prefix of the scheduled values in the metrics rows.
PREFIX = "curriculum/"


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
        return self.leaf in ("speeds", "stamina", "capture_threshold", "max_steps")

    def set(self, params: EnvParams, value: jax.Array) -> tuple[EnvParams, jax.Array]:
        """``params`` with this leaf set to ``value``; also the value as applied."""
        if self.integer:
            value = jnp.round(value).astype(jnp.int32)
        reward = params.reward
        if self.leaf == "weights":
            return params.replace(
                reward=reward.replace(weights=reward.weights.at[..., self.index].set(value))
            ), value
        if self.leaf == "term_param":
            old = reward.term_params[self.term][self.param]
            term = dict(reward.term_params[self.term], **{self.param: value.astype(old.dtype)})
            return params.replace(
                reward=reward.replace(term_params={**reward.term_params, self.term: term})
            ), value
        if self.leaf == "gamma":
            return params.replace(reward=reward.replace(gamma=value)), value
        if self.leaf in ("speeds", "stamina"):
            rows = np.asarray(self.rows, np.int32)
            leaf = getattr(params, self.leaf).at[..., rows].set(value)
            return params.replace(**{self.leaf: leaf}), value
        return params.replace(**{self.leaf: value}), value


@pytree_dataclass
class Curriculum:
    """K schedules as traced arrays (one row each) and their static targets."""

    kind: jax.Array  # int32[K], index into KINDS
    start: jax.Array  # float32[K]: constant value, or the from value
    stop: jax.Array  # float32[K]: the to value
    begin: jax.Array  # float32[K]: env steps
    end: jax.Array  # float32[K]
    boundaries: jax.Array  # float32[K, MAX_PIECES - 1], +inf padded
    values: jax.Array  # float32[K, MAX_PIECES], last value repeated
    targets: tuple[Target, ...] = static_field()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(t.key for t in self.targets)


def schedule_values(c: Curriculum, env_steps: jax.Array) -> jax.Array:
    """float32[K]: every schedule's value after ``env_steps`` env steps."""
    t = jnp.asarray(env_steps, jnp.float32)
    frac = jnp.clip((t - c.begin) / jnp.maximum(c.end - c.begin, 1.0), 0.0, 1.0)
    linear = c.start + (c.stop - c.start) * frac
    cosine = c.stop + (c.start - c.stop) * 0.5 * (1.0 + jnp.cos(jnp.pi * frac))
    piece = (t >= c.boundaries).sum(-1)
    step = jnp.take_along_axis(c.values, piece[:, None], axis=1)[:, 0]
    table = jnp.stack([c.start, linear, cosine, step])  # KINDS order
    return jnp.take_along_axis(table, c.kind[None, :], axis=0)[0]


def apply_schedules(
    c: Curriculum | None,
    params: EnvParams,
    hyperparams: Mapping[str, jax.Array] | None,
    env_steps: jax.Array,
) -> tuple[EnvParams, dict[str, jax.Array] | None, dict[str, jax.Array]]:
    """The params and traced hyperparameters (:mod:`ppage_jax.train.kit.traced`) an update uses
    after ``env_steps`` env steps, and the applied values (float32, ``curriculum/<key>``) for
    the metrics row. ``None``: both unchanged."""
    if c is None or not c.targets:
        return params, hyperparams, {}
    values = schedule_values(c, env_steps)
    logged = {}
    for i, target in enumerate(c.targets):
        if target.leaf == "hyperparam":
            applied = values[i]
            hyperparams = {**(hyperparams or {}), target.param: applied}
        else:
            params, applied = target.set(params, values[i])
        logged[PREFIX + target.key] = applied.astype(jnp.float32)
    return params, hyperparams, logged


def apply_curriculum(
    c: Curriculum | None, params: EnvParams, env_steps: jax.Array
) -> tuple[EnvParams, dict[str, jax.Array]]:
    """The params an update uses after ``env_steps`` env steps, and the applied values
    (float32, ``curriculum/<key>``) for the metrics row. ``None``: params unchanged.
    Scheduled hyperparameters are applied by :func:`apply_schedules`."""
    params, _, logged = apply_schedules(c, params, None, env_steps)
    return params, logged


# --------------------------------------------------------------------------- from a config
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


def _targets(data: Mapping[str, Any]) -> dict[str, tuple[Target, tuple[float, float]]]:
    """Every schedulable key of the merged config ``data``: its target and allowed range."""
    from ppage_jax.rewards.compose import term_entries
    from ppage_jax.rewards.registry import Choice, get_term

    agents = data["agents"]
    counts = [agents[r]["count"] for r in ROLE_KEYS]
    max_speed = (
        max(agents[r]["speed"] for r, n in zip(ROLE_KEYS, counts, strict=True) if n)
        if any(counts)
        else 1
    )
    inf = math.inf
    out: dict[str, tuple[Target, tuple[float, float]]] = {}
    for i, entry in enumerate(term_entries(data["rewards"])):
        out[f"reward.weights.{entry.name}"] = (Target("", "weights", index=i), (-inf, inf))
        for name, default in get_term(entry.name).params.items():
            if not isinstance(default, Choice):
                out[f"reward.term_params.{entry.name}.{name}"] = (
                    Target("", "term_param", term=entry.name, param=name),
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
    from ppage_jax.config.hyperparams import checks
    from ppage_jax.train.kit.traced import traced_names
    from ppage_jax.train.registry import ALGORITHMS

    name = data["experiment"]["algorithm"]["name"]
    if name not in ALGORITHMS:
        return {}
    cls = ALGORITHMS[name].hyperparams
    fields = checks(cls)
    return {n: (Target("", "hyperparam", param=n), fields[n]) for n in traced_names(cls)}


def _number(fail: Callable[..., None], key: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or abs(value) > 3.4e38
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
    targets = _targets(data)
    spec = flatten(data["experiment"]["curriculum"] or {}, targets)
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
        if key not in targets:
            fail(dotted, body, f"is not a schedulable leaf; allowed: {sorted(targets)}")
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
        if isinstance(targets[key][1], Field):  # a traced hyperparameter
            for value in outputs:
                try:
                    targets[key][1].validate(value)
                except ValueError as err:
                    fail(dotted, body, f"its values {err} for {key}")
            out[key] = clean
            continue
        low, high = targets[key][1]
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


def make_curriculum(spec: Mapping[str, Any], data: Mapping[str, Any]) -> Curriculum | None:
    """The traced :class:`Curriculum` of a validated ``experiment.curriculum`` (``None`` when
    it is empty); ``data``, the merged config, resolves the leaves."""
    if not spec:
        return None
    targets = _targets(data)
    rows = []
    for body in spec.values():
        kind = body["schedule"]
        start = stop = 0.0
        begin, end = 0.0, 1.0
        values = [0.0]
        bounds: list[float] = []
        if kind == "constant":
            start = stop = float(body["value"])
        elif kind in ("linear", "cosine"):
            start, stop = float(body["from"]), float(body["to"])
            begin, end = float(body.get("begin", 0)), float(body["end"])
        else:
            values = [float(v) for v in body["values"]]
            bounds = [float(b) for b in body["boundaries"]]
        values = values + [values[-1]] * (MAX_PIECES - len(values))
        bounds = bounds + [math.inf] * (MAX_PIECES - 1 - len(bounds))
        rows.append((KINDS.index(kind), start, stop, begin, end, bounds, values))
    columns = list(zip(*rows, strict=True))
    f32 = np.float32
    return Curriculum(
        kind=jnp.asarray(columns[0], jnp.int32),
        start=jnp.asarray(columns[1], f32),
        stop=jnp.asarray(columns[2], f32),
        begin=jnp.asarray(columns[3], f32),
        end=jnp.asarray(columns[4], f32),
        boundaries=jnp.asarray(columns[5], f32),
        values=jnp.asarray(columns[6], f32),
        targets=tuple(targets[key][0] for key in spec),
    )


def config_curriculum(config: Any) -> Curriculum | None:
    """The :class:`Curriculum` of a validated Config (``None`` without one)."""
    return make_curriculum(config["experiment"].get("curriculum") or {}, config.data)
