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
from pathlib import Path
from typing import Any, Generic, TypeVar

from ppage_jax.analysis.batch.arms import ARM_KEYS, read_arm
from ppage_jax.analysis.batch.reading import (
    REPO_ROOT,
    SpecReader,
    check_disjoint,
    open_spec_file,
    read_eval,
)
from ppage_jax.analysis.batch.spec import Arm, CheckpointSpec, SweepSpec, shared_config
from ppage_jax.analysis.family.declare import AnalysisSpec, read_analysis
from ppage_jax.config import (
    NAME_RULE,
    Config,
    ConfigError,
    is_safe_name,
    load_config,
    notice,
)
from ppage_jax.defaults import VERSION

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
EVAL_KEYS = ("seed", "episodes", "max_steps", "policy")
ABLATION_DIR = "configs/ablation"
# PPAGE's four conditions (configs/ablation/<name>), the default arms.
ABLATION_ARMS = ("base_only", "predator_distance", "survival", "both")


T = TypeVar("T")


class FromFirstScenario(Generic[T]):
    """An attribute of a :class:`ScenarioSweep` that its scenarios share (the arms, seeds,
    terms and baselines): the first scenario's."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, sweep: ScenarioSweep, owner: type | None = None) -> T:
        return getattr(next(iter(sweep.scenarios.values())), self.name)


@dataclasses.dataclass(frozen=True)
class ScenarioSweep:
    """A sweep file with ``scenarios``: one :class:`SweepSpec` per scenario (its own program
    and directory, ``output_dir/<scenario>``), the same arms and seeds in each, and one
    analysis over them all (arms named ``scenario/arm``)."""

    path: str
    scenarios: dict[str, SweepSpec]
    analysis: AnalysisSpec
    output_dir: str

    # what every scenario shares, read from the first one
    arms = FromFirstScenario[tuple[Arm, ...]]()
    seeds = FromFirstScenario[int]()
    terms = FromFirstScenario[tuple[str, ...]]()
    baselines = FromFirstScenario[tuple[str, ...]]()
    baseline = FromFirstScenario[str]()

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
    output_dir = body.get("output_dir", _default_output(path))
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
