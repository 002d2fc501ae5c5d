"""Readers of the search file's larger sections, each returning its part of the search
(:func:`ppage_jax.analysis.search.spec.load_search` composes them):

- ``search.settings`` and a ``--strategy`` override, merged into the file's keys before
  anything is read (:func:`with_setting`, :func:`merged_strategy`);
- ``search.space``: the searched keys with their bounds and scale (:func:`read_dimensions`),
  the weights a space adds to the design (:func:`space_weights`), whether it can tell
  candidates apart by their stall margin (:func:`check_stall_margin`) and the start
  distribution (:func:`read_start`);
- ``search.pbt`` (:class:`PBTSettings`) and ``search.compare`` (:class:`Comparison`).

Every problem raises the one-line :class:`~ppage_jax.config.ConfigError` of the reader.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ppage_jax.analysis.batch.arms import declared_param
from ppage_jax.analysis.batch.reading import SpecReader
from ppage_jax.analysis.batch.spec import Arm
from ppage_jax.analysis.search.space import KINDS, SCALES, Dimension
from ppage_jax.analysis.search.strategies import STRATEGIES
from ppage_jax.config import Config, float32_number, float32_problem
from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.experiment.section import planned_updates
from ppage_jax.rewards.registry import Choice, known_terms_help, reward_terms

# What a named setting (search.settings.<name>: small for a 2-core CPU, full for an
# accelerator) may set: the sizes of the search and of its re-evaluation.
SETTING_KEYS = ("population", "seeds", "generations", "pbt", "eval", "reevaluate", "compare")
COMPARE_KEYS = ("strategies", "searches", "reference", "pairs")
DIM_KEYS = ("low", "high", "scale")
PBT_KEYS = ("population", "interval", "quarter", "perturb")
# A PBT schedule is replayed as experiment.curriculum step schedules: at most this many
# intervals (ppage_jax.config.experiment.curriculum.MAX_PIECES values a schedule).
PBT_MAX_INTERVALS = 16


@dataclasses.dataclass(frozen=True)
class PBTSettings:
    """Population-based training (:mod:`.pbt`): ``population`` members train side by side;
    every ``interval`` updates the worst ``quarter`` of them copies the learner of a member
    of the best quarter and multiplies each copied value by ``perturb`` or its inverse."""

    population: int
    interval: int
    quarter: float
    perturb: float
    updates: int  # the updates of one run (every member trains this many)

    @property
    def intervals(self) -> int:
        """Exploit-and-explore intervals of a run."""
        return self.updates // self.interval

    @property
    def movers(self) -> int:
        """Members replaced (and members copied from) at each exploit step."""
        return int(self.population * self.quarter)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """``search.compare``: the strategies a repeated search runs (``searches`` independent
    searches each, :mod:`.repeat`), the reference arm every pick is compared with, paired by
    seed, and the declared strategy pairs (Holm over all of them, :mod:`.compare`)."""

    strategies: tuple[str, ...]
    searches: int
    reference: str
    pairs: tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- settings, overrides
def merged(own: Any, value: Any) -> Any:
    """``value`` replacing ``own``, a mapping merged into a mapping."""
    return {**own, **value} if isinstance(own, dict) and isinstance(value, dict) else value


def with_setting(
    read: SpecReader, raw: Any, overrides: dict | None, name: str | None
) -> tuple[dict | None, str | None]:
    """``overrides`` under the search file's setting ``name`` (``search.settings.<name>``;
    default the first one declared; None without settings): the setting's keys replace
    the file's, a mapping merged into the file's mapping, and ``overrides`` win."""
    section = raw.get("search") if isinstance(raw, dict) else None
    declared = section.get("settings") if isinstance(section, dict) else None
    if declared is None:
        if name is not None:
            read.fail("search.settings", None, f"declares no settings; --setting {name} needs one")
        return overrides, None
    if not isinstance(declared, dict) or not declared:
        read.fail("search.settings", declared, "must map setting names to search keys")
    if name is None:
        name = next(iter(declared))
    if name not in declared:
        read.fail("search.settings", sorted(declared), f"has no setting {name!r}")
    body = read.mapping(f"search.settings.{name}", declared[name], SETTING_KEYS)
    assert isinstance(section, dict)
    out: dict = {key: merged(section.get(key), value) for key, value in body.items()}
    for key, value in (overrides or {}).items():
        out[key] = merged(out.get(key, section.get(key)), value)
    return out, str(name)


def merged_strategy(raw: Any, overrides: dict | None) -> dict | None:
    """``overrides`` whose ``strategy`` (a name or a mapping) keeps the file's other strategy
    settings (its ``std``): ``--strategy random`` starts from the same distribution as the
    file's strategy."""
    if not overrides or "strategy" not in overrides:
        return overrides
    section = raw.get("search") if isinstance(raw, dict) else None
    own = section.get("strategy") if isinstance(section, dict) else None
    own = {"name": own} if isinstance(own, str) else own
    new = overrides["strategy"]
    new = {"name": new} if isinstance(new, str) else new
    if isinstance(own, dict) and isinstance(new, dict):
        return {**overrides, "strategy": {**own, **new}}
    return overrides


# --------------------------------------------------------------------------- the space
def space_mapping(read: SpecReader, raw: Any) -> dict:
    """``search.space`` as written: a non-empty mapping of searched keys to their bounds."""
    if not isinstance(raw, dict) or not raw:
        read.fail(
            "search.space",
            raw,
            "must be a non-empty mapping of weights.<term>, params.<term>.<param> or "
            "hyperparams.<name> to {low, high, scale}",
        )
    return raw


def space_weights(read: SpecReader, space: dict, weights: dict, config: Config) -> dict:
    """The design's ``weights`` with every term whose weight the space searches and that the
    design lacks added at weight 0 (with the term's defaults)."""
    known = reward_terms()
    weights = dict(weights)
    present = {t.name for t in env_spec(config).rewards}
    for key in space:
        parts = str(key).split(".")
        if parts[0] == "weights" and len(parts) == 2:
            if parts[1] not in known:
                read.fail(
                    f"search.space.{key}",
                    space[key],
                    f"unknown reward term {parts[1]!r}; {known_terms_help()}",
                )
            if parts[1] not in present and parts[1] not in weights:
                weights[parts[1]] = 0.0
    return weights


def read_dimensions(
    read: SpecReader, space: dict, design: Arm, config: Config
) -> tuple[Dimension, ...]:
    """Every searched key of ``search.space``, in the file's order."""
    return tuple(read_dimension(read, str(k), v, design, config) for k, v in space.items())


def read_dimension(read: SpecReader, key: str, raw: Any, design: Arm, config: Config) -> Dimension:
    """One searched key (``weights.<term>``, ``params.<term>.<param>``,
    ``hyperparams.<name>``) with its bounds and scale."""
    where = f"search.space.{key}"
    kind, name, param = _searched(read, where, key, raw, design, config)
    spec = read.mapping(where, raw, DIM_KEYS)
    for bound in ("low", "high"):
        if bound not in spec:
            read.fail(f"{where}.{bound}", None, "is required (the searched range)")
    low = read.number(f"{where}.low", spec["low"])
    high = read.number(f"{where}.high", spec["high"])
    for bound, value in (("low", low), ("high", high)):
        check_bound(read, f"{where}.{bound}", value, kind, name, config)
    scale = spec.get("scale", "linear")
    if scale not in SCALES:
        read.fail(f"{where}.scale", scale, f"must be one of {list(SCALES)}")
    if not low < high:
        read.fail(
            f"{where}.low", low, f"must be below high ({high}): the bounds are reversed or empty"
        )
    if scale == "log" and low <= 0:
        read.fail(f"{where}.low", low, "must be above 0 for scale: log")
    return Dimension(key, kind, name, param, low, high, scale)


def _searched(
    read: SpecReader, where: str, key: str, raw: Any, design: Arm, config: Config
) -> tuple[str, str, str | None]:
    """``(kind, name, param)`` of a searched key: a term of the design with a numeric param,
    or a traced hyperparameter of the config's algorithm."""
    parts = key.split(".")
    kind = parts[0]
    entries = {e.name: e for e in design.entries}
    if kind not in KINDS or len(parts) != (3 if kind == "params" else 2):
        read.fail(
            where,
            raw,
            "a searched key is weights.<term>, params.<term>.<param> or hyperparams.<name>",
        )
    name, param = parts[1], (parts[2] if kind == "params" else None)
    if kind == "params":
        if name not in entries:
            read.fail(where, raw, f"{name!r} is not a term of the design: {list(entries)}")
        if isinstance(declared_param(read, where, raw, name, parts[2]), Choice):
            read.fail(where, raw, f"{name}.{param} is a choice, not a number: not searchable")
    if kind == "hyperparams":
        from ppage_jax.config.experiment.base import traced_names
        from ppage_jax.train.registry import hyperparams_class

        algo = config["experiment"]["algorithm"]["name"]
        traced = traced_names(hyperparams_class(algo))
        if name not in traced:
            read.fail(
                where, raw, f"is not a traced hyperparameter of {algo!r}; traced: {list(traced)}"
            )
    return kind, name, param


def check_bound(
    read: SpecReader, key: str, value: float, kind: str, name: str, config: Config
) -> None:
    """Refuse a bound outside the declared range of what it searches: a hyperparameter's
    declared check (``learning_rate > 0``, ``gae_lambda`` in [0, 1]), or for a reward weight
    or numeric term param a number float32 keeps (finite, not flushed to 0)."""
    if kind == "hyperparams":
        from ppage_jax.config.experiment.base import check_value
        from ppage_jax.train.registry import hyperparams_class

        algo = config["experiment"]["algorithm"]["name"]
        try:
            check_value(hyperparams_class(algo), name, value, repr(algo))
        except ValueError as err:
            read.fail(key, value, f"outside the declared range of {algo}'s {name}: {err}")
        return
    what = f"a weight of {name}" if kind == "weights" else f"a param of {name}"
    problem = "" if float32_number(value) else "must be finite in float32"
    if problem or float32_problem(value):
        read.fail(key, value, f"outside the range of {what}: {problem or float32_problem(value)}")


def direct_terms(design: Arm) -> list[str]:
    """The design's direct shaping terms: every term but ``base`` and the potential-based
    ones (what the analytic stall margin sums, :mod:`ppage_jax.analysis.audit.margin`)."""
    from ppage_jax.rewards.registry import get_term

    return [e.name for e in design.entries if e.name != "base" and not get_term(e.name).potential]


def check_stall_margin(
    read: SpecReader, limit: float, dims: tuple[Dimension, ...], design: Arm, config: Config
) -> None:
    """A stall-margin constraint needs a space that searches a direct term (else every
    candidate has the design's direct payments and the margin cannot tell them apart), and
    direct terms that declare their bounds (else the margin is unknown)."""
    key = "search.constraint.stall_margin"
    direct = direct_terms(design)
    searched = sorted({d.name for d in dims if d.kind != "hyperparams" and d.name in direct})
    if not searched:
        read.fail(
            key,
            limit,
            "the space searches no direct term (only base, potential-based terms or "
            f"hyperparameters; the design's direct terms: {direct}): the stall margin cannot "
            "tell its candidates apart; search a direct term's weight or drop this constraint",
        )
    from ppage_jax.rewards.registry import get_term

    size = env_spec(config).size
    for entry in design.entries:
        if entry.name in direct:
            params = {k: v for k, v in entry.params.items() if isinstance(v, (int, float))}
            if get_term(entry.name).value_bounds(params, size) is None:
                read.fail(
                    key,
                    limit,
                    f"{entry.name} declares no value bounds, so the stall margin is unknown",
                )


def read_start(
    read: SpecReader, raw: Any, dims: tuple[Dimension, ...], design: Arm
) -> tuple[tuple[float, ...], str]:
    """``search.start``: the mean (unit coordinates) of the distribution every strategy's
    first generation is drawn from: ``centre`` (the box's centre, default), ``design`` (the
    base design's values) or a prior ``{<searched key>: value}`` (in the key's units; keys
    left out sit at the centre)."""
    if raw in ("centre", "center"):
        return tuple(0.5 for _ in dims), "centre"
    if raw == "design":
        return tuple(d.unit(d.current(design)) for d in dims), "design"
    if not isinstance(raw, dict) or not raw:
        read.fail(
            "search.start",
            raw,
            "must be centre, design or a mapping of searched keys to values (a prior mean)",
        )
    by_key = {d.key: d for d in dims}
    for key, value in raw.items():
        if key not in by_key:
            read.fail(f"search.start.{key}", value, f"is not a searched key: {list(by_key)}")
        number = read.number(f"search.start.{key}", value)
        dim = by_key[key]
        if not dim.low <= number <= dim.high:
            read.fail(f"search.start.{key}", value, f"must lie in [{dim.low}, {dim.high}]")
    return tuple(d.unit(float(raw[d.key])) if d.key in raw else 0.5 for d in dims), "prior"


# --------------------------------------------------------------------------- pbt, compare
def read_pbt(read: SpecReader, raw: Any, config: Config, runs: int) -> PBTSettings:
    """``search.pbt``: members (default ``runs``, the evolution strategies' training runs: an
    equal budget in env steps), the interval in updates (default: the smallest divisor of
    the updates giving at most 8 intervals), the quarter and the perturbation factor."""
    pbt = read.mapping("search.pbt", raw, PBT_KEYS)
    exp = config["experiment"]
    if exp.get("curriculum"):
        read.fail(
            "search.pbt",
            raw,
            "the base config schedules experiment.curriculum; PBT writes its own schedule",
        )
    updates = planned_updates(
        exp["total_timesteps"],
        exp["episodes"],
        exp["num_envs"],
        exp["algorithm"]["params"]["num_steps"],
        env_spec(config).max_steps,
    )
    population = read.integer("search.pbt.population", pbt.get("population", runs), 1)
    interval = _read_interval(read, pbt, updates)
    quarter = read.number("search.pbt.quarter", pbt.get("quarter", 0.25))
    if not 0 < quarter <= 0.5:
        read.fail("search.pbt.quarter", quarter, "must be in (0, 0.5]: the share replaced")
    if int(population * quarter) < 1:
        key = "search.pbt.quarter" if "quarter" in pbt else "search.pbt.population"
        read.fail(
            key,
            pbt.get("quarter", population) if "quarter" in pbt else population,
            f"a quarter ({quarter:g}) of {population} members rounds to 0 members: nothing "
            f"would be copied; use at least {math.ceil(1 / quarter)} members",
        )
    perturb = read.number("search.pbt.perturb", pbt.get("perturb", 1.25))
    if not perturb > 1:
        read.fail(
            "search.pbt.perturb",
            perturb,
            "must be above 1 (each copied value is multiplied by it or by its inverse)",
        )
    return PBTSettings(population, interval, quarter, perturb, updates)


def _read_interval(read: SpecReader, pbt: dict, updates: int) -> int:
    """``search.pbt.interval``: a divisor of a run's ``updates`` giving at most
    :data:`PBT_MAX_INTERVALS` intervals (default: the smallest giving at most 8)."""
    divisors = [d for d in range(1, updates + 1) if updates % d == 0]
    default = next(d for d in divisors if updates // d <= 8)
    interval = read.integer("search.pbt.interval", pbt.get("interval", default), 1)
    if updates % interval:
        read.fail(
            "search.pbt.interval",
            interval,
            f"does not divide the {updates} updates of a run (experiment.total_timesteps / "
            f"(num_envs x num_steps)); divisors: {divisors}",
        )
    if updates // interval > PBT_MAX_INTERVALS:
        least = next(d for d in divisors if updates // d <= PBT_MAX_INTERVALS)
        read.fail(
            "search.pbt.interval",
            interval,
            f"gives {updates // interval} intervals; the schedule a plain run replays "
            f"(experiment.curriculum's step schedule) holds at most {PBT_MAX_INTERVALS}: use "
            f"an interval of at least {least}",
        )
    return interval


def read_compare(
    read: SpecReader, raw: Any, strategy: str, references: tuple[Arm, ...]
) -> Comparison:
    """``search.compare``: strategies (default: the file's), searches per strategy (default
    3), the reference arm (default: the first reference) and the declared pairs."""
    body = read.mapping("search.compare", raw, COMPARE_KEYS)
    strategies = body.get("strategies", [strategy])
    if (
        not isinstance(strategies, list)
        or not strategies
        or any(s not in STRATEGIES for s in strategies)
        or len(set(strategies)) != len(strategies)
    ):
        read.fail(
            "search.compare.strategies",
            strategies,
            f"must be a list of distinct strategies among {list(STRATEGIES)}",
        )
    searches = read.integer("search.compare.searches", body.get("searches", 3), 1)
    names = [r.name for r in references]
    reference = body.get("reference", names[0] if names else None)
    if reference not in names:
        read.fail("search.compare.reference", reference, f"must be one of the references {names}")
    pairs_raw = body.get("pairs", [])
    pairs = []
    if not isinstance(pairs_raw, list):
        read.fail("search.compare.pairs", pairs_raw, "must be a list of [strategy, strategy]")
    for i, pair in enumerate(pairs_raw):
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or pair[0] == pair[1]
            or any(p not in strategies for p in pair)
        ):
            read.fail(
                f"search.compare.pairs[{i}]",
                pair,
                f"must be two different strategies of search.compare.strategies {strategies}",
            )
        pairs.append((str(pair[0]), str(pair[1])))
    return Comparison(tuple(strategies), searches, str(reference), tuple(pairs))
