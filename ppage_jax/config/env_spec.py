"""The typed description of one environment (:class:`EnvSpec`) and the one translation from a
validated config to it (:func:`env_spec`).

An EnvSpec is a frozen, hashable dataclass of plain Python values (tuples, never lists or
dicts): everything :class:`~ppage_jax.env.GridWorld` needs, and nothing else (the PPAGE keys
``env.name``, ``env.seed``, ``env.render_mode``, ``env.window_size`` and the ``experiment``
section stay in the Config). Its defaults are the package defaults, which equal the shipped
``default`` config, translated. It checks its own values on construction: a bad one raises
:class:`SpecError`, a one-line ValueError naming the field. These checks are the env's rules:
validating a config runs them too and reports a refusal at the field's config key
(:func:`config_key`), as :func:`ppage_jax.make` does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.config.fields import (
    FLOAT32_MAX,
    FLOAT32_RULE,
    INT32_MAX,
    NAME_RULE,
    is_safe_name,
    short_repr,
)
from ppage_jax.defaults import APPLIES_TO, defaults

# Grid side bounds (size, env.size): 2 <= size <= MAX_GRID_SIZE.
MAX_GRID_SIZE = 4096

# Each spec field and the dotted config key it is translated from.
CONFIG_KEYS: dict[str, str] = {
    "size": "env.size",
    "obstacle_percentage": "env.obstacle_percentage",
    "fixed_map": "env.map",
    "fixed_starts": "env.starts",
    "allow_cell_sharing": "env.dynamics.allow_cell_sharing",
    "block_agents_by_obstacles": "env.dynamics.block_agents_by_obstacles",
    "capture_threshold": "env.termination.capture_threshold",
    "max_steps": "env.termination.max_steps",
    "n_predators": "agents.predators.count",
    "n_prey": "agents.preys.count",
    "predator_speed": "agents.predators.speed",
    "prey_speed": "agents.preys.speed",
    "predator_stamina": "agents.predators.stamina",
    "prey_stamina": "agents.preys.stamina",
    "predator_prefix": "agents.naming.predator_prefix",
    "prey_prefix": "agents.naming.prey_prefix",
    "action_type": "actions.type",
    "observation_type": "observations.type",
    "observation_params": "observations.params",
    "observation_per_agent": "observations.per_agent",
    "rewards": "rewards",
    "gamma": "rewards.gamma",
}
# The fields that describe the reward (every other field fixes the program's structure).
REWARD_FIELDS = ("rewards", "gamma")

Params = tuple[tuple[str, Any], ...]  # (name, value) pairs sorted by name


class ConfigSections(Protocol):
    """What the translation reads of a validated Config: its sections by name."""

    def __getitem__(self, section: str, /) -> Any: ...


# A rule may name another field as ``{field}`` (``"must differ from {predator_prefix}"``):
# a SpecError shows the field's name, :meth:`SpecError.rule_for` its config key.
_MENTION = re.compile(r"\{(\w+)\}")


class SpecError(ValueError):
    """A value an :class:`EnvSpec` (or the GridWorld built from it) refuses: ``field`` (a
    spec field, or a path inside one such as ``rewards[1].weight``), ``value`` and the rule
    (``allowed``)."""

    def __init__(self, field: str, value: Any, allowed: str):
        self.field, self.value, self.rule = field, value, allowed
        self.allowed = self.rule_for(lambda name: name)
        super().__init__(f"EnvSpec.{field} = {short_repr(value)}: {self.allowed}")

    def rule_for(self, name: Callable[[str], str]) -> str:
        """The rule with each field it mentions written as ``name(field)``."""
        return _MENTION.sub(lambda m: name(m[1]) if m[1] in CONFIG_KEYS else m[0], self.rule)


def config_key(field: str, config: ConfigSections) -> str:
    """The dotted config key a spec field, or a path inside one (``rewards[1].weight``,
    ``observation_per_agent.prey``), is translated from. Reward term ``i`` is
    ``rewards.base`` when ``config`` enables it (term 0), else an entry of
    ``rewards.shaping``."""
    head = re.split(r"[.\[]", field, maxsplit=1)[0]
    tail = field[len(head) :]
    index = re.fullmatch(r"\[(\d+)\](.*)", tail)
    if head != "rewards" or index is None:
        return CONFIG_KEYS[head] + tail
    i = int(index[1]) - int(bool(config["rewards"]["base"]["enabled"]))
    return (f"rewards.shaping[{i}]" if i >= 0 else "rewards.base") + index[2]


def _frozen(value: Any) -> Any:
    """``value`` as plain hashable data: a mapping as sorted (key, value) pairs, a list as a
    tuple (recursively)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    """One reward term of the sum: a registered term ``name``, its ``weight``, its ``params``
    (sorted (name, value) pairs; a mapping is accepted) and the role it pays (``applies_to``:
    ``predator``, ``prey``, ``all``, or None for the term's own)."""

    name: str
    weight: float = 1.0
    params: Params = ()
    applies_to: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.params, Mapping):
            object.__setattr__(self, "params", _frozen(self.params))


def _reward_term(item: Any) -> RewardTerm:
    if isinstance(item, RewardTerm):
        return item
    if isinstance(item, Mapping):
        return RewardTerm(**item)
    return RewardTerm(*item)


def section_terms(rewards: Mapping[str, Any]) -> tuple[RewardTerm, ...]:
    """The terms of a ``rewards`` config section in order: ``base`` (if enabled), then the
    ``shaping`` list."""
    terms = []
    base = rewards["base"]
    if base["enabled"]:
        terms.append(RewardTerm("base", base["weight"], _frozen(base["params"] or {})))
    for item in rewards["shaping"] or []:
        terms.append(
            RewardTerm(
                item["name"],
                item.get("weight", 1.0),
                _frozen(item.get("params") or {}),
                item.get("applies_to"),
            )
        )
    return tuple(terms)


# How a config value becomes a spec field's value, where it is not taken as it is.
_TRANSLATED: dict[str, Callable[[Any], Any]] = {
    "rewards": section_terms,
    "observation_params": lambda params: _frozen(params or {}),
}


def _field_values(config: ConfigSections) -> dict[str, Any]:
    """Every spec field's value in ``config``, read at its key in :data:`CONFIG_KEYS`."""
    values = {}
    for field, key in CONFIG_KEYS.items():
        section, *path = key.split(".")
        value = config[section]
        for part in path:
            value = value[part]
        values[field] = _TRANSLATED.get(field, lambda v: v)(value)
    return values


# The fields' defaults: the package defaults (the shipped ``default`` config), translated.
_DEFAULT = _field_values(defaults())


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Everything a :class:`~ppage_jax.env.GridWorld` is built from, as plain values.

    The defaults are the package defaults (the shipped ``default`` config): 3 predators
    (speed 1) vs 3 prey (speed 3) on 10x10 with 20 % obstacles, local_radius observations,
    the base reward plus predator_distance (0.5) and survival (1.0), 500 turns at most.

    Grid: ``size`` (side), ``obstacle_percentage`` (PPAGE's ``int(pct / 100 * size**2)``
    obstacles, capped by the free cells), ``fixed_map`` (rows of ``'#'`` obstacle / ``'.'``
    free; it fixes the obstacles and sets ``obstacle_percentage`` to its density),
    ``fixed_starts`` (one ``(x, y)`` per agent, predators first), ``allow_cell_sharing``,
    ``block_agents_by_obstacles``. Agents: ``n_predators``, ``n_prey``, their ``*_speed``
    (cells per turn), ``*_stamina`` (moves per episode, None unlimited), ``*_prefix``
    (names ``<prefix>_1``...). ``action_type``: an action table. ``rewards``: the
    :class:`RewardTerm` entries in column order (mappings and tuples are accepted),
    ``gamma`` for potential-based terms. ``observation_type``, ``observation_params`` and
    ``observation_per_agent`` (``{role: {param: value}}``): the observation builder. Episode
    end: ``capture_threshold`` (captured prey), ``max_steps`` (None: no truncation).

    Mappings and lists are stored as sorted pairs and tuples, so equal specs hash equal.
    """

    size: int = _DEFAULT["size"]
    obstacle_percentage: float = _DEFAULT["obstacle_percentage"]
    fixed_map: tuple[str, ...] | None = _DEFAULT["fixed_map"]
    fixed_starts: tuple[tuple[int, int], ...] | None = _DEFAULT["fixed_starts"]
    allow_cell_sharing: bool = _DEFAULT["allow_cell_sharing"]
    block_agents_by_obstacles: bool = _DEFAULT["block_agents_by_obstacles"]
    capture_threshold: int = _DEFAULT["capture_threshold"]
    max_steps: int | None = _DEFAULT["max_steps"]
    n_predators: int = _DEFAULT["n_predators"]
    n_prey: int = _DEFAULT["n_prey"]
    predator_speed: int = _DEFAULT["predator_speed"]
    prey_speed: int = _DEFAULT["prey_speed"]
    predator_stamina: int | None = _DEFAULT["predator_stamina"]
    prey_stamina: int | None = _DEFAULT["prey_stamina"]
    predator_prefix: str = _DEFAULT["predator_prefix"]
    prey_prefix: str = _DEFAULT["prey_prefix"]
    action_type: str = _DEFAULT["action_type"]
    observation_type: str = _DEFAULT["observation_type"]
    observation_params: Params = _DEFAULT["observation_params"]
    observation_per_agent: tuple[tuple[str, Params], ...] | None = _DEFAULT["observation_per_agent"]
    rewards: tuple[RewardTerm, ...] = _DEFAULT["rewards"]
    gamma: float = _DEFAULT["gamma"]

    def __post_init__(self) -> None:
        for name, value in _normalised(self).items():
            object.__setattr__(self, name, value)

    # ----------------------------------------------------------------- derived facts
    @property
    def num_agents(self) -> int:
        return self.n_predators + self.n_prey

    @property
    def speeds(self) -> tuple[int, ...]:
        """Each agent's speed in row order (predators first)."""
        return (self.predator_speed,) * self.n_predators + (self.prey_speed,) * self.n_prey

    @property
    def stamina(self) -> tuple[int | None, ...]:
        """Each agent's stamina in row order (None: unlimited)."""
        return (self.predator_stamina,) * self.n_predators + (self.prey_stamina,) * self.n_prey

    @property
    def num_obstacles(self) -> int:
        """The map's ``'#'`` cells, else PPAGE's ``int((pct / 100.0) * H * W)`` capped by the
        free cells."""
        if self.fixed_map is not None:
            return sum(row.count("#") for row in self.fixed_map)
        cells = self.size * self.size
        # PPAGE's expression, evaluated left to right: 29 % of 10x10 is 29 (not 28).
        return min(
            int((self.obstacle_percentage / 100.0) * self.size * self.size), cells - self.num_agents
        )

    @property
    def state_bytes(self) -> int:
        """Bytes of one grid's State: positions, captured, stamina, obstacles, map, scalars."""
        return self.num_agents * (2 * 4 + 1 + 4) + self.num_obstacles * 2 * 4 + self.size**2 + 16

    @property
    def observation_kwargs(self) -> dict[str, Any]:
        """``observation_params`` as the builder's keyword arguments."""
        return dict(self.observation_params)

    @property
    def per_agent_kwargs(self) -> dict[str, dict[str, Any]] | None:
        """``observation_per_agent`` as ``{role: {param: value}}`` (None when unset)."""
        if self.observation_per_agent is None:
            return None
        return {role: dict(params) for role, params in self.observation_per_agent}

    # ----------------------------------------------------------------- copies, digest
    def replace(self, **changes: Any) -> EnvSpec:
        """A copy with some fields replaced (checked like a new spec)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"unknown EnvSpec field {unknown[0]!r}; fields: {sorted(names)}")
        return dataclasses.replace(self, **changes)

    def digest(self, rewards: bool = True) -> str:
        """Short SHA-256 of the spec in canonical JSON; ``rewards=False`` leaves out the
        reward fields (``rewards``, ``gamma``): equal for specs whose programs differ only in
        reward numbers."""
        body = dataclasses.asdict(self)
        if not rewards:
            for name in REWARD_FIELDS:
                del body[name]
        blob = json.dumps(body, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- checks
def _fail(field: str, value: Any, allowed: str) -> None:
    raise SpecError(field, value, allowed)


def _integer(field: str, value: Any, lo: int, hi: int = INT32_MAX, *, none: str = "") -> Any:
    """``value`` if it is an int in [lo, hi] (or None where ``none`` says what None means)."""
    if value is None and none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        upper = "" if hi == INT32_MAX else f" and <= {hi}"
        _fail(field, value, f"must be an integer >= {lo}{upper}{none}")
    return value


def _number(field: str, value: Any, lo: float, hi: float, allowed: str) -> float:
    """``value`` as a float if it is a real number finite in float32 within [lo, hi]."""
    real = isinstance(value, int | float) and not isinstance(value, bool)
    if not real or not abs(value) <= FLOAT32_MAX or not lo <= value <= hi:
        _fail(field, value, allowed)
    return float(value)


def _flag(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        _fail(field, value, "must be True or False")
    return value


def _is_pairs(value: Any) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in value
    )


def _params(field: str, value: Any) -> Params:
    """A mapping (or (name, value) pairs) as sorted pairs of frozen values."""
    frozen = _frozen(value) if isinstance(value, Mapping | list | tuple) else value
    if not _is_pairs(frozen):
        _fail(field, value, "must be a mapping of param names to values")
    return tuple(sorted(dict(frozen).items()))


def _rewards(value: Any) -> tuple[RewardTerm, ...]:
    if not isinstance(value, list | tuple):
        _fail("rewards", value, "must be a sequence of RewardTerm entries")
    terms = []
    for i, item in enumerate(value):
        where = f"rewards[{i}]"
        try:
            term = _reward_term(item)
        except TypeError:
            _fail(
                where,
                item,
                "must be a RewardTerm, a (name, weight, params, applies_to) tuple "
                "or a mapping with those keys",
            )
        if not isinstance(term.name, str):
            _fail(f"{where}.name", term.name, "must be a reward term name")
        if term.applies_to is not None and term.applies_to not in APPLIES_TO:
            _fail(
                f"{where}.applies_to",
                term.applies_to,
                f"must be one of {list(APPLIES_TO)} (or None: the term's own)",
            )
        weight = _number(f"{where}.weight", term.weight, -FLOAT32_MAX, FLOAT32_MAX, FLOAT32_RULE)
        params = _params(f"{where}.params", term.params)
        terms.append(RewardTerm(term.name, weight, params, term.applies_to))
    return tuple(terms)


def _per_agent(value: Any) -> tuple[tuple[str, Params], ...] | None:
    if value is None:
        return None
    pairs = tuple(value.items()) if isinstance(value, Mapping) else value
    if not isinstance(pairs, list | tuple) or not all(
        isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs
    ):
        _fail("observation_per_agent", value, "must be a mapping {role: {param: value}} or None")
    return tuple(
        sorted((role, _params(f"observation_per_agent.{role}", body)) for role, body in pairs)
    )


def _fixed_map(value: Any, size: int, n_agents: int) -> tuple[str, ...] | None:
    if value is None:
        return None
    rows = tuple(value) if isinstance(value, list | tuple) else ()
    if len(rows) != size or any(not isinstance(r, str) or len(r) != size for r in rows):
        _fail("fixed_map", value, f"must be {size} strings of {size} characters ({{size}})")
    if any(set(r) - {"#", "."} for r in rows):
        _fail("fixed_map", value, "may only contain '#' (obstacle) and '.' (free)")
    free = sum(r.count(".") for r in rows)
    if free < n_agents:
        _fail("fixed_map", value, f"has {free} free cells for {n_agents} agents")
    return rows


def _fixed_starts(
    value: Any, size: int, n_agents: int, rows: tuple[str, ...] | None
) -> tuple[tuple[int, int], ...] | None:
    if value is None:
        return None
    starts = _frozen(value) if isinstance(value, list | tuple) else ()
    ok = len(starts) == n_agents and all(
        isinstance(p, tuple)
        and len(p) == 2
        and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < size for c in p)
        for p in starts
    )
    if not ok:
        _fail(
            "fixed_starts",
            value,
            f"must be {n_agents} (x, y) pairs (predators first) with 0 <= x, y < {size}",
        )
    if len(set(starts)) != n_agents:
        _fail("fixed_starts", value, "start cells must be distinct")
    if rows is not None and any(rows[y][x] == "#" for x, y in starts):
        _fail("fixed_starts", value, "a start cell is an obstacle in {fixed_map}")
    return starts


def _normalised(spec: EnvSpec) -> dict[str, Any]:
    """Every field checked, in its canonical form (tuples, sorted pairs, floats)."""
    out: dict[str, Any] = {
        "size": _integer("size", spec.size, 2, MAX_GRID_SIZE),
        "n_predators": _integer("n_predators", spec.n_predators, 0),
        "n_prey": _integer("n_prey", spec.n_prey, 0),
        "predator_speed": _integer("predator_speed", spec.predator_speed, 1),
        "prey_speed": _integer("prey_speed", spec.prey_speed, 1),
        "capture_threshold": _integer("capture_threshold", spec.capture_threshold, 0),
        "max_steps": _integer("max_steps", spec.max_steps, 1, none=" (or None: no truncation)"),
        "gamma": _number("gamma", spec.gamma, 0.0, 1.0, "must be a number in [0, 1]"),
        "allow_cell_sharing": _flag("allow_cell_sharing", spec.allow_cell_sharing),
        "block_agents_by_obstacles": _flag(
            "block_agents_by_obstacles", spec.block_agents_by_obstacles
        ),
    }
    in_range = "must be a number in [0, 100)"
    percentage = _number("obstacle_percentage", spec.obstacle_percentage, 0.0, 100.0, in_range)
    if percentage == 100.0:
        _fail("obstacle_percentage", spec.obstacle_percentage, in_range)
    for role in ("predator", "prey"):
        field = f"{role}_stamina"
        out[field] = _integer(field, getattr(spec, field), 0, none=" (or None: unlimited)")
        field = f"{role}_prefix"
        if not is_safe_name(getattr(spec, field)):
            _fail(field, getattr(spec, field), f"must be a string {NAME_RULE}")
    if spec.prey_prefix == spec.predator_prefix:
        _fail(
            "prey_prefix",
            spec.prey_prefix,
            "must differ from {predator_prefix} (agent names are unique)",
        )
    if spec.action_type not in ACTION_TABLES:
        _fail(
            "action_type", spec.action_type, f"unknown action table; known: {sorted(ACTION_TABLES)}"
        )
    if not isinstance(spec.observation_type, str):
        _fail("observation_type", spec.observation_type, "must be an observation builder name")
    size, n_agents = out["size"], out["n_predators"] + out["n_prey"]
    if n_agents < 1:
        _fail("n_predators", spec.n_predators, "predators and prey together must number at least 1")
    if n_agents > size * size:
        _fail(
            "n_prey",
            spec.n_prey,
            f"{n_agents} agents do not fit on {size * size} cells ({size}x{size})",
        )
    rows = _fixed_map(spec.fixed_map, size, n_agents)
    if rows is not None:  # the map fixes the obstacles; the percentage reports its density
        percentage = 100.0 * sum(r.count("#") for r in rows) / size**2
    out["obstacle_percentage"] = percentage
    out["fixed_map"] = rows
    out["fixed_starts"] = _fixed_starts(spec.fixed_starts, size, n_agents, rows)
    out["observation_params"] = _params("observation_params", spec.observation_params)
    out["observation_per_agent"] = _per_agent(spec.observation_per_agent)
    out["rewards"] = _rewards(spec.rewards)
    return out


def env_spec(config: ConfigSections) -> EnvSpec:
    """The EnvSpec of a validated :class:`~ppage_jax.config.Config` (or of its ``data``):
    the one place where the env's YAML keys are read (at :data:`CONFIG_KEYS`); a value the
    spec refuses raises :class:`SpecError`."""
    return EnvSpec(**_field_values(config))
