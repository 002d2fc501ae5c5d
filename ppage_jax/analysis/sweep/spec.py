"""SWEEP.yaml -> a validated sweep: arms of reward designs over one shared program structure.

A sweep file holds one top-level key, ``sweep``::

    sweep:
      config: configs/ablation/both     # the base config (default: configs/ablation/both)
      set: {experiment.total_timesteps: 200000}   # overrides applied to every arm
      arms:                             # default: PPAGE's four conditions, configs/ablation/*
        base_only: {config: configs/ablation/base_only}    # an arm from a config directory
        no_survival: {disable: [survival]}                  # ... or edits of the base config
        potential: {weights: {predator_distance: 0, potential_distance: 0.5}}
        slow: {config: configs/ablation/both, hyperparams: {learning_rate: 1.0e-4}}
        split_credit: {params: {base: {credit: split}}, applies_to: {survival: all}}
      baseline: base_only               # P(improvement) is reported against this arm
                                        # (or a list of arms: [base_only, both])
      audit: true                       # reward audit of every arm before training
      seeds: 8                          # training seeds per arm, paired across arms
      train_seed: 0                     # seed i trains from PRNGKey(train_seed + i)
      eval: {seed: 1000000, episodes: 256, max_steps: null, policy: greedy}   # held-out block
      chunk_size: null                  # runs per compiled call (null: as many as fit)
      output_dir: runs/sweeps/ablation  # default: runs/sweeps/<file name>
      checkpoints: {count: 8, episodes: 128, seed: 2000000}   # an evaluation curve (optional)
      scenarios:                        # optional: the same arms and seeds in each scenario
        small: {env.size: 8, env.termination.max_steps: 50}   # overrides of `set` (any key)
        large: {}
      analysis:                         # declared before the run (analysis/sweep/family.py)
        endpoint: score
        comparisons: [[both, base_only]]

Arms may differ only in ``rewards`` and in traced training hyperparameters
(``hyperparams: {learning_rate: 3.0e-4, ent_coef: 0.0}``: step sizes, loss coefficients,
clipping, ``gamma``, ``gae_lambda``, epsilon schedule, ``alpha``; ``ppage_jax.train.kit.traced``).
They are brought to one term structure, the union of their terms in order of first
appearance: a term an arm lacks gets weight 0 and pays exactly nothing, so the whole sweep is
one compiled program (weights, term params, role masks, gamma and the hyperparameters are
traced). The sweep's ``seeds``, ``train_seed`` and ``eval`` replace the config's
``experiment.seed``, ``num_seeds`` and ``eval`` (a sweep does not read those); the rest of
``experiment`` (algorithm, budget, roles) configures every run. Paths in the file are
relative to the file's directory (then to the current directory, then to this repository's
root).

``checkpoints`` scores every run's policy at ``count`` evenly spaced points of its training
(the last at the end) on a block of its own, ``episodes`` fresh layouts from ``seed``, with
the random and scripted baselines on the same block: ``checkpoints.csv`` and the ``auc``
endpoint. ``scenarios`` repeats the sweep in each scenario, every one its own compiled
program and its own sweep directory (``OUTPUT_DIR/<scenario>/``), and its arms are named
``scenario/arm`` in ``analysis`` (:class:`ScenarioSweep`). ``analysis`` declares the primary
endpoint, the family of paired comparisons and the prediction
(:mod:`ppage_jax.analysis.family.declare`); the report tests exactly those.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ppage_jax.analysis.family.declare import AnalysisSpec, read_analysis
from ppage_jax.analysis.sweep.reading import (
    REPO_ROOT,
    SpecReader,
    check_disjoint,
    display_path,
    open_spec_file,
    read_eval,
)
from ppage_jax.config import (
    NAME_RULE,
    SECTIONS,
    Config,
    ConfigError,
    is_safe_name,
    load_config,
    notice,
)
from ppage_jax.defaults import VERSION
from ppage_jax.env import GridWorld, make
from ppage_jax.rewards.compose import RewardComposer, TermEntry, term_entries
from ppage_jax.rewards.registry import (
    APPLIES_TO,
    Choice,
    get_term,
    known_terms_help,
    reward_terms,
)
from ppage_jax.state import EnvParams

SWEEP_KEYS = (
    "config",
    "set",
    "arms",
    "baseline",
    "seeds",
    "train_seed",
    "eval",
    "chunk_size",
    "output_dir",
    "audit",
    "checkpoints",
    "scenarios",
    "analysis",
)
CHECKPOINT_KEYS = ("count", "episodes", "seed")
ARM_KEYS = ("config", "weights", "disable", "params", "applies_to", "hyperparams")
EVAL_KEYS = ("seed", "episodes", "max_steps", "policy")
ABLATION_DIR = "configs/ablation"
# PPAGE's four conditions (configs/ablation/<name>), the default arms.
ABLATION_ARMS = ("base_only", "predator_distance", "survival", "both")


@dataclasses.dataclass(frozen=True)
class Arm:
    """One reward design: its configured terms (defaults filled) and discount."""

    name: str
    entries: tuple[TermEntry, ...]
    gamma: float
    source: str
    # traced training hyperparameters this arm sets (ppage_jax.train.kit.traced)
    hyperparams: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class CheckpointSpec:
    """``sweep.checkpoints``: ``count`` evaluations over training, each of ``episodes``
    layouts from ``seed`` (a block of its own)."""

    count: int
    episodes: int
    seed: int


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: the shared config (union of terms), arms, seeds and eval block."""

    path: str
    config: Config
    arms: tuple[Arm, ...]
    baseline: str
    seeds: int
    train_seed: int
    eval_seed: int
    eval_episodes: int
    eval_max_steps: int | None
    eval_policy: str
    chunk_size: int | None
    output_dir: str
    # every reference arm of P(improvement), ``baseline`` first (``sweep.baseline`` as a list)
    baselines: tuple[str, ...] = ()
    audit: bool = True  # run the reward audit of every arm before training
    checkpoints: CheckpointSpec | None = None
    analysis: AnalysisSpec = AnalysisSpec()
    scenario: str | None = None  # its scenario's name, in a ScenarioSweep

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(e.name for e in union_entries(self.arms))

    def make_env(self) -> GridWorld:
        return make(self.config)

    def arm_params(self, env: GridWorld) -> list[EnvParams]:
        """Each arm's EnvParams in the shared structure (absent terms at weight 0)."""
        out = []
        for arm in self.arms:
            own = {e.name: e for e in arm.entries}
            entries = [
                own.get(e.name, dataclasses.replace(e, weight=0.0))
                for e in union_entries(self.arms)
            ]
            reward = RewardComposer(entries, env.layout).default_params(arm.gamma)
            out.append(env.default_params.replace(reward=reward))
        return out

    def arm_hyperparams(self) -> list[dict[str, float]]:
        """Each arm's traced training hyperparameters: every name some arm sets, at the
        arm's value or the config's (empty dicts when no arm sets one)."""
        names = list(dict.fromkeys(n for arm in self.arms for n in arm.hyperparams))
        if not names:
            return [{} for _ in self.arms]
        from ppage_jax.train.run.experiment import make_train_config

        hp = make_train_config(self.config).hp
        return [{n: arm.hyperparams.get(n, hp.traced_value(n)) for n in names} for arm in self.arms]

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary of the arms (weights per term, params, roles, the training
        hyperparameters an arm sets) and seeds."""
        arms = {}
        for arm, hyper in zip(self.arms, self.arm_hyperparams(), strict=True):
            own = {e.name: e for e in arm.entries}
            arms[arm.name] = {
                "source": arm.source,
                "gamma": arm.gamma,
                "weights": {t: (own[t].weight if t in own else 0.0) for t in self.terms},
                "params": {e.name: dict(e.params) for e in arm.entries if e.params},
                "applies_to": {e.name: e.applies_to for e in arm.entries},
            }
            if hyper:
                arms[arm.name]["hyperparams"] = hyper
        return {
            "sweep": self.path,
            "version": VERSION,
            "config": display_path(self.config.path),
            "config_hash": self.config.hash(),
            "terms": list(self.terms),
            "arms": arms,
            "baseline": self.baseline,
            "baselines": list(self.baselines or (self.baseline,)),
            "seeds": self.seeds,
            "train_seeds": [self.train_seed, self.train_seed + self.seeds - 1],
            "eval_seeds": [self.eval_seed, self.eval_seed + self.eval_episodes - 1],
            "eval_max_steps": self.eval_max_steps,
            "eval_policy": self.eval_policy,
            "checkpoints": dataclasses.asdict(self.checkpoints) if self.checkpoints else None,
            "analysis": self.analysis.describe(),
            "scenario": self.scenario,
        }


@dataclasses.dataclass(frozen=True)
class ScenarioSweep:
    """A sweep file with ``scenarios``: one :class:`SweepSpec` per scenario (its own program
    and directory, ``output_dir/<scenario>``), the same arms and seeds in each, and one
    analysis over them all (arms named ``scenario/arm``)."""

    path: str
    scenarios: dict[str, SweepSpec]
    analysis: AnalysisSpec
    output_dir: str

    def _first(self) -> SweepSpec:
        return next(iter(self.scenarios.values()))

    @property
    def arms(self) -> tuple[Arm, ...]:
        return self._first().arms

    @property
    def seeds(self) -> int:
        return self._first().seeds

    @property
    def terms(self) -> tuple[str, ...]:
        return self._first().terms

    @property
    def baselines(self) -> tuple[str, ...]:
        return self._first().baselines

    @property
    def baseline(self) -> str:
        return self._first().baseline

    def describe(self) -> dict[str, Any]:
        return {
            "sweep": self.path,
            "version": VERSION,
            "scenarios": {name: spec.output_dir for name, spec in self.scenarios.items()},
            "arms": [arm.name for arm in self.arms],
            "seeds": self.seeds,
            "analysis": self.analysis.describe(),
        }


def default_sweep_file() -> str | None:
    """configs/ablation/sweep.yaml (PPAGE's ablation), from the current directory or this
    repository; None when neither has it (``load_sweep(None)`` then builds the same arms)."""
    for root in (Path.cwd(), REPO_ROOT):
        candidate = root / ABLATION_DIR / "sweep.yaml"
        if candidate.is_file():
            return str(candidate)
    return None


def union_entries(arms: Iterable[Arm]) -> list[TermEntry]:
    """The shared term structure of ``arms``: every term some arm has, in order of first
    appearance, with the first arm's entry of it."""
    seen: dict[str, TermEntry] = {}
    for arm in arms:
        for entry in arm.entries:
            seen.setdefault(entry.name, entry)
    return list(seen.values())


def load_sweep(
    path: str | Path | None = None, overrides: dict | None = None, arms: list[str] | None = None
) -> SweepSpec | ScenarioSweep:
    """Read and validate a sweep file (``None``: PPAGE's four-condition ablation); a file
    with ``scenarios`` gives a :class:`ScenarioSweep`.

    ``overrides`` replace top-level sweep keys (``{"seeds": 2}``); a ``set`` override is
    merged into the file's ``set``. ``arms`` keeps only those arms (and the baselines). Every
    problem raises a ConfigError naming the file, the key, the value and what is allowed.
    """
    if path is None:
        read = SpecReader("default sweep (PPAGE's four conditions)")
        raw, base = {"sweep": {}}, Path.cwd()
    else:
        read, raw, base = open_spec_file(path, "sweep")
    body = read.section(raw, "sweep", SWEEP_KEYS, overrides)
    output_dir = body.get("output_dir", "runs/sweeps/" + (Path(path).stem if path else "ablation"))
    if not isinstance(output_dir, str) or not output_dir:
        read.fail("sweep.output_dir", output_dir, "must be a directory path")
    if "scenarios" not in body:
        spec = _read_body(read, body, base, arms, path)
        analysis = read_analysis(read, body.get("analysis"), [a.name for a in spec.arms])
        return dataclasses.replace(spec, analysis=analysis)
    scenarios = read.mapping("sweep.scenarios", body["scenarios"])
    if not scenarios:
        read.fail("sweep.scenarios", scenarios, "must name at least one scenario")
    specs = {}
    sets = read.mapping("sweep.set", body.get("set"))
    for name, extra in scenarios.items():
        if not is_safe_name(name):
            read.fail("sweep.scenarios", name, f"a scenario name must be a string {NAME_RULE}")
        extra = read.mapping(f"sweep.scenarios.{name}", extra)
        scenario_body = dict(body, set={**sets, **extra}, output_dir=f"{output_dir}/{name}")
        spec = _read_body(read, scenario_body, base, arms, path)
        specs[name] = dataclasses.replace(spec, scenario=name)
    labels = [f"{name}/{arm.name}" for name in specs for arm in specs[name].arms]
    analysis = read_analysis(read, body.get("analysis"), labels)
    specs = {k: dataclasses.replace(v, analysis=analysis) for k, v in specs.items()}
    return ScenarioSweep(read.path, specs, analysis, output_dir)


def _read_body(
    read: SpecReader, body: dict, base: Path, arms: list[str] | None, path: str | Path | None
) -> SweepSpec:
    """One :class:`SweepSpec` from a sweep file's section (a scenario's, in a file with
    ``scenarios``), its ``analysis`` left at the default."""
    source = read.path
    config_dir = read.resolve("sweep.config", body.get("config", f"{ABLATION_DIR}/both"), base)
    sets = read.mapping("sweep.set", body.get("set"))
    _notice_unread_sets(read, sets)
    config = load_config(config_dir, sets)

    if "arms" in body:
        arms_raw = body["arms"]
        if not isinstance(arms_raw, dict) or not arms_raw:
            read.fail(
                "sweep.arms",
                arms_raw,
                "must be a non-empty mapping of arm name to "
                f"arm (keys {list(ARM_KEYS)}); omit it for PPAGE's four conditions",
            )
        for name in arms_raw:  # arm names become folders, file names and table cells
            if not is_safe_name(name):
                read.fail("sweep.arms", name, f"an arm name must be a string {NAME_RULE}")
    else:
        arms_raw = {name: {"config": f"{ABLATION_DIR}/{name}"} for name in ABLATION_ARMS}
    baseline: Any = body.get(
        "baseline", "base_only" if "base_only" in arms_raw else next(iter(arms_raw))
    )
    baselines: list[Any] = baseline if isinstance(baseline, list) and baseline else [baseline]
    for name in baselines:
        if not isinstance(name, str) or name not in arms_raw:
            read.fail(
                "sweep.baseline", name, f"must name an arm (or be a list of arms): {list(arms_raw)}"
            )
    audit = body.get("audit", True)
    if not isinstance(audit, bool):
        read.fail("sweep.audit", audit, "must be true or false (run the reward audit first)")
    if arms is not None:
        unknown = [a for a in arms if a not in arms_raw]
        if unknown:
            raise ConfigError(
                "--arms", "arms", unknown[0], f"not an arm of {source}; its arms: {list(arms_raw)}"
            )
        arms_raw = {k: v for k, v in arms_raw.items() if k in arms or k in baselines}
    read_arms = tuple(
        read_arm(read, str(name), spec, config, sets, base) for name, spec in arms_raw.items()
    )

    seeds = read.integer("sweep.seeds", body.get("seeds", 8), 1)
    train_seed = read.integer("sweep.train_seed", body.get("train_seed", 0), 0)
    ev = read.mapping("sweep.eval", body.get("eval"), EVAL_KEYS)
    evaluation = read_eval(read, "sweep.eval", ev, config, episodes=256)
    checkpoints = _read_checkpoints(read, body.get("checkpoints"), config)
    blocks = [
        ("sweep.train_seed", train_seed, seeds, "the training seeds"),
        ("sweep.eval.seed", evaluation.seed, evaluation.episodes, "the evaluation block"),
    ]
    if checkpoints is not None:
        blocks.append(
            ("sweep.checkpoints.seed", checkpoints.seed, checkpoints.episodes, "the checkpoints")
        )
    check_disjoint(read, blocks)
    chunk = read.integer("sweep.chunk_size", body.get("chunk_size"), 1, True)
    shared = shared_config(config, read_arms, sets)
    return SweepSpec(
        path=source,
        config=shared,
        arms=read_arms,
        baseline=str(baselines[0]),
        seeds=seeds,
        train_seed=train_seed,
        eval_seed=evaluation.seed,
        eval_episodes=evaluation.episodes,
        eval_max_steps=evaluation.max_steps,
        eval_policy=evaluation.policy,
        chunk_size=chunk,
        output_dir=body["output_dir"] if "output_dir" in body else _default_output(path),
        baselines=tuple(dict.fromkeys(baselines)),
        audit=audit,
        checkpoints=checkpoints,
    )


# Config keys a sweep replaces with its own (``seeds``, ``train_seed``, ``eval``).
UNREAD_BY_A_SWEEP = {
    "experiment.seed": "sweep.train_seed",
    "experiment.num_seeds": "sweep.seeds (--seeds)",
    "experiment.eval": "sweep.eval (--eval-episodes)",
}


def _notice_unread_sets(read: SpecReader, sets: dict) -> None:
    """A notice for each ``set`` key the sweep does not read (:data:`UNREAD_BY_A_SWEEP`)."""
    for key in sets:
        for prefix, instead in UNREAD_BY_A_SWEEP.items():
            if key == prefix or key.startswith(prefix + "."):
                notice(
                    f"{read.path}: sweep.set {key} has no effect: a sweep takes it from {instead}"
                )


def _default_output(path: str | Path | None) -> str:
    return "runs/sweeps/" + (Path(path).stem if path else "ablation")


def _read_checkpoints(read: SpecReader, raw: Any, config: Config) -> CheckpointSpec | None:
    """``sweep.checkpoints`` (None when absent): ``count`` must divide the run's updates."""
    if raw is None:
        return None
    where = "sweep.checkpoints"
    body = read.mapping(where, raw, CHECKPOINT_KEYS)
    spec = CheckpointSpec(
        read.integer(f"{where}.count", body.get("count", 8), 1),
        read.integer(f"{where}.episodes", body.get("episodes", 128), 1),
        read.integer(f"{where}.seed", body.get("seed", 2_000_000), 0),
    )
    from ppage_jax.train.run.experiment import make_train_config

    updates = make_train_config(config).num_updates
    if updates % spec.count:
        read.fail(
            f"{where}.count",
            spec.count,
            f"must divide the run's {updates} updates (checkpoints are evenly spaced)",
        )
    return spec


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
        return Arm(
            name,
            tuple(term_entries(arm_config["rewards"])),
            float(arm_config["rewards"]["gamma"]),
            display_path(directory),
            hyperparams,
        )

    entries = {e.name: e for e in term_entries(base_config["rewards"])}
    known = reward_terms()
    weights = read.mapping(f"{where}.weights", spec.get("weights"))
    for term, weight in weights.items():
        key = f"{where}.weights.{term}"
        if term not in known:
            read.fail(key, weight, f"unknown reward term; {known_terms_help()}")
        weight = read.number(key, weight)
        if term in entries:
            entries[term] = dataclasses.replace(entries[term], weight=weight)
        else:
            term_spec = get_term(term)
            entries[term] = TermEntry(term, weight, term_spec.defaults(), term_spec.applies_to)
    disable = spec.get("disable") or []
    if not isinstance(disable, list):
        read.fail(f"{where}.disable", disable, "must be a list of term names")
    for term in disable:
        if term not in entries:
            read.fail(
                f"{where}.disable", term, f"is not a term of this arm; its terms: {list(entries)}"
            )
        entries[term] = dataclasses.replace(entries[term], weight=0.0)
    for term, values in read.mapping(f"{where}.params", spec.get("params")).items():
        key = f"{where}.params.{term}"
        if term not in entries:
            read.fail(key, values, f"is not a term of this arm; its terms: {list(entries)}")
        values = read.mapping(key, values)
        params = dict(entries[term].params)
        for param, value in values.items():
            declared = declared_param(read, f"{key}.{param}", value, term, param)
            if isinstance(declared, Choice):
                if value not in declared.options:
                    read.fail(f"{key}.{param}", value, f"must be one of {list(declared.options)}")
            else:
                value = read.number(f"{key}.{param}", value)
            params[param] = value
        entries[term] = dataclasses.replace(entries[term], params=params)
    for term, role in read.mapping(f"{where}.applies_to", spec.get("applies_to")).items():
        key = f"{where}.applies_to.{term}"
        if term not in entries:
            read.fail(key, role, f"is not a term of this arm; its terms: {list(entries)}")
        if role not in APPLIES_TO:
            read.fail(key, role, f"must be one of {list(APPLIES_TO)}")
        entries[term] = dataclasses.replace(entries[term], applies_to=role)
    return Arm(
        name,
        tuple(entries.values()),
        float(base_config["rewards"]["gamma"]),
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
    from ppage_jax.config.hyperparams import check_value
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


def shared_config(config: Config, arms: tuple[Arm, ...], sets: dict) -> Config:
    """The base config rewritten to hold the union of every arm's terms."""
    union = union_entries(arms)
    shaping = [
        {"name": e.name, "weight": e.weight, "params": dict(e.params), "applies_to": e.applies_to}
        for e in union
        if e.name != "base"
    ]
    overrides: dict[str, Any] = {
        "rewards.shaping": shaping,
        "rewards.base.enabled": any(e.name == "base" for e in union),
    }
    base_entry = next((e for e in union if e.name == "base"), None)
    if base_entry is not None:
        overrides["rewards.base.params"] = dict(base_entry.params)
        overrides["rewards.base.weight"] = base_entry.weight
    return config.with_overrides(overrides)
