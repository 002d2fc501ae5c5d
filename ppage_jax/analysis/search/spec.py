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
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.analysis.batch.arms import read_arm
from ppage_jax.analysis.batch.reading import (
    SpecReader,
    check_disjoint,
    display_path,
    open_spec_file,
    read_eval,
)
from ppage_jax.analysis.batch.spec import (
    Arm,
    SweepSpec,
    shared_config,
    shared_terms,
    union_terms,
)
from ppage_jax.analysis.search.sections import (
    Comparison,
    PBTSettings,
    check_stall_margin,
    merged_strategy,
    read_compare,
    read_dimensions,
    read_pbt,
    read_start,
    space_mapping,
    space_weights,
    with_setting,
)
from ppage_jax.analysis.search.space import Dimension
from ppage_jax.analysis.search.strategies import STRATEGIES
from ppage_jax.config import NAME_RULE, Config, is_safe_name, load_config
from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.experiment.section import check_batch, check_plan, planned_updates
from ppage_jax.episodes.metrics import METRICS, rankable
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
DESIGN_KEYS = ("weights", "disable", "params", "applies_to", "hyperparams")
EVAL_KEYS = ("seed", "episodes", "max_steps", "policy", "metric")
CONSTRAINT_KEYS = ("monitor", "checks", "audit", "stall_margin")
AUDIT_KEYS = ("episodes",)
REEVAL_KEYS = ("seeds", "train_seed", "eval_seed", "episodes")
STRATEGY_KEYS = ("name", "std")
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
    allowed. Each section has its reader, called in the file's order of dependence."""
    read, raw, base = open_spec_file(path, "search")
    overrides, setting = with_setting(read, raw, merged_strategy(raw, overrides), setting)
    body = read.section(raw, "search", SEARCH_KEYS, overrides)
    config, sets = _read_config(read, body, base)
    design_raw = read.mapping("search.design", body.get("design"), DESIGN_KEYS)
    space = space_mapping(read, body.get("space"))
    design = _read_design(read, design_raw, space, config, sets, base)
    references = _read_references(read, body.get("references"), config, sets, base)
    design = _with_shared_terms(design, references)
    dims = read_dimensions(read, space, design, config)
    design = _with_searched_hyperparams(design, dims, config)
    strategy, std = _read_strategy(read, body.get("strategy", "cma_es"))
    start, start_from = read_start(read, body.get("start", "centre"), dims, design)
    population, seeds, generations = _read_sizes(read, body, strategy)
    pbt = None
    if "pbt" in body or strategy == "pbt":
        pbt = read_pbt(read, body.get("pbt"), config, population * seeds * generations)
    seed = read.integer("search.seed", body.get("seed", 0), 0)
    train_seed = read.integer("search.train_seed", body.get("train_seed", 0), 0)
    evaluation, metric = _read_eval(read, body.get("eval"), config)
    constraint, audit_episodes = _read_constraint(read, body, dims, design, config)
    reevaluate = _read_reevaluate(read, body.get("reevaluate"))
    if strategy == "pbt" and pbt is not None:  # one generation of every member, one seed each
        _check_seed_blocks(read, train_seed, pbt.population, evaluation, reevaluate)
        _check_sizes(read, config, pbt.population, 1, 1, evaluation.episodes)
    else:
        _check_seed_blocks(read, train_seed, seeds, evaluation, reevaluate)
        _check_sizes(read, config, population, seeds, generations, evaluation.episodes)
    output_dir = body.get("output_dir", "runs/search/" + Path(path).stem)
    if not isinstance(output_dir, str) or not output_dir:
        read.fail("search.output_dir", output_dir, "must be a directory path")
    compare = None
    if body.get("compare") is not None:
        compare = read_compare(read, body["compare"], strategy, references)
    return SearchSpec(
        read.path,
        shared_config(config, (design, *references), sets),
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
        constraint,
        audit_episodes,
        reevaluate,
        output_dir,
        pbt,
        compare,
        setting,
    )


def _read_config(read: SpecReader, body: dict, base: Path) -> tuple[Config, dict]:
    """``search.config`` (the base config directory) loaded under ``search.set``, and the
    overrides."""
    if "config" not in body:
        read.fail("search.config", None, "must name the base config directory")
    config_dir = read.resolve("search.config", body["config"], base)
    sets = read.mapping("search.set", body.get("set"))
    return load_config(config_dir, sets), sets


def _read_design(
    read: SpecReader, raw: dict, space: dict, config: Config, sets: dict, base: Path
) -> Arm:
    """``search.design``: the base design (sweep arm syntax), with every term whose weight
    the space searches (:func:`space_weights`)."""
    design_raw = dict(raw)
    weights = space_weights(read, space, design_raw.get("weights") or {}, config)
    if weights:
        design_raw["weights"] = weights
    design = read_arm(read, "design", design_raw, config, sets, base, "search.design")
    return dataclasses.replace(design, source=display_path(config.path))


def _read_references(
    read: SpecReader, raw: Any, config: Config, sets: dict, base: Path
) -> tuple[Arm, ...]:
    """``search.references``: the arms the selected design is re-evaluated against (default:
    the configs :data:`REFERENCE_DEFAULT` next to the search file's base)."""
    if raw is None:
        raw = {name: {"config": name} for name in REFERENCE_DEFAULT if (base / name).is_dir()}
    if not isinstance(raw, dict):
        read.fail("search.references", raw, "must be a mapping of arm name to arm")
    for name in raw:
        if not is_safe_name(name) or name == "design":
            read.fail("search.references", name, f"a reference name must be {NAME_RULE}")
    return tuple(
        read_arm(read, str(name), spec, config, sets, base, f"search.references.{name}")
        for name, spec in raw.items()
    )


def _with_shared_terms(design: Arm, references: tuple[Arm, ...]) -> Arm:
    """``design`` in the one term structure of the design and the references (the terms it
    lacks at weight 0)."""
    return dataclasses.replace(
        design, terms=shared_terms(design, union_terms((design, *references)))
    )


def _with_searched_hyperparams(design: Arm, dims: tuple[Dimension, ...], config: Config) -> Arm:
    """``design`` holding its own value (the config's) of every searched hyperparameter."""
    missing = [d.name for d in dims if d.kind == "hyperparams" and d.name not in design.hyperparams]
    if not missing:
        return design
    from ppage_jax.train.run.experiment import make_train_config

    hp = make_train_config(config).hp
    filled = {n: float(hp.traced_value(n)) for n in missing}
    return dataclasses.replace(design, hyperparams={**design.hyperparams, **filled})


def _read_strategy(read: SpecReader, raw: Any) -> tuple[str, float]:
    """``search.strategy``: a name or ``{name, std}``; the start distribution's std."""
    if isinstance(raw, str):
        raw = {"name": raw}
    raw = read.mapping("search.strategy", raw, STRATEGY_KEYS)
    strategy = raw.get("name", "cma_es")
    if strategy not in STRATEGIES:
        read.fail("search.strategy", strategy, f"must be one of {list(STRATEGIES)}")
    std = read.number("search.strategy.std", raw.get("std", 0.25))
    if not 0 < std <= 1:
        read.fail("search.strategy.std", std, "must be in (0, 1] (unit-cube units)")
    return strategy, std


def _read_sizes(read: SpecReader, body: dict, strategy: str) -> tuple[int, int, int]:
    """``(population, seeds, generations)``: the population at least the strategy's
    smallest (PBT reads its own members)."""
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
    return population, seeds, generations


def _read_eval(read: SpecReader, raw: Any, config: Config) -> tuple[Any, str]:
    """``search.eval``: the held-out block (the sweep's reader) and the task metric (a
    rankable one: not survivor-biased)."""
    ev = read.mapping("search.eval", raw, EVAL_KEYS)
    evaluation = read_eval(read, "search.eval", ev, config, episodes=64)
    metric = ev.get("metric", "rmst")
    if metric not in rankable():  # steps_to_capture (survivor-biased) is refused
        biased = metric in METRICS and METRICS[metric].survivor_biased
        hint = " (survivor-biased: use rmst)" if biased else ""
        read.fail("search.eval.metric", metric, f"must be one of {list(rankable())}{hint}")
    return evaluation, metric


def _read_constraint(
    read: SpecReader, body: dict, dims: tuple[Dimension, ...], design: Arm, config: Config
) -> tuple[Constraint, int]:
    """``search.constraint`` and ``search.audit`` (the audit's episodes per policy pair, 0
    when off), which an audit constraint needs."""
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
        check_stall_margin(read, stall_margin, dims, design, config)
    audit_episodes = _read_audit(read, body.get("audit", {}))
    if audit_checks and not audit_episodes:
        read.fail(
            "search.constraint.audit",
            audit_checks,
            "needs the audit: remove 'audit: false' or this constraint",
        )
    unique = tuple(dict.fromkeys(checks)), tuple(dict.fromkeys(audit_checks))
    return Constraint(monitor, *unique, stall_margin), audit_episodes


def _read_audit(read: SpecReader, raw: Any) -> int:
    """``search.audit``: its episodes per baseline policy pair (default 8), 0 when false."""
    if raw is False:
        return 0
    raw = {} if raw is True else raw
    audit = read.mapping("search.audit", raw, AUDIT_KEYS)
    return read.integer("search.audit.episodes", audit.get("episodes", 8), 1)


def _read_reevaluate(read: SpecReader, raw: Any) -> Reevaluation:
    """``search.reevaluate``: the re-evaluation's fresh seeds and layouts."""
    re = read.mapping("search.reevaluate", raw, REEVAL_KEYS)
    return Reevaluation(
        read.integer("search.reevaluate.seeds", re.get("seeds", 4), 1),
        read.integer("search.reevaluate.train_seed", re.get("train_seed", 100), 0),
        read.integer("search.reevaluate.eval_seed", re.get("eval_seed", 2_000_000), 0),
        read.integer("search.reevaluate.episodes", re.get("episodes", 128), 1),
    )


def _check_seed_blocks(
    read: SpecReader, train_seed: int, train_block: int, evaluation: Any, re: Reevaluation
) -> None:
    """The four seed blocks (search training and layouts, re-evaluation training and
    layouts) must not overlap: the re-evaluation sees fresh seeds."""
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
            re.train_seed,
            re.seeds,
            "the re-evaluation's training seeds",
        ),
        (
            "search.reevaluate.eval_seed",
            re.eval_seed,
            re.episodes,
            "the re-evaluation's layouts",
        ),
    ]
    check_disjoint(read, blocks, "the re-evaluation must see fresh seeds")


def _check_sizes(
    read: SpecReader,
    config: Config,
    population: int,
    seeds: int,
    generations: int,
    eval_episodes: int,
) -> None:
    """A generation's grids (every candidate x seed trains and is evaluated at once) against
    the memory, and the whole search's env steps against the time (the thresholds of
    :mod:`ppage_jax.config.experiment.section`), before the strategy starts."""
    exp = config["experiment"]
    num_steps = exp["algorithm"]["params"]["num_steps"]
    spec = env_spec(config)
    max_steps = spec.max_steps
    per_update = exp["num_envs"] * num_steps
    run_steps = per_update * planned_updates(
        exp["total_timesteps"], exp["episodes"], exp["num_envs"], num_steps, max_steps
    )
    runs = population * seeds
    state_bytes = spec.state_bytes
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
