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
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any

from ppage_jax.config import (
    NAME_RULE,
    PACKAGED_CONFIGS,
    SECTIONS,
    Config,
    ConfigError,
    is_safe_name,
    load_config,
    load_yaml,
)
from ppage_jax.env import GridWorld, make
from ppage_jax.rewards.compose import RewardComposer, TermEntry, term_entries
from ppage_jax.rewards.registry import ROLES, Choice, get_term, reward_terms
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
)
ARM_KEYS = ("config", "weights", "disable", "params", "applies_to", "hyperparams")
EVAL_KEYS = ("seed", "episodes", "max_steps", "policy")
# How the trained policy acts in evaluation: its greedy actions, or actions sampled from it
# (stochastic learners such as IPPO).
EVAL_POLICIES = ("greedy", "sampled")
ABLATION_DIR = "configs/ablation"
# PPAGE's four conditions (configs/ablation/<name>), the default arms.
ABLATION_ARMS = ("base_only", "predator_distance", "survival", "both")
# The folder holding the shipped `configs/` (inside the installed package).
REPO_ROOT = PACKAGED_CONFIGS.parent


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

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(e.name for e in _union_entries(self.arms))

    def make_env(self) -> GridWorld:
        return make(self.config)

    def arm_params(self, env: GridWorld) -> list[EnvParams]:
        """Each arm's EnvParams in the shared structure (absent terms at weight 0)."""
        out = []
        for arm in self.arms:
            own = {e.name: e for e in arm.entries}
            entries = [
                own.get(e.name, dataclasses.replace(e, weight=0.0))
                for e in _union_entries(self.arms)
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
            "config": _display(Path(self.config.path)),
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
        }


def default_sweep_file() -> str | None:
    """configs/ablation/sweep.yaml (PPAGE's ablation), from the current directory or this
    repository; None when neither has it (``load_sweep(None)`` then builds the same arms)."""
    for root in (Path.cwd(), REPO_ROOT):
        candidate = root / ABLATION_DIR / "sweep.yaml"
        if candidate.is_file():
            return str(candidate)
    return None


def _display(path: Path) -> str:
    """A path relative to the current directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _union_entries(arms) -> list[TermEntry]:
    seen: dict[str, TermEntry] = {}
    for arm in arms:
        for entry in arm.entries:
            seen.setdefault(entry.name, entry)
    return list(seen.values())


class _Reader:
    """Raises ConfigErrors that name the sweep file."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, value: Any, allowed: str) -> None:
        raise ConfigError(self.path, key, value, allowed)

    def mapping(self, key: str, value: Any, allowed_keys=None) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(key, value, "must be a mapping")
        if allowed_keys is not None:
            for k in value:
                if k not in allowed_keys:
                    self.fail(
                        f"{key}.{k}",
                        value[k],
                        f"unknown key; allowed keys of {key}: {list(allowed_keys)}",
                    )
        return value

    def integer(self, key: str, value: Any, low: int, nullable: bool = False) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.fail(
                key, value, f"must be an integer >= {low}" + (" (or null)" if nullable else "")
            )
        return value

    def number(self, key: str, value: Any) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            self.fail(key, value, "must be a finite number")
        return float(value)

    def resolve(self, key: str, value: Any, base: Path) -> Path:
        if not isinstance(value, str) or not value:
            self.fail(key, value, "must be a path to a config directory")
        for root in (base, Path.cwd(), REPO_ROOT):
            candidate = (root / value).resolve()
            if candidate.exists():
                return candidate
        self.fail(
            key,
            value,
            f"no such config directory (looked in {base}, the current directory and {REPO_ROOT})",
        )


def load_sweep(
    path: str | Path | None = None, overrides: dict | None = None, arms: list[str] | None = None
) -> SweepSpec:
    """Read and validate a sweep file (``None``: PPAGE's four-condition ablation).

    ``overrides`` replace top-level sweep keys (``{"seeds": 2}``); a ``set`` override is
    merged into the file's ``set``. ``arms`` keeps only those arms (and the baselines). Every
    problem raises a ConfigError naming the file, the key, the value and what is allowed.
    """
    if path is None:
        raw, source, base = {"sweep": {}}, "default sweep (PPAGE's four conditions)", Path.cwd()
    else:
        file = Path(path)
        source, base = str(file), file.resolve().parent
        if not file.is_file():
            raise ConfigError(source, "<path>", str(file), "must be an existing sweep file")
        raw = load_yaml(file.read_bytes(), source)
    read = _Reader(source)
    if not isinstance(raw, dict) or set(raw) != {"sweep"}:
        read.fail(
            "<top level>",
            raw if not isinstance(raw, dict) else sorted(raw),
            "a sweep file holds exactly one top-level key, 'sweep'",
        )
    body = copy.deepcopy(read.mapping("sweep", raw["sweep"], SWEEP_KEYS))
    for key, value in (overrides or {}).items():
        if key not in SWEEP_KEYS:
            raise ConfigError(
                f"override {key}={value!r}",
                key,
                value,
                f"unknown sweep key; allowed: {list(SWEEP_KEYS)}",
            )
        if key == "set" and isinstance(body.get("set"), dict) and isinstance(value, dict):
            value = {**body["set"], **value}
        body[key] = value

    config_dir = read.resolve("sweep.config", body.get("config", f"{ABLATION_DIR}/both"), base)
    sets = read.mapping("sweep.set", body.get("set"))
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
    baseline = body.get(
        "baseline", "base_only" if "base_only" in arms_raw else next(iter(arms_raw))
    )
    baselines = baseline if isinstance(baseline, list) and baseline else [baseline]
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
    arms = tuple(
        _read_arm(read, str(name), spec, config, sets, base) for name, spec in arms_raw.items()
    )

    seeds = read.integer("sweep.seeds", body.get("seeds", 8), 1)
    train_seed = read.integer("sweep.train_seed", body.get("train_seed", 0), 0)
    ev = read.mapping("sweep.eval", body.get("eval"), EVAL_KEYS)
    eval_seed = read.integer("sweep.eval.seed", ev.get("seed", 1_000_000), 0)
    eval_episodes = read.integer("sweep.eval.episodes", ev.get("episodes", 256), 1)
    eval_max_steps = read.integer("sweep.eval.max_steps", ev.get("max_steps"), 1, True)
    eval_policy = ev.get("policy", "greedy")
    if eval_policy not in EVAL_POLICIES:
        read.fail("sweep.eval.policy", eval_policy, f"must be one of {list(EVAL_POLICIES)}")
    if eval_policy == "sampled":
        from ppage_jax.train.registry import algorithm

        name = config["experiment"]["algorithm"]["name"]
        if not algorithm(name).STOCHASTIC:
            read.fail(
                "sweep.eval.policy",
                eval_policy,
                f"algorithm {name!r} has no stochastic policy to sample; use 'greedy'",
            )
    if eval_max_steps is None and config["env"]["termination"]["max_steps"] is None:
        read.fail(
            "sweep.eval.max_steps",
            None,
            "must be set when env.termination.max_steps "
            "is null (evaluation episodes need a step cap)",
        )
    if train_seed < eval_seed + eval_episodes and eval_seed < train_seed + seeds:
        read.fail(
            "sweep.eval.seed",
            eval_seed,
            f"the evaluation block [{eval_seed}, {eval_seed + eval_episodes}) must not "
            f"overlap the training seeds [{train_seed}, {train_seed + seeds})",
        )
    chunk = read.integer("sweep.chunk_size", body.get("chunk_size"), 1, True)
    output_dir = body.get("output_dir", "runs/sweeps/" + (Path(path).stem if path else "ablation"))
    if not isinstance(output_dir, str) or not output_dir:
        read.fail("sweep.output_dir", output_dir, "must be a directory path")

    shared = _shared_config(config, arms, sets)
    return SweepSpec(
        source,
        shared,
        arms,
        str(baselines[0]),
        seeds,
        train_seed,
        eval_seed,
        eval_episodes,
        eval_max_steps,
        eval_policy,
        chunk,
        output_dir,
        tuple(dict.fromkeys(baselines)),
        audit,
    )


def _read_arm(
    read: _Reader,
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
            _display(directory),
            hyperparams,
        )

    entries = {e.name: e for e in term_entries(base_config["rewards"])}
    known = reward_terms()
    weights = read.mapping(f"{where}.weights", spec.get("weights"))
    for term, weight in weights.items():
        key = f"{where}.weights.{term}"
        if term not in known:
            read.fail(key, weight, f"unknown reward term; known terms: {list(known)}")
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
        declared = get_term(term).params
        params = dict(entries[term].params)
        for param, value in values.items():
            if param not in declared:
                read.fail(
                    f"{key}.{param}",
                    value,
                    f"unknown param of reward term {term!r}; its params: {sorted(declared)}",
                )
            if isinstance(declared[param], Choice):
                if value not in declared[param].options:
                    read.fail(
                        f"{key}.{param}", value, f"must be one of {list(declared[param].options)}"
                    )
            else:
                value = read.number(f"{key}.{param}", value)
            params[param] = value
        entries[term] = dataclasses.replace(entries[term], params=params)
    for term, role in read.mapping(f"{where}.applies_to", spec.get("applies_to")).items():
        key = f"{where}.applies_to.{term}"
        if term not in entries:
            read.fail(key, role, f"is not a term of this arm; its terms: {list(entries)}")
        if role not in ROLES:
            read.fail(key, role, f"must be one of {list(ROLES)}")
        entries[term] = dataclasses.replace(entries[term], applies_to=role)
    return Arm(
        name,
        tuple(entries.values()),
        float(base_config["rewards"]["gamma"]),
        f"{_display(Path(base_config.path))} + edits",
        hyperparams,
    )


def _read_hyperparams(read: _Reader, where: str, values: Any, config: Config) -> dict[str, float]:
    """An arm's ``hyperparams``: traced training hyperparameters of the configured algorithm
    (:mod:`ppage_jax.train.kit.traced`), each validated like its config key."""
    from ppage_jax.train.kit.traced import check_value
    from ppage_jax.train.registry import hyperparams_class

    algo = config["experiment"]["algorithm"]["name"]
    out = {}
    for name, value in read.mapping(f"{where}.hyperparams", values).items():
        try:
            out[str(name)] = check_value(hyperparams_class(algo), name, value, repr(algo))
        except ValueError as err:
            read.fail(f"{where}.hyperparams.{name}", value, str(err))
    return out


def _check_same_structure(read: _Reader, where: str, arm: Config, base: Config) -> None:
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


def _shared_config(config: Config, arms: tuple[Arm, ...], sets: dict) -> Config:
    """The base config rewritten to hold the union of every arm's terms."""
    union = _union_entries(arms)
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
