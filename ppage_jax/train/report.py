"""A run directory: resolved config and hash, metrics.csv, checkpoint, summary.json,
learning_curves.png, and the printed summary table."""
from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

import numpy as np

from ppage_jax.config import Config
from ppage_jax.train.common import ROLES, TrainConfig

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.csv"
CHECKPOINT_FILE = "checkpoint.msgpack"
SUMMARY_FILE = "summary.json"
CURVES_FILE = "learning_curves.png"
ARTIFACTS = (CONFIG_FILE, METRICS_FILE, CHECKPOINT_FILE, SUMMARY_FILE, CURVES_FILE)


def new_run_dir(config: Config, out: str | None = None) -> Path:
    """``out`` if given, else ``<output_dir>/<algorithm>-<config hash>-<timestamp>``."""
    if out is None:
        exp = config["experiment"]
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = str(Path(exp["output_dir"]) / f"{exp['algorithm']['name']}-{config.hash()}-{stamp}")
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_config(run_dir: Path, config: Config) -> None:
    """The resolved config (every section, defaults filled) as one YAML file, hash on top."""
    (run_dir / CONFIG_FILE).write_text(
        f"# resolved config of this run; config hash {config.hash()}\n"
        f"# reload with: ppage_jax.load_config('{CONFIG_FILE}')\n" + config.to_yaml())


def metric_rows(tc: TrainConfig, metrics: dict) -> list[dict]:
    """One dict per seed and update, flat columns (``return/<role>/<term>``, loss names)."""
    active = np.asarray(metrics["active"])
    num_seeds, num_updates = active.shape
    rows = []
    for s in range(num_seeds):
        for u in range(num_updates):
            row = {"seed": s, "update": u + 1,
                   "env_steps": (u + 1) * tc.env_steps_per_update,
                   "active": bool(active[s, u])}
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
    with open(run_dir / METRICS_FILE, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write_summary(run_dir: Path, summary: dict) -> None:
    """summary.json (NaN written as null)."""
    (run_dir / SUMMARY_FILE).write_text(json.dumps(_clean(summary), indent=2) + "\n")


def smoothed(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing NaN-aware moving average."""
    out = np.full(values.shape, np.nan)
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1): i + 1]
        chunk = chunk[np.isfinite(chunk)]
        if chunk.size:
            out[i] = chunk.mean()
    return out


def plot_learning_curves(run_dir: Path, tc: TrainConfig, metrics: dict,
                         baseline: dict | None = None) -> None:
    """learning_curves.png: capture rate, steps to capture, episode length and total return
    per role against env steps (mean over seeds, shaded min-max), random baseline dashed."""
    import warnings

    with warnings.catch_warnings():     # stretches with no finished episode are NaN gaps
        warnings.simplefilter("ignore", RuntimeWarning)
        _plot(run_dir, tc, metrics, baseline)


def _plot(run_dir: Path, tc: TrainConfig, metrics: dict, baseline: dict | None) -> None:
    from ppage_jax.viz import figures as plt   # off-screen figures; no global backend switch

    active = np.asarray(metrics["active"])
    num_updates = active.shape[1]
    steps = (np.arange(num_updates) + 1) * tc.env_steps_per_update
    window = max(1, num_updates // 50)
    panels = [("capture_rate", "capture rate (training)"),
              ("steps_to_capture", "steps to capture (training)"),
              ("episode_length", "episode length (training)")]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for ax, (key, title) in zip(axes, panels):
        values = np.where(active, np.asarray(metrics[key], float), np.nan)
        curves = np.stack([smoothed(v, window) for v in values])
        ax.plot(steps, np.nanmean(curves, 0), label=tc.algorithm)
        if curves.shape[0] > 1:
            ax.fill_between(steps, np.nanmin(curves, 0), np.nanmax(curves, 0), alpha=0.2)
        if baseline is not None and np.isfinite(baseline.get(key, np.nan)):
            ax.axhline(baseline[key], ls="--", color="gray", label="random predators (eval)")
        ax.set_title(title)
        ax.set_xlabel("env steps")
        ax.legend(fontsize=8)
    ax = axes[3]
    returns = np.asarray(metrics["returns"], float)          # [S, U, 2, T]
    for r, role in enumerate(ROLES):
        total = np.where(active, returns[:, :, r, :].sum(-1), np.nan)
        if np.isnan(total).all():
            continue
        ax.plot(steps, np.nanmean(np.stack([smoothed(v, window) for v in total]), 0),
                label=f"{role} total return")
    ax.set_title("mean return per agent (training)")
    ax.set_xlabel("env steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(run_dir / CURVES_FILE, dpi=90)
    plt.close(fig)


def _fmt(value: float, digits: int = 1, percent: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{100 * value:.{digits}f} %" if percent else f"{value:.{digits}f}"


TABLE_LEGEND = (
    "trained: both roles act greedily (argmax; a role that does not learn plays its baseline);"
    "\nsampled predators: predators sample from their stochastic policy (IPPO);"
    "\nrandom predators / random prey: that role acts uniformly at random against the other "
    "role's greedy policy.")


def summary_table(evaluation: dict, cap: int) -> str:
    """The printed table: each comparison's capture rate and steps, beside the others."""
    names = list(evaluation)
    from ppage_jax.train.evaluate import LABELS as labels
    header = f"{'held-out evaluation':<38}" + "".join(f"{labels.get(n, n):>18}" for n in names)
    lines = [header, "-" * len(header)]
    rows = [
        (f"capture rate within {cap} steps", "capture_rate", True),
        ("mean steps to capture (captured)", "steps_to_capture", False),
        ("mean episode length", "episode_length", False),
    ]
    for label, key, percent in rows:
        lines.append(f"{label:<38}" + "".join(
            f"{_fmt(evaluation[n][key], 1, percent):>18}" for n in names))
    return "\n".join(lines)
