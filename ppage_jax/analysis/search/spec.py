"""SEARCH.yaml -> a validated reward search (docs/search.md has every key).

A search file holds one top-level key, ``search``::

    search:
      config: hybrid                    # base config dir (relative to this file)
      set: {experiment.total_timesteps: 262144}     # overrides for every run
      design:                           # edits of the base config's rewards (sweep arm
        weights: {capture_proximity: 0.0}           # syntax): the design the search starts
        params: {capture_proximity: {radius: 2.0}}  # from and whose structure it keeps
      space:                            # what is searched, with bounds and scale
        weights.predator_closeness: {low: 0.0, high: 0.5}
        params.base.step_cost: {low: 0.01, high: 0.5, scale: log}
      strategy: cma_es                  # or {name: cma_es, std: 0.25}; snes; random
      population: 6
      seeds: 2                          # training seeds per candidate
      generations: 4
      seed: 0                           # the strategy's key
      train_seed: 0
      eval: {seed: 1000000, episodes: 64, policy: sampled, metric: rmst}
      constraint: {monitor: true, checks: [hacking, episode_length, share], audit: []}
      audit: {episodes: 8}              # or false
      references: {hybrid: {config: hybrid}, potential: {config: potential}}
      reevaluate: {seeds: 4, train_seed: 100, eval_seed: 2000000, episodes: 128}
      output_dir: runs/search/reward_design

Every candidate keeps the base design's term structure (the union with the reference arms'
terms, absent terms at weight 0), so the candidates of every generation and the reference
arms run in one compiled program each. The four seed blocks (search training, search
evaluation, re-evaluation training, re-evaluation layouts) must not overlap.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.analysis.batch.arms import declared_param, read_arm
from ppage_jax.analysis.batch.reading import (
    SpecReader,
    check_disjoint,
    display_path,
    open_spec_file,
    read_eval,
)
from ppage_jax.analysis.batch.spec import Arm, SweepSpec, shared_config, union_entries
from ppage_jax.analysis.search.space import KINDS, SCALES, Dimension
from ppage_jax.analysis.search.strategies import STRATEGIES
from ppage_jax.config import (
    NAME_RULE,
    Config,
    float32_number,
    float32_problem,
    is_safe_name,
    load_config,
)
from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.experiment import check_batch, check_plan, planned_updates
from ppage_jax.episodes.metrics import METRICS, rankable
from ppage_jax.rewards.compose import term_entries
from ppage_jax.rewards.registry import Choice, known_terms_help, reward_terms
from ppage_jax.train.run.monitor import TREND_CHECKS as MONITOR_CHECKS

SEARCH_KEYS = (
    "config",
    "set",
    "design",
    "space",
    "strategy",
    "start",
    "pbt",
    "population",
    "seeds",
    "generations",
    "seed",
    "train_seed",
    "eval",
    "constraint",
    "audit",
    "references",
    "reevaluate",
    "output_dir",
    "settings",
    "compare",
)
# What a named setting (search.settings.<name>: small for a 2-core CPU, full for an
# accelerator) may set: the sizes of the search and of its re-evaluation.
SETTING_KEYS = ("population", "seeds", "generations", "pbt", "eval", "reevaluate", "compare")
COMPARE_KEYS = ("strategies", "searches", "reference", "pairs")
DESIGN_KEYS = ("weights", "disable", "params", "applies_to", "hyperparams")
DIM_KEYS = ("low", "high", "scale")
EVAL_KEYS = ("seed", "episodes", "max_steps", "policy", "metric")
CONSTRAINT_KEYS = ("monitor", "checks", "audit", "stall_margin")
AUDIT_KEYS = ("episodes",)
REEVAL_KEYS = ("seeds", "train_seed", "eval_seed", "episodes")
STRATEGY_KEYS = ("name", "std")
PBT_KEYS = ("population", "interval", "quarter", "perturb")
# A PBT schedule is replayed as experiment.curriculum step schedules: at most this many
# intervals (ppage_jax.config.curriculum.MAX_PIECES values a schedule).
PBT_MAX_INTERVALS = 16
REFERENCE_DEFAULT = ("hybrid", "potential")


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A candidate is infeasible when the reward-hacking monitor flags one of ``checks`` in
    the majority (more than half) of its seeds; ``monitor: false`` turns that off. Opt-in:
    ``audit`` names reward-audit flags (``stalling``, ...) that make a candidate infeasible
    before it trains (the audit sees the design, the monitor the training curve).
    ``stall_margin``: the largest analytic stall margin the predators may have
    (:mod:`ppage_jax.analysis.audit.margin`); a candidate above it is not trained at all."""

    monitor: bool = True
    checks: tuple[str, ...] = MONITOR_CHECKS
    audit: tuple[str, ...] = ()
    stall_margin: float | None = None


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


@dataclasses.dataclass(frozen=True)
class Reevaluation:
    """Fresh training seeds and held-out layouts for the selected design and the references."""

    seeds: int = 4
    train_seed: int = 100
    eval_seed: int = 2_000_000
    episodes: int = 128


@dataclasses.dataclass(frozen=True)
class SearchSpec:
    """A validated reward search."""

    path: str
    config: Config  # the base config rewritten to the shared term structure
    design: Arm  # the base design, every shared term present
    references: tuple[Arm, ...]
    dims: tuple[Dimension, ...]
    strategy: str
    std: float
    start: tuple[float, ...]  # the start distribution's mean, unit coordinates per dim
    start_from: str  # centre, design or prior
    population: int
    seeds: int
    generations: int
    seed: int
    train_seed: int
    eval_seed: int
    eval_episodes: int
    eval_max_steps: int | None
    eval_policy: str
    metric: str
    constraint: Constraint
    audit_episodes: int  # 0: no audit
    reevaluate: Reevaluation
    output_dir: str
    pbt: PBTSettings | None = None  # the pbt section (read whatever the strategy)
    compare: Comparison | None = None
    setting: str | None = None  # the search.settings entry applied

    @property
    def train_block(self) -> int:
        """Training seeds of the search: ``seeds`` (each candidate's), or one per PBT member."""
        return self.pbt.population if self.strategy == "pbt" and self.pbt else self.seeds

    @property
    def runs(self) -> int:
        """Training runs of the whole search (its budget, in runs of the config's length)."""
        if self.strategy == "pbt" and self.pbt is not None:
            return self.pbt.population
        return self.population * self.seeds * self.generations

    @property
    def direction(self) -> int:
        """+1 when a higher ``metric`` is better, -1 when lower is (the metric table,
        :data:`ppage_jax.episodes.metrics.METRICS`)."""
        return METRICS[self.metric].sign

    def sweep(self, arms: tuple[Arm, ...] | None = None) -> SweepSpec:
        """The search as a sweep over ``arms`` (default: the design and the references) on
        the search's seeds and held-out block: the sweep machinery runs each generation."""
        arms = arms if arms is not None else (self.design, *self.references)
        return SweepSpec(
            self.path,
            self.config,
            tuple(arms),
            arms[0].name,
            self.seeds,
            self.train_seed,
            self.eval_seed,
            self.eval_episodes,
            self.eval_max_steps,
            self.eval_policy,
            None,
            self.output_dir,
            (arms[0].name,),
            False,
        )

    def reevaluation_sweep(self, best: Arm) -> SweepSpec:
        """``best`` and the references on the re-evaluation's fresh seeds and layouts."""
        re = self.reevaluate
        refs = tuple(r.name for r in self.references)
        return dataclasses.replace(
            self.sweep((best, *self.references)),
            seeds=re.seeds,
            train_seed=re.train_seed,
            eval_seed=re.eval_seed,
            eval_episodes=re.episodes,
            baseline=refs[0] if refs else best.name,
            baselines=refs or (best.name,),
        )

    def step_limit(self, env: Any) -> int:
        """The evaluation's step limit: ``eval.max_steps``, else the env's ``max_steps``."""
        return self.eval_max_steps or int(np.asarray(env.default_params.max_steps).reshape(-1)[0])

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary (what defines the search's results, with the config by hash)."""
        base = self.sweep().describe()
        return {
            "search": self.path,
            "config": base["config"],
            "config_hash": base["config_hash"],
            "terms": base["terms"],
            "design": base["arms"][self.design.name],
            "references": {r.name: base["arms"][r.name] for r in self.references},
            "space": [
                {"key": d.key, "low": d.low, "high": d.high, "scale": d.scale} for d in self.dims
            ],
            "strategy": self.strategy,
            "std": self.std,
            "start": {"from": self.start_from, "mean": list(self.start)},
            "population": self.population,
            "seeds": self.seeds,
            "generations": self.generations,
            "seed": self.seed,
            "train_seeds": [self.train_seed, self.train_seed + self.train_block - 1],
            "eval_seeds": [self.eval_seed, self.eval_seed + self.eval_episodes - 1],
            "eval_max_steps": self.eval_max_steps,
            "eval_policy": self.eval_policy,
            "metric": self.metric,
            "constraint": {
                "monitor": self.constraint.monitor,
                "checks": list(self.constraint.checks),
                **({"audit": list(self.constraint.audit)} if self.constraint.audit else {}),
                **(
                    {"stall_margin": self.constraint.stall_margin}
                    if self.constraint.stall_margin is not None
                    else {}
                ),
            },
            "audit_episodes": self.audit_episodes,
            "reevaluate": dataclasses.asdict(self.reevaluate),
            "runs": self.runs,
            **({"setting": self.setting} if self.setting else {}),
            **(
                {"pbt": dataclasses.asdict(self.pbt)}
                if self.strategy == "pbt" and self.pbt is not None
                else {}
            ),
        }


def load_search(
    path: str | Path, overrides: dict | None = None, setting: str | None = None
) -> SearchSpec:
    """Read and validate a search file. ``overrides`` replace top-level search keys
    (``{"generations": 2}``; a ``set`` override is merged into the file's ``set``).
    ``setting`` names an entry of ``search.settings`` (default: the first declared) whose
    keys replace the file's (mappings merged), under ``overrides``. Every problem raises a
    one-line :class:`ConfigError` naming the file, the key, the value and what is
    allowed."""
    read, raw, base = open_spec_file(path, "search")
    source = read.path
    overrides = _merged_strategy(raw, overrides)
    overrides, setting = _with_setting(read, raw, overrides, setting)
    body = read.section(raw, "search", SEARCH_KEYS, overrides)

    if "config" not in body:
        read.fail("search.config", None, "must name the base config directory")
    config_dir = read.resolve("search.config", body["config"], base)
    sets = read.mapping("search.set", body.get("set"))
    config = load_config(config_dir, sets)

    design_raw = dict(read.mapping("search.design", body.get("design"), DESIGN_KEYS))
    space_raw = body.get("space")
    if not isinstance(space_raw, dict) or not space_raw:
        read.fail(
            "search.space",
            space_raw,
            "must be a non-empty mapping of weights.<term>, params.<term>.<param> or "
            "hyperparams.<name> to {low, high, scale}",
        )
    # a weight the space searches for a term the design lacks adds the term (defaults)
    known = reward_terms()
    weights = dict(design_raw.get("weights") or {})
    present = {e.name for e in term_entries(config["rewards"])}
    for key in space_raw:
        parts = str(key).split(".")
        if parts[0] == "weights" and len(parts) == 2:
            if parts[1] not in known:
                read.fail(
                    f"search.space.{key}",
                    space_raw[key],
                    f"unknown reward term {parts[1]!r}; {known_terms_help()}",
                )
            if parts[1] not in present and parts[1] not in weights:
                weights[parts[1]] = 0.0
    if weights:
        design_raw["weights"] = weights
    design = read_arm(read, "design", design_raw, config, sets, base, "search.design")
    design = dataclasses.replace(design, source=display_path(config.path))

    refs_raw = body.get("references")
    if refs_raw is None:
        refs_raw = {name: {"config": name} for name in REFERENCE_DEFAULT if (base / name).is_dir()}
    if not isinstance(refs_raw, dict):
        read.fail("search.references", refs_raw, "must be a mapping of arm name to arm")
    for name in refs_raw:
        if not is_safe_name(name) or name == "design":
            read.fail("search.references", name, f"a reference name must be {NAME_RULE}")
    references = tuple(
        read_arm(read, str(name), spec, config, sets, base, f"search.references.{name}")
        for name, spec in refs_raw.items()
    )
    # one term structure: the design holds every shared term (absent ones at weight 0)
    union = union_entries((design, *references))
    own = {e.name: e for e in design.entries}
    design = dataclasses.replace(
        design,
        entries=tuple(own.get(e.name, dataclasses.replace(e, weight=0.0)) for e in union),
    )
    dims = tuple(_read_dimension(read, str(k), v, design, config) for k, v in space_raw.items())
    missing = [d.name for d in dims if d.kind == "hyperparams" and d.name not in design.hyperparams]
    if missing:  # the design's own value of a searched hyperparameter: the config's
        from ppage_jax.train.run.experiment import make_train_config

        hp = make_train_config(config).hp
        filled = {n: float(hp.traced_value(n)) for n in missing}
        design = dataclasses.replace(design, hyperparams={**design.hyperparams, **filled})

    strategy_raw = body.get("strategy", "cma_es")
    if isinstance(strategy_raw, str):
        strategy_raw = {"name": strategy_raw}
    strategy_raw = read.mapping("search.strategy", strategy_raw, STRATEGY_KEYS)
    strategy = strategy_raw.get("name", "cma_es")
    if strategy not in STRATEGIES:
        read.fail("search.strategy", strategy, f"must be one of {list(STRATEGIES)}")
    std = read.number("search.strategy.std", strategy_raw.get("std", 0.25))
    if not 0 < std <= 1:
        read.fail("search.strategy.std", std, "must be in (0, 1] (unit-cube units)")
    start, start_from = _read_start(read, body.get("start", "centre"), dims, design)
    population = read.integer("search.population", body.get("population", 8), 1)
    minimum = STRATEGIES[strategy].min_population
    if population < minimum and strategy != "pbt":
        read.fail(
            "search.population",
            population,
            f"must be at least {minimum} for strategy {strategy!r}",
        )
    seeds = read.integer("search.seeds", body.get("seeds", 2), 1)
    generations = read.integer("search.generations", body.get("generations", 4), 1)
    pbt = None
    if "pbt" in body or strategy == "pbt":
        pbt = _read_pbt(read, body.get("pbt"), config, population * seeds * generations)
    seed = read.integer("search.seed", body.get("seed", 0), 0)
    train_seed = read.integer("search.train_seed", body.get("train_seed", 0), 0)

    ev = read.mapping("search.eval", body.get("eval"), EVAL_KEYS)
    evaluation = read_eval(read, "search.eval", ev, config, episodes=64)
    metric = ev.get("metric", "rmst")
    if metric not in rankable():  # steps_to_capture (survivor-biased) is refused
        biased = metric in METRICS and METRICS[metric].survivor_biased
        hint = " (survivor-biased: use rmst)" if biased else ""
        read.fail("search.eval.metric", metric, f"must be one of {list(rankable())}{hint}")

    con = read.mapping("search.constraint", body.get("constraint"), CONSTRAINT_KEYS)
    monitor = con.get("monitor", True)
    if not isinstance(monitor, bool):
        read.fail("search.constraint.monitor", monitor, "must be true or false")
    checks = con.get("checks", list(MONITOR_CHECKS))
    if not isinstance(checks, list) or not checks or any(c not in MONITOR_CHECKS for c in checks):
        read.fail(
            "search.constraint.checks",
            checks,
            f"must be a non-empty list of {list(MONITOR_CHECKS)}",
        )
    from ppage_jax.analysis.batch.auditing import CHECKS as AUDIT_CHECKS

    audit_checks = con.get("audit", [])
    if not isinstance(audit_checks, list) or any(c not in AUDIT_CHECKS for c in audit_checks):
        read.fail(
            "search.constraint.audit", audit_checks, f"must be a list of {list(AUDIT_CHECKS)}"
        )
    stall_margin = None
    if con.get("stall_margin") is not None:
        stall_margin = read.number("search.constraint.stall_margin", con["stall_margin"])
        _check_stall_margin(read, stall_margin, dims, design, config)
    audit_raw = body.get("audit", {})
    if audit_raw is False:
        audit_episodes = 0
    else:
        audit_raw = {} if audit_raw is True else audit_raw
        audit = read.mapping("search.audit", audit_raw, AUDIT_KEYS)
        audit_episodes = read.integer("search.audit.episodes", audit.get("episodes", 8), 1)

    if audit_checks and not audit_episodes:
        read.fail(
            "search.constraint.audit",
            audit_checks,
            "needs the audit: remove 'audit: false' or this constraint",
        )
    re = read.mapping("search.reevaluate", body.get("reevaluate"), REEVAL_KEYS)
    reevaluate = Reevaluation(
        read.integer("search.reevaluate.seeds", re.get("seeds", 4), 1),
        read.integer("search.reevaluate.train_seed", re.get("train_seed", 100), 0),
        read.integer("search.reevaluate.eval_seed", re.get("eval_seed", 2_000_000), 0),
        read.integer("search.reevaluate.episodes", re.get("episodes", 128), 1),
    )
    train_block = pbt.population if strategy == "pbt" and pbt is not None else seeds
    blocks = [
        ("search.train_seed", train_seed, train_block, "the search's training seeds"),
        (
            "search.eval.seed",
            evaluation.seed,
            evaluation.episodes,
            "the search's held-out layouts",
        ),
        (
            "search.reevaluate.train_seed",
            reevaluate.train_seed,
            reevaluate.seeds,
            "the re-evaluation's training seeds",
        ),
        (
            "search.reevaluate.eval_seed",
            reevaluate.eval_seed,
            reevaluate.episodes,
            "the re-evaluation's layouts",
        ),
    ]
    check_disjoint(read, blocks, "the re-evaluation must see fresh seeds")
    if strategy == "pbt" and pbt is not None:  # one generation of every member, one seed each
        _check_sizes(read, config, pbt.population, 1, 1, evaluation.episodes, reevaluate)
    else:
        _check_sizes(read, config, population, seeds, generations, evaluation.episodes, reevaluate)
    output_dir = body.get("output_dir", "runs/search/" + Path(path).stem)
    if not isinstance(output_dir, str) or not output_dir:
        read.fail("search.output_dir", output_dir, "must be a directory path")

    compare = None
    if body.get("compare") is not None:
        compare = _read_compare(read, body["compare"], strategy, references)
    shared = shared_config(config, (design, *references), sets)
    return SearchSpec(
        source,
        shared,
        design,
        references,
        dims,
        strategy,
        std,
        start,
        start_from,
        population,
        seeds,
        generations,
        seed,
        train_seed,
        evaluation.seed,
        evaluation.episodes,
        evaluation.max_steps,
        evaluation.policy,
        metric,
        Constraint(
            monitor,
            tuple(dict.fromkeys(checks)),
            tuple(dict.fromkeys(audit_checks)),
            stall_margin,
        ),
        audit_episodes,
        reevaluate,
        output_dir,
        pbt,
        compare,
        setting,
    )


def _read_dimension(read: SpecReader, key: str, raw: Any, design: Arm, config: Config) -> Dimension:
    where = f"search.space.{key}"
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
        from ppage_jax.config.hyperparams import traced_names
        from ppage_jax.train.registry import hyperparams_class

        algo = config["experiment"]["algorithm"]["name"]
        traced = traced_names(hyperparams_class(algo))
        if name not in traced:
            read.fail(
                where, raw, f"is not a traced hyperparameter of {algo!r}; traced: {list(traced)}"
            )
    spec = read.mapping(where, raw, DIM_KEYS)
    for bound in ("low", "high"):
        if bound not in spec:
            read.fail(f"{where}.{bound}", None, "is required (the searched range)")
    low = read.number(f"{where}.low", spec["low"])
    high = read.number(f"{where}.high", spec["high"])
    for bound, value in (("low", low), ("high", high)):
        _check_bound(read, f"{where}.{bound}", value, kind, name, config)
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


def _read_pbt(read: SpecReader, raw: Any, config: Config, runs: int) -> PBTSettings:
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
        config["env"]["termination"]["max_steps"],
    )
    population = read.integer("search.pbt.population", pbt.get("population", runs), 1)
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


def _with_setting(
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
    merged: dict = {}
    for key, value in body.items():
        own = section.get(key)
        merged[key] = (
            {**own, **value} if isinstance(own, dict) and isinstance(value, dict) else value
        )
    for key, value in (overrides or {}).items():
        own = merged.get(key, section.get(key))
        merged[key] = (
            {**own, **value} if isinstance(own, dict) and isinstance(value, dict) else value
        )
    return merged, str(name)


def _read_compare(
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


def _merged_strategy(raw: Any, overrides: dict | None) -> dict | None:
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


def _read_start(
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


def direct_terms(design: Arm) -> list[str]:
    """The design's direct shaping terms: every term but ``base`` and the potential-based
    ones (what the analytic stall margin sums, :mod:`ppage_jax.analysis.audit.margin`)."""
    from ppage_jax.rewards.registry import get_term

    return [e.name for e in design.entries if e.name != "base" and not get_term(e.name).potential]


def _check_stall_margin(
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

    size = int(config["env"]["size"])
    for entry in design.entries:
        if entry.name in direct:
            params = {k: v for k, v in entry.params.items() if isinstance(v, (int, float))}
            if get_term(entry.name).value_bounds(params, size) is None:
                read.fail(
                    key,
                    limit,
                    f"{entry.name} declares no value bounds, so the stall margin is unknown",
                )


def _check_bound(
    read: SpecReader, key: str, value: float, kind: str, name: str, config: Config
) -> None:
    """Refuse a bound outside the declared range of what it searches: a hyperparameter's
    declared check (``learning_rate > 0``, ``gae_lambda`` in [0, 1]), or for a reward weight
    or numeric term param a number float32 keeps (finite, not flushed to 0)."""
    if kind == "hyperparams":
        from ppage_jax.config.hyperparams import check_value
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


def _check_sizes(
    read: SpecReader,
    config: Config,
    population: int,
    seeds: int,
    generations: int,
    eval_episodes: int,
    reevaluate: Reevaluation,
) -> None:
    """A generation's grids (every candidate x seed trains and is evaluated at once) against
    the memory, and the whole search's env steps against the time (the thresholds of
    :mod:`ppage_jax.config.experiment`), before the strategy starts."""
    exp = config["experiment"]
    num_steps = exp["algorithm"]["params"]["num_steps"]
    max_steps = config["env"]["termination"]["max_steps"]
    per_update = exp["num_envs"] * num_steps
    run_steps = per_update * planned_updates(
        exp["total_timesteps"], exp["episodes"], exp["num_envs"], num_steps, max_steps
    )
    runs = population * seeds
    state_bytes = env_spec(config).state_bytes
    for grids, what in (
        (exp["num_envs"], "experiment.num_envs grids, training"),
        (eval_episodes, "search.eval.episodes, evaluation"),
    ):
        check_batch(
            runs * grids,
            state_bytes,
            "search.population",
            population,
            f"{population} candidates x {seeds} seeds x {grids} {what}",
            read.fail,
        )
    check_plan(
        generations * runs * run_steps,
        "search.generations",
        generations,
        f"the search ({generations:,} generations x {runs:,} runs x {run_steps:,} env steps)",
        read.fail,
    )
