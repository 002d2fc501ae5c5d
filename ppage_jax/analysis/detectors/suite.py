"""The detector suite: reward designs with ground truth, their runs read back, every detector
rerun on them with one settings file.

```yaml
suite:
  settings: settings.yaml              # the frozen detector settings (relative to this file)
  scenarios:                           # scenario -> its sweep file (arms = designs)
    reward_design: reward_design.yaml
  designs:
    reward_design/dense:
      label: farmable                  # or safe: by the design's algebra, before it ran
      control: reward_design/sparse    # the matched control its training is confirmed against
      role: predator                   # the role whose task the design threatens (default)
      why: closeness up to 0.5 a sub-step and no cost (stall margin +0.5)
```

Every design names a scenario's arm; an unknown key, a label other than ``farmable`` or
``safe``, a control that is not a design of the same scenario or a role other than
``predator`` or ``prey`` is a one-line :class:`~ppage_jax.config.ConfigError`.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.analysis.detectors.replay import (
    ANY,
    DETECTORS,
    Detection,
    WatchedRun,
    detect,
    read_sweep,
)
from ppage_jax.analysis.detectors.settings import DetectorSettings, load_settings
from ppage_jax.config import ConfigError
from ppage_jax.config.safe_yaml import load_yaml

LABELS = ("farmable", "safe")
ROLES = ("predator", "prey")
DESIGN_KEYS = ("label", "control", "role", "why")
# The audit's flags read from a sweep's audit.csv, one per design (before training).
AUDIT_CHECKS = ("stalling", "stall_margin", "shaping_share")
AUDIT_ANY = "audit"
COMBINED = "audit_or_monitor"
SUITE_DETECTORS = (*DETECTORS, *(f"audit/{c}" for c in AUDIT_CHECKS), AUDIT_ANY, COMBINED)


@dataclasses.dataclass(frozen=True)
class Design:
    """One reward design of the suite: ``scenario``'s arm ``arm``, its label by algebra."""

    scenario: str
    arm: str
    label: str
    why: str
    control: str | None = None
    role: str = "predator"

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.arm}"

    @property
    def farmable(self) -> bool:
        return self.label == "farmable"


@dataclasses.dataclass(frozen=True)
class Suite:
    """The suite file: its detector settings file, scenarios (sweep files) and designs."""

    source: str
    settings: Path
    scenarios: Mapping[str, Path]
    designs: tuple[Design, ...]

    def design(self, key: str) -> Design:
        return next(d for d in self.designs if d.key == key)


def _mapping(source: str, key: str, value: Any) -> dict:
    if not isinstance(value, dict) or not value:
        raise ConfigError(source, key, value, "must be a non-empty mapping")
    return value


def _design(source: str, key: str, raw: Any, scenarios: Mapping[str, Path]) -> Design:
    where = f"suite.designs.{key}"
    body = _mapping(source, where, raw)
    for name in body:
        if name not in DESIGN_KEYS:
            raise ConfigError(
                source, f"{where}.{name}", body[name], f"unknown key; allowed: {list(DESIGN_KEYS)}"
            )
    scenario, sep, arm = key.partition("/")
    if not sep or scenario not in scenarios or not arm:
        raise ConfigError(
            source, where, key, f"must be SCENARIO/ARM with SCENARIO one of {list(scenarios)}"
        )
    label = body.get("label")
    if label not in LABELS:
        raise ConfigError(source, f"{where}.label", label, f"must be one of {list(LABELS)}")
    role = body.get("role", "predator")
    if role not in ROLES:
        raise ConfigError(source, f"{where}.role", role, f"must be one of {list(ROLES)}")
    control = body.get("control")
    if control is not None and (not isinstance(control, str) or control == key):
        raise ConfigError(source, f"{where}.control", control, "must name another design")
    if control is not None and control.partition("/")[0] != scenario:
        raise ConfigError(
            source, f"{where}.control", control, f"must be a design of scenario {scenario!r}"
        )
    return Design(scenario, arm, label, str(body.get("why") or ""), control, role)


def load_suite(path: str | Path) -> Suite:
    """The suite file at ``path`` (see the module docstring)."""
    file = Path(path)
    source = str(file)
    if not file.is_file():
        raise ConfigError(source, "<path>", source, "must be an existing suite file")
    raw = load_yaml(file.read_bytes(), source)
    if not isinstance(raw, dict) or set(raw) != {"suite"}:
        raise ConfigError(source, "<top level>", raw, "holds exactly one key, 'suite'")
    body = _mapping(source, "suite", raw["suite"])
    for key in body:
        if key not in ("settings", "scenarios", "designs"):
            raise ConfigError(
                source,
                f"suite.{key}",
                body[key],
                "unknown key; allowed: settings, scenarios, designs",
            )
    settings = file.parent / str(body.get("settings") or "settings.yaml")
    scenarios = {
        str(name): file.parent / str(sweep)
        for name, sweep in _mapping(source, "suite.scenarios", body.get("scenarios")).items()
    }
    designs = tuple(
        _design(source, str(key), value, scenarios)
        for key, value in _mapping(source, "suite.designs", body.get("designs")).items()
    )
    keys = {d.key for d in designs}
    for design in designs:
        if design.control is not None and design.control not in keys:
            raise ConfigError(
                source, f"suite.designs.{design.key}.control", design.control, "names no design"
            )
    return Suite(source, settings, scenarios, designs)


def scenario_directories(suite: Suite, runs: str | Path | None = None) -> dict[str, Path]:
    """Where each scenario's sweep wrote its output: ``runs/<scenario>`` when ``runs`` is
    given, else the sweep file's ``output_dir``."""
    if runs is not None:
        return {name: Path(runs) / name for name in suite.scenarios}
    out = {}
    for name, sweep in suite.scenarios.items():
        body = load_yaml(sweep.read_bytes(), str(sweep)).get("sweep") or {}
        out[name] = Path(str(body.get("output_dir") or f"runs/{sweep.stem}"))
    return out


def audit_flags(directory: Path) -> dict[str, dict[str, bool]]:
    """Per arm, the audit's flags (:data:`AUDIT_CHECKS`) from ``directory/audit.csv``; a
    check with several rows (roles, terms) is flagged when any row is."""
    path = directory / "audit.csv"
    if not path.is_file():
        raise ConfigError(
            str(directory), "<audit>", str(path), "no audit.csv: the sweep needs audit: true"
        )
    flags: dict[str, dict[str, bool]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["check"] in AUDIT_CHECKS:
                arm = flags.setdefault(row["arm"], dict.fromkeys(AUDIT_CHECKS, False))
                arm[row["check"]] = arm[row["check"]] or row["flagged"] == "1"
    return flags


def task_levels(run: WatchedRun, role: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The run's updates, its task per update (capture rate, survival for prey; NaN where
    no episode finished) and each update's finished episodes (1 where not counted)."""
    updates = np.asarray([int(r.get("update", i + 1)) for i, r in enumerate(run.rows)])
    rates = np.asarray([float(r.get("capture_rate", math.nan)) for r in run.rows], np.float64)
    episodes = np.asarray([float(r.get("episodes", 1.0) or 0.0) for r in run.rows])
    rates = np.where(episodes > 0, rates, math.nan)
    return updates, rates if role == "predator" else 1.0 - rates, episodes


def onset_update(run: WatchedRun, role: str, window: int) -> int | None:
    """The update at which the task starts to fall: the last update of the best
    ``window``-update stretch of the task, weighted by the episodes that finished (its
    running peak); None when that peak is the run's last stretch (the task never fell)."""
    updates, task, episodes = task_levels(run, role)
    if len(task) < window:
        return None
    weights = np.where(np.isfinite(task), episodes, 0.0)
    sums = np.convolve(np.where(weights > 0, task, 0.0) * weights, np.ones(window), "valid")
    counts = np.convolve(weights, np.ones(window), "valid")
    means = np.where(counts > 0, sums / np.maximum(counts, 1e-12), -np.inf)
    best = int(np.argmax(means))
    if best == len(means) - 1:
        return None
    return int(updates[best + window - 1])


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One run (design x seed) and one detector: flagged or not, when, and the task's onset."""

    design: Design
    seed: int
    detector: str
    first_update: int | None
    onset: int | None

    @property
    def flagged(self) -> bool:
        return self.first_update is not None

    @property
    def delay(self) -> float:
        if self.first_update is None or self.onset is None:
            return math.nan
        return float(self.first_update - self.onset)


def _first_update(at: tuple[int, int] | None) -> int | None:
    return None if at is None else int(at[0])


def outcomes(
    detections: Sequence[Detection],
    designs: Mapping[str, Design],
    audits: Mapping[str, Mapping[str, bool]],
    onsets: Mapping[tuple[str, int], int | None],
) -> list[Outcome]:
    """Every detector's outcome on every run of a design (``detections``' arms are design
    keys; ``audits`` per design key; ``onsets`` per (design key, seed)). The audit, which
    runs before training, flags at update 0."""
    out = []
    for detection in detections:
        design = designs.get(detection.arm)
        if design is None:
            continue
        onset = onsets.get((design.key, detection.seed))
        audit = audits.get(design.key, {})
        firsts: dict[str, int | None] = {
            name: _first_update(detection.first.get(name)) for name in DETECTORS
        }
        for check in AUDIT_CHECKS:
            firsts[f"audit/{check}"] = 0 if audit.get(check) else None
        firsts[AUDIT_ANY] = 0 if any(audit.get(c) for c in AUDIT_CHECKS) else None
        firsts[COMBINED] = firsts[AUDIT_ANY] if firsts[AUDIT_ANY] is not None else firsts[ANY]
        for name in SUITE_DETECTORS:
            out.append(Outcome(design, detection.seed, name, firsts[name], onset))
    return out


@dataclasses.dataclass(frozen=True)
class SuiteRuns:
    """The suite's runs read back: per design key and seed, the run; per design, the audit."""

    runs: tuple[WatchedRun, ...]
    audits: Mapping[str, Mapping[str, bool]]
    results: Mapping[tuple[str, int], Mapping[str, float]]


def read_suite_runs(suite: Suite, directories: Mapping[str, Path]) -> SuiteRuns:
    """Every design's runs (curves), audit flags and held-out results, from the scenarios'
    sweep directories; a one-line error for a missing directory or design."""
    runs, audits, results = [], {}, {}
    for scenario, directory in directories.items():
        if not (directory / "sweep.json").is_file():
            raise ConfigError(
                suite.source,
                f"suite.scenarios.{scenario}",
                str(directory),
                f"holds no sweep: run `ppage-jax sweep {suite.scenarios[scenario]}` first "
                "(or name the sweeps' parent with --runs)",
            )
        for run in read_sweep(directory):
            runs.append(dataclasses.replace(run, arm=f"{scenario}/{run.arm}"))
        for arm, flags in audit_flags(directory).items():
            audits[f"{scenario}/{arm}"] = flags
        for (arm, seed), values in read_results(directory).items():
            results[(f"{scenario}/{arm}", seed)] = values
    found = {r.arm for r in runs}
    for design in suite.designs:
        if design.key not in found:
            raise ConfigError(
                suite.source, f"suite.designs.{design.key}", design.key, "has no runs in its sweep"
            )
    return SuiteRuns(tuple(runs), audits, results)


def read_results(directory: Path) -> dict[tuple[str, int], dict[str, float]]:
    """A sweep's results.csv: per (arm, seed), each held-out metric."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    with open(directory / "results.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            value = float(row["value"]) if row["value"] not in ("", "nan") else math.nan
            out.setdefault((row["arm"], int(row["seed"])), {})[row["metric"]] = value
    return out


def detect_suite(
    suite: Suite, read: SuiteRuns, settings: DetectorSettings | None = None
) -> list[Outcome]:
    """Every detector's outcome on every run of the suite, with ``settings`` (default: the
    suite's settings file)."""
    settings = load_settings(suite.settings) if settings is None else settings
    designs = {d.key: d for d in suite.designs}
    watched = [r for r in read.runs if r.arm in designs]
    detections = [detect(run, settings) for run in watched]
    onsets = {
        (r.arm, r.seed): onset_update(r, designs[r.arm].role, settings.monitor.window)
        for r in watched
    }
    return outcomes(detections, designs, read.audits, onsets)
