"""A run directory: its files (resolved config and hash, metrics.csv, checkpoint,
summary.json, and the figures drawn from them), the writing of its data files, and the
printed evaluation and monitor tables."""

from __future__ import annotations

import csv
import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.artifacts import (
    CAPTURE_CURVES_FILE,
    CURVES_FILE,
    DirectoryLock,
    OutputError,
    atomic_open,
    clear_output,
    prepare_output_dir,
    remove_partial_files,
    write_text,
)
from ppage_jax.config import Config
from ppage_jax.defaults import ROLES
from ppage_jax.episodes.summary import comparison_groups
from ppage_jax.stats.survival import number_text, turns_text
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.run.monitor import CHECKS, PREFIX

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.csv"
CHECKPOINT_FILE = "checkpoint.msgpack"
SUMMARY_FILE = "summary.json"
ARTIFACTS = (
    CONFIG_FILE,
    METRICS_FILE,
    CHECKPOINT_FILE,
    SUMMARY_FILE,
    CURVES_FILE,
    CAPTURE_CURVES_FILE,
)
TRAINING_CHECKPOINTS = "checkpoints"
# What makes a directory a run's: refused as --out unless --resume or --overwrite.
RUN_FILES = (*ARTIFACTS, "episode.gif", "episode.html", TRAINING_CHECKPOINTS)


def new_run_dir(config: Config, out: str | None = None) -> Path:
    """``out`` if given, else ``<output_dir>/<algorithm>-<config hash>-<timestamp>``, created
    here and never one that exists: two runs started in the same second get ``...-2``."""
    if out is None:
        exp = config["experiment"]
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = Path(exp["output_dir"]) / f"{exp['algorithm']['name']}-{config.hash()}-{stamp}"
        prepare_output_dir(base.parent, "output directory")
        for n in range(1, 10_000):
            candidate = base if n == 1 else base.with_name(f"{base.name}-{n}")
            try:
                candidate.mkdir()  # atomic: exactly one process creates each name
            except FileExistsError:
                continue
            except OSError as err:
                raise OutputError(
                    f"cannot create run directory {candidate}: {err.strerror or err}"
                ) from None
            out = str(candidate)
            break
        else:
            raise OutputError(f"no free run directory name beside {base}")
    return prepare_output_dir(out, "run directory")


def run_files(run_dir: Path) -> list[str]:
    """The run artifacts (and training checkpoints) present in ``run_dir`` (a link at one's
    name too, even a dangling one)."""
    return [name for name in RUN_FILES if os.path.lexists(Path(run_dir) / name)]


def prepare_run_dir(
    config: Config, out: str | None = None, overwrite: bool = False
) -> tuple[Path, DirectoryLock]:
    """A writable run directory for a new run (:func:`new_run_dir`) and the lock this
    process now holds on it (another writer is refused, naming its PID). One that already
    holds a run is refused (:class:`~ppage_jax.artifacts.OutputError`) unless ``overwrite``,
    which deletes that run's artifacts and checkpoints (and nothing else) first."""
    path = new_run_dir(config, out)
    lock = DirectoryLock(path, "run directory").acquire()
    try:
        clear_output(
            path, run_files(path), "run", overwrite, f"--resume {path}", "choose another --out"
        )
        remove_partial_files(path)
    except BaseException:
        lock.release()
        raise
    return path, lock


def write_config(run_dir: Path, config: Config) -> None:
    """The resolved config (every section, defaults filled) as one YAML file, hash on top."""
    write_text(
        run_dir / CONFIG_FILE,
        f"# resolved config of this run; config hash {config.hash()}\n"
        f"# reload with: ppage_jax.load_config('{CONFIG_FILE}')\n" + config.to_yaml(),
    )


def metric_rows(tc: TrainConfig, metrics: dict) -> list[dict]:
    """One dict per seed and update, flat columns (``return/<role>/<term>``, loss names)."""
    active = np.asarray(metrics["active"])
    num_seeds, num_updates = active.shape
    rows = []
    for s in range(num_seeds):
        for u in range(num_updates):
            row = {
                "seed": s,
                "update": u + 1,
                "env_steps": (u + 1) * tc.env_steps_per_update,
                "active": bool(active[s, u]),
            }
            for key in ("episodes", "capture_rate", "episode_length", "steps_to_capture"):
                row[key] = np.asarray(metrics[key])[s, u].item()
            returns = np.asarray(metrics["returns"])[s, u]
            for r, role in enumerate(ROLES):
                if len(tc.agents_of(role)):
                    for t, term in enumerate(tc.env.reward_terms):
                        row[f"return/{role}/{term}"] = float(returns[r, t])
            for name, values in sorted(metrics["losses"].items()):
                row[f"loss/{name}"] = float(np.asarray(values)[s, u])
            for name, values in sorted(metrics.get("extras", {}).items()):
                row[name] = float(np.asarray(values)[s, u])
            rows.append(row)
    return rows


def last_active_rows(rows: list[dict]) -> list[dict]:
    """Each seed's last metrics row that ran (for summary.json)."""
    last: dict[int, dict] = {}
    for row in rows:
        if row["active"]:
            last[row["seed"]] = row
    return [last[s] for s in sorted(last)]


def write_metrics(run_dir: Path, rows: list[dict]) -> None:
    fields = list(rows[0]) if rows else []
    with atomic_open(run_dir / METRICS_FILE, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def json_safe(value):
    """``value`` (nested dicts and lists) with non-finite floats as None (null in JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def write_summary(run_dir: Path, summary: dict) -> None:
    """summary.json (NaN written as null)."""
    write_text(run_dir / SUMMARY_FILE, json.dumps(json_safe(summary), indent=2) + "\n")


# ------------------------------------------------------------------ evaluation tables


def _ci(bounds, fmt) -> str:
    if not bounds:
        return ""
    return f"[{fmt(bounds[0])}, {fmt(bounds[1])}]"


def _table(title: str, legend: list[str], rows: dict[str, dict], cap: int) -> list[str]:
    metrics = [
        (f"RMST: mean turns to capture, <= {cap}", lambda r: number_text(r["rmst"])),
        ("  95 % bootstrap CI", lambda r: _ci(r.get("rmst_ci"), number_text)),
        ("KM median turns to capture", lambda r: turns_text(r["km_median"], cap)),
        ("  95 % bootstrap CI", lambda r: _ci(r.get("km_median_ci"), lambda v: turns_text(v, cap))),
        (f"capture rate within {cap} turns", lambda r: f"{100 * r['capture_rate']:.1f} %"),
        ("hit the step limit uncaptured", lambda r: f"{100 * r['truncated_share']:.1f} %"),
    ]
    cells = {name: [fmt(row) for _, fmt in metrics] for name, row in rows.items()}
    width = max(
        12, *(len(c) + 2 for column in cells.values() for c in column), *(len(n) + 2 for n in rows)
    )
    label = max(len(m) for m, _ in metrics) + 2
    header = "metric".ljust(label) + "".join(n.rjust(width) for n in rows)
    lines = [title, *legend, header, "-" * len(header)]
    for i, (name, _) in enumerate(metrics):
        lines.append(name.ljust(label) + "".join(cells[n][i].rjust(width) for n in rows))
    return lines


def summary_table(evaluation: dict, cap: int) -> str:
    """The printed evaluation: the trained predators beside random and greedy-chase
    predators against the same prey, then the trained prey beside random and greedy-evade
    prey against the same predators, then any other rows. Each table's heading names every
    column's predators and prey; the first metric is the censored RMST, then the KM median
    (95 % bootstrap CIs), the capture rate and the share of episodes that hit the limit."""

    def legend(names):
        return [
            f"  {n:<15}= {evaluation[n].get('predators', '?')} predators vs "
            f"{evaluation[n].get('prey', '?')} prey"
            for n in names
        ]

    def episodes(names):
        return evaluation[names[0]].get("episodes", "?")

    blocks = []
    shown: set[str] = set()
    better = {
        "predators": "lower time to capture is better for predators",
        "prey": "higher time to capture is better for prey",
    }
    for role, names, opponent in comparison_groups(evaluation):
        other = "prey" if role == "predators" else "predators"
        shown.update(names)
        blocks.append(
            _table(
                f"{role.upper()}, each column against the same {other} ({opponent}); "
                f"{better[role]}; {episodes(names)} episodes per column",
                legend(names),
                {n: evaluation[n] for n in names},
                cap,
            )
        )
    rest = [n for n in evaluation if n not in shown]
    if rest:
        blocks.append(
            _table(
                f"{'other rows' if shown else 'held-out evaluation'}; "
                f"{episodes(rest)} episodes per column",
                legend(rest),
                {n: evaluation[n] for n in rest},
                cap,
            )
        )
    return "\n\n".join("\n".join(b) for b in blocks)


NOT_CHECKED = "not checked (run shorter than one window)"


def monitor_table(summary: Mapping[str, Any], num_seeds: int) -> str:
    """The end-of-run table: each check, its status and the first flag's detail."""
    cfg = summary["config"]
    lines = [
        f"REWARD-HACKING MONITOR: trends over the last {cfg['window']} updates (Kendall "
        f"p < {cfg['alpha']:g}, change >= {cfg['min_change']:g}, held {cfg['patience']} "
        f"updates)"
    ]
    if not cfg["enabled"]:
        return lines[0] + "\n  disabled (experiment.monitor.enabled: false)"
    if not summary["checks"]:
        return lines[0] + "\n  nothing to watch: no learning role is paid a shaping term"
    # A run whose blocks never fill one window (too short, or too few episodes per block)
    # was never checked: say so rather than "ok".
    unchecked = summary.get("windows_checked", 1) == 0
    by_column: dict[str, list[dict]] = {}
    for flag in summary["flags"]:
        by_column.setdefault(flag["column"], []).append(flag)
    rows = []
    for name in summary["checks"]:
        check, role, *term = name[len(PREFIX) :].split("/")
        label = CHECKS[check].format(threshold=cfg["share_threshold"])
        if term:
            label = label.replace("shaping term", term[0])
        flags = by_column.get(name, [])
        status = f"FLAGGED ({len(flags)}/{num_seeds} seeds)" if flags else "ok"
        if unchecked:
            status = NOT_CHECKED
        first = min((f["env_steps"] for f in flags), default=None)
        rows.append((label, role, status, "" if first is None else f"{first:,}"))
    widths = [
        max(len(r[i]) for r in rows + [("check", "role", "status", "first flag at")])
        for i in range(4)
    ]
    header = ("check", "role", "status", "first flag at")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    lines.append("-" * len(lines[-1]))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for flag in summary["flags"]:
        lines.append(
            f"  seed {flag['seed']} {flag['role']}: {flag['detail']} "
            f"(update {flag['update']}, {flag['env_steps']:,} env steps)"
        )
    return "\n".join(lines)
