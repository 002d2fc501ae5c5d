"""The detectors rerun on saved curves, without training: a run directory's metrics.csv or a
sweep directory's curves.csv, each run watched as it was (its roles, shaping terms, warm-up
and untrained start, from summary.json or sweep.json) with the settings given.

Each run gets, per detector, the update and env step of its first flag (None when none):
the monitor's checks (``monitor/<check>``: ``hacking``, ``episode_length``, ``share``,
``drift``, ``below_start``, and ``monitor`` for any of them) and the two naive baselines of
:mod:`.naive`. A check is flagged for a run when any of its columns (roles, terms) is.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ppage_jax.analysis.batch.monitoring import curve_to_rows
from ppage_jax.analysis.detectors.naive import NAIVE_CHECKS, naive_flags
from ppage_jax.analysis.detectors.settings import DetectorSettings, load_settings
from ppage_jax.analysis.sweep.writer import curves_path
from ppage_jax.config import ConfigError
from ppage_jax.train.run.monitor import CHECKS, PREFIX, Monitor

MONITOR_CHECKS = tuple(CHECKS)
ANY = "monitor"
DETECTORS = (*(f"monitor/{c}" for c in MONITOR_CHECKS), ANY, *NAIVE_CHECKS)


@dataclasses.dataclass(frozen=True)
class WatchedRun:
    """One run's curve and how its monitor watched it."""

    arm: str
    seed: int
    rows: tuple[dict, ...]
    watch: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Detection:
    """A run's first flag per detector: ``{detector: (update, env_steps)}``, and each
    monitor column's (``columns``)."""

    arm: str
    seed: int
    first: Mapping[str, tuple[int, int] | None]
    columns: Mapping[str, tuple[int, int] | None]

    def flagged(self, detector: str) -> bool:
        return self.first.get(detector) is not None


def _number(text: str) -> Any:
    try:
        return float(text) if text not in ("", "nan") else math.nan
    except ValueError:
        return text


def _watch_from_sweep(monitor: Mapping[str, Any], terms: Sequence[str], arm: str) -> dict | None:
    """What rebuilds an arm's monitor: sweep.json's ``monitor.arms`` entry, or for a sweep
    written before it was kept, the watched columns, warm-up and untrained levels (whose
    shares stand in for the untrained returns; its other task levels start at the first
    window's)."""
    described = (monitor.get("arms") or {}).get(arm)
    if described is not None:
        return dict(described)
    watched = (monitor.get("watched") or {}).get(arm) or []
    if not watched:
        return None
    shaping: dict[str, list[str]] = {}
    for name in watched:
        check, role, *term = name[len(PREFIX) :].split("/")
        shaping.setdefault(role, [])
        if check == "share" and term:
            shaping[role].append(term[0])
    levels = (monitor.get("untrained") or {}).get(arm)
    baseline = None
    if levels:
        baseline = {k: levels[k] for k in ("capture_rate", "episode_length") if k in levels}
        for role, shaped in shaping.items():
            shares = [float(levels.get(f"share/{role}/{t}") or 0.0) for t in shaped]
            for term, share in zip(shaped, shares, strict=True):
                baseline[f"return/{role}/{term}"] = share
            baseline[f"return/{role}/base"] = max(1.0 - sum(shares), 0.0)
    return {
        "terms": list(terms),
        "shaping": shaping,
        "warmup": int(monitor.get("warmup_updates") or 0),
        "baseline": baseline,
    }


def read_sweep(directory: Path) -> list[WatchedRun]:
    """Every run of a sweep directory (sweep.json and curves.csv[.gz]); of a sweep over
    scenarios, every scenario's, its arms named ``<scenario>/<arm>``."""
    from ppage_jax.analysis.batch.output import float_value

    described = json.loads((directory / "sweep.json").read_text())
    if "scenarios" in described:  # a sweep over scenarios: each in its own subdirectory
        runs = []
        for name in described["scenarios"]:
            for run in read_sweep(directory / name):
                runs.append(dataclasses.replace(run, arm=f"{name}/{run.arm}"))
        return runs
    monitor = described.get("monitor") or {}
    curves: dict[tuple[str, int], list[tuple[int, int, str, float]]] = {}
    path = curves_path(directory)
    if not path.exists():
        raise ConfigError(str(directory), "<curves>", str(path), "no curves.csv in the sweep")
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as fh:
        for row in csv.DictReader(fh):
            key = (row["arm"], int(row["seed"]))
            curves.setdefault(key, []).append(
                (
                    int(row["update"]),
                    int(row["env_steps"]),
                    row["metric"],
                    float_value(row["value"]),
                )
            )
    runs = []
    for (arm, seed), curve in sorted(curves.items()):
        watch = _watch_from_sweep(monitor, described.get("terms") or [], arm)
        runs.append(WatchedRun(arm, seed, tuple(curve_to_rows(seed, curve)), watch or {}))
    return runs


def read_run(directory: Path) -> list[WatchedRun]:
    """Every seed of a run directory (summary.json and metrics.csv)."""
    summary = json.loads((directory / "summary.json").read_text())
    watch = dict((summary.get("monitor") or {}).get("watch") or {})
    path = directory / "metrics.csv"
    if not path.exists():
        raise ConfigError(str(directory), "<curves>", str(path), "no metrics.csv in the run")
    per_seed: dict[int, list[dict]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            values = {k: _number(v) for k, v in row.items() if not k.startswith(PREFIX)}
            seed = int(values.get("seed", 0) or 0)
            per_seed.setdefault(seed, []).append(values)
    arm = str(summary.get("name") or directory.name)
    return [WatchedRun(arm, s, tuple(rows), watch) for s, rows in sorted(per_seed.items())]


def read_directory(directory: str | Path) -> list[WatchedRun]:
    """The runs of a run or sweep directory; a one-line error for anything else."""
    path = Path(directory)
    if (path / "sweep.json").is_file():
        return read_sweep(path)
    if (path / "summary.json").is_file():
        return read_run(path)
    raise ConfigError(
        str(path),
        "<directory>",
        str(path),
        "holds no saved curves: expected a run directory (summary.json, metrics.csv) or a "
        "sweep directory (sweep.json, curves.csv)",
    )


def detect(run: WatchedRun, settings: DetectorSettings) -> Detection:
    """Every detector's first flag on ``run``."""
    columns: dict[str, tuple[int, int] | None] = {}
    first: dict[str, tuple[int, int] | None] = dict.fromkeys(DETECTORS)
    watch = run.watch
    if watch and watch.get("shaping"):
        monitor = Monitor.from_description(settings.monitor, watch)
        rows = [dict(r) for r in run.rows]
        monitor.observe(rows)
        columns = dict.fromkeys(monitor.columns)
        for flag in monitor.flags:
            columns[flag.column] = (flag.update, flag.env_steps)
            detector = f"monitor/{flag.check}"
            first[detector] = _earliest(first[detector], (flag.update, flag.env_steps))
            first[ANY] = _earliest(first[ANY], (flag.update, flag.env_steps))
        blocks = monitor.history
        roles = tuple(watch["shaping"])
    else:
        blocks = {run.seed: _pooled(run.rows, settings, watch)}
        roles = _roles(run.rows)
    terms = tuple(watch.get("terms") or _terms(run.rows))
    for check, at in naive_flags(blocks.get(run.seed, []), roles, terms, settings.naive).items():
        first[check] = at
    return Detection(run.arm, run.seed, first, columns)


def _earliest(a: tuple[int, int] | None, b: tuple[int, int]) -> tuple[int, int]:
    return b if a is None or b[0] < a[0] else a


def _pooled(rows: Sequence[dict], settings: DetectorSettings, watch: Mapping) -> list[dict]:
    """The blocks the monitor would pool ``rows`` into (for a run with nothing to watch)."""
    monitor = Monitor(settings.monitor, (), (), {}, int(watch.get("warmup", 0) or 0))
    blocks = []
    for row in rows:
        if not row.get("active", True) or int(row.get("update", 1)) <= monitor.warmup:
            continue
        block = monitor.pool(int(row.get("seed", 0)), dict(row))
        if block is not None:
            blocks.append(block)
    return blocks


def _roles(rows: Sequence[Mapping]) -> tuple[str, ...]:
    found = {k.split("/")[1] for r in rows[:1] for k in r if k.startswith("return/")}
    return tuple(r for r in ("predator", "prey") if r in found)


def _terms(rows: Sequence[Mapping]) -> tuple[str, ...]:
    names = {k.split("/", 2)[2] for r in rows[:1] for k in r if k.startswith("return/")}
    return tuple(sorted(n for n in names if n != "total"))


def monitor_curves(
    curves: str | Path | Iterable[Mapping[str, Any]],
    settings: DetectorSettings | str | Path | None = None,
    watch: Mapping[str, Any] | None = None,
) -> list[Detection]:
    """Rerun the detectors on saved curves: a run or sweep directory, or metrics rows (dicts
    with ``seed``, ``update``, ``env_steps``, ``episodes``, ``capture_rate``,
    ``episode_length``, ``return/<role>/<term>``, ...) watched as ``watch`` says
    (:meth:`Monitor.describe`; without it the naive baselines only). ``settings``: a
    :class:`DetectorSettings`, a settings file, or None for the defaults."""
    if not isinstance(settings, DetectorSettings):
        settings = load_settings(settings)
    if isinstance(curves, (str, Path)):
        runs = read_directory(curves)
    else:
        per_seed: dict[int, list[dict]] = {}
        for row in curves:
            per_seed.setdefault(int(row.get("seed", 0)), []).append(dict(row))
        runs = [WatchedRun("run", s, tuple(r), dict(watch or {})) for s, r in per_seed.items()]
    return [detect(run, settings) for run in runs]


def detection_rows(detections: Sequence[Detection]) -> list[dict[str, Any]]:
    """monitor.csv's rows: ``arm, seed, detector, flagged, first_update, first_env_steps``
    per run and detector, then one per monitor column."""
    rows = []
    for d in detections:
        for name, at in [*d.first.items(), *d.columns.items()]:
            rows.append(
                {
                    "arm": d.arm,
                    "seed": d.seed,
                    "detector": name,
                    "flagged": int(at is not None),
                    "first_update": "" if at is None else at[0],
                    "first_env_steps": "" if at is None else at[1],
                }
            )
    return rows


def recorded_agreement(directory: str | Path, detections: Sequence[Detection]) -> tuple[int, int]:
    """How many of the flags a sweep recorded while training (results.csv's ``monitor/...``
    rows, per arm, seed and column) the replay reproduces: ``(agreeing, recorded)``; (0, 0)
    for a directory without results.csv. Of a sweep over scenarios, every scenario's."""
    path = Path(directory)
    described = path / "sweep.json"
    if described.is_file() and "scenarios" in json.loads(described.read_text()):
        totals = [0, 0]
        for name in json.loads(described.read_text())["scenarios"]:
            prefix = f"{name}/"
            mine = [
                dataclasses.replace(d, arm=d.arm[len(prefix) :])
                for d in detections
                if d.arm.startswith(prefix)
            ]
            agree, recorded = recorded_agreement(path / name, mine)
            totals[0] += agree
            totals[1] += recorded
        return totals[0], totals[1]
    results = path / "results.csv"
    if not results.is_file():
        return 0, 0
    by_run = {(d.arm, d.seed): d for d in detections}
    agree = recorded = 0
    with open(results, newline="") as fh:
        for row in csv.DictReader(fh):
            column = row["metric"]
            if not column.startswith(PREFIX) or row["value"] in ("", "nan"):
                continue
            found = by_run.get((row["arm"], int(row["seed"])))
            if found is None or column not in found.columns:
                continue
            recorded += 1
            agree += int((float(row["value"]) > 0) == (found.columns[column] is not None))
    return agree, recorded
