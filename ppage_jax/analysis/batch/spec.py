"""The reward designs a batch trains and the batch itself: :class:`Arm` (one design: its
configured terms and discount) and :class:`SweepSpec` (arms x seeds, the held-out evaluation
block and the shared config holding the union of the arms' terms), trained and evaluated as
one compiled program (:mod:`ppage_jax.analysis.batch.program`). A sweep file
(:func:`ppage_jax.analysis.sweep.spec.load_sweep`) and a reward search's generations
(:mod:`ppage_jax.analysis.search`) each make one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ppage_jax.analysis.batch.reading import display_path
from ppage_jax.analysis.family.declare import AnalysisSpec
from ppage_jax.config import Config
from ppage_jax.config.env_spec import RewardTerm
from ppage_jax.defaults import VERSION
from ppage_jax.env import GridWorld, make
from ppage_jax.rewards.compose import TermEntry, checked_entries
from ppage_jax.state import EnvParams


@dataclasses.dataclass(frozen=True)
class Arm:
    """One reward design: its reward terms (as an EnvSpec holds them) and discount."""

    name: str
    terms: tuple[RewardTerm, ...]
    gamma: float
    source: str
    # traced training hyperparameters this arm sets (ppage_jax.train.kit.traced)
    hyperparams: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def entries(self) -> list[TermEntry]:
        """The terms as the composer reads them: checked, params completed with the
        declared defaults, each term's role filled in."""
        return checked_entries(self.terms)


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
        return tuple(t.name for t in union_terms(self.arms))

    def make_env(self) -> GridWorld:
        return make(self.config)

    def arm_params(self, env: GridWorld) -> list[EnvParams]:
        """Each arm's EnvParams from ``env`` (built from :attr:`config`) in the shared
        structure (absent terms at weight 0)."""
        union = union_terms(self.arms)
        return [env.with_rewards(shared_terms(arm, union), arm.gamma) for arm in self.arms]

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


def union_terms(arms: Iterable[Arm]) -> list[RewardTerm]:
    """The shared term structure of ``arms``: every term some arm has, in order of first
    appearance, with the first arm's term of that name."""
    seen: dict[str, RewardTerm] = {}
    for arm in arms:
        for term in arm.terms:
            seen.setdefault(term.name, term)
    return list(seen.values())


def shared_terms(arm: Arm, union: Iterable[RewardTerm]) -> tuple[RewardTerm, ...]:
    """``arm``'s terms in the structure ``union``: the arm's own term of each name, a term
    it lacks at weight 0."""
    own = {t.name: t for t in arm.terms}
    return tuple(own.get(t.name, dataclasses.replace(t, weight=0.0)) for t in union)


def shared_config(config: Config, arms: tuple[Arm, ...], sets: dict) -> Config:
    """The base config rewritten to hold the union of every arm's terms."""
    union = checked_entries(union_terms(arms))
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
