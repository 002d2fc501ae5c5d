"""A run's figures, drawn from the data the run saved: ``learning_curves.png`` from its
metrics rows (``metrics.csv``, read back with :func:`read_metrics`) and ``capture_curves.png``
from its held-out evaluation (per-episode lengths and captures, and the rows of
summary.json's ``evaluation``).

Metrics rows are dicts with ``seed``, ``update``, ``env_steps``, ``active``,
``capture_rate``, ``steps_to_capture``, ``episode_length`` and ``return/<role>/<term>``
(one row per seed and update). Evaluation rows are named as in ``ppage-jax run``'s tables
(``trained``, ``random``, ``chase``, ``prey_random``, ...) and hold ``predators``, ``prey``,
``km_median`` and ``rmst``.
"""

from __future__ import annotations

import csv
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.artifacts import CAPTURE_CURVES_FILE, CURVES_FILE, save_figure
from ppage_jax.defaults import ROLES
from ppage_jax.episodes.summary import comparison_groups
from ppage_jax.stats.survival import capture_curve, number_text, turns_text


def _value(text: str) -> Any:
    """A metrics.csv cell as written from Python: bool, int, float (``nan`` too) or text."""
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """The rows of a run's metrics.csv, with numbers and flags parsed."""
    with open(path, newline="") as handle:
        return [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(handle)]


def smoothed(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing NaN-aware moving average."""
    out = np.full(values.shape, np.nan)
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        chunk = chunk[np.isfinite(chunk)]
        if chunk.size:
            out[i] = chunk.mean()
    return out


def _by_seed(rows: Sequence[Mapping]) -> list[list[Mapping]]:
    """Each seed's rows in update order (seeds in order)."""
    seeds: dict[int, list[Mapping]] = {}
    for row in rows:
        seeds.setdefault(int(row["seed"]), []).append(row)
    return [sorted(seeds[s], key=lambda r: int(r["update"])) for s in sorted(seeds)]


def _finite(value: Any) -> bool:
    return value is not None and bool(np.isfinite(value))


def plot_learning_curves(
    run_dir: str | os.PathLike,
    rows: Sequence[Mapping],
    label: str,
    baseline: Mapping | None = None,
) -> Path:
    """``run_dir/learning_curves.png``: capture rate, steps to capture, episode length and
    total return per role against env steps (mean over seeds of a trailing moving average,
    shaded min-max), from the metrics rows; ``label`` names the trained curves and
    ``baseline`` (the ``random`` evaluation row) is drawn dashed. Returns the path."""
    with warnings.catch_warnings():  # stretches with no finished episode are NaN gaps
        warnings.simplefilter("ignore", RuntimeWarning)
        return _draw_learning_curves(Path(run_dir) / CURVES_FILE, rows, label, baseline)


def _draw_learning_curves(
    path: Path, rows: Sequence[Mapping], label: str, baseline: Mapping | None
) -> Path:
    from ppage_jax.viz import figures as plt  # off-screen figures; no global backend switch

    seeds = _by_seed(rows)
    if not seeds:
        raise ValueError("no metrics rows to draw learning curves from")
    steps = np.asarray([row["env_steps"] for row in seeds[0]], float)
    active = np.asarray([[bool(row["active"]) for row in seed] for seed in seeds])

    def series(columns: Sequence[str]) -> np.ndarray:
        """float[seeds, updates]: the sum of ``columns``, NaN where the update did not run."""
        values = np.asarray(
            [[sum(float(row[c]) for c in columns) for row in seed] for seed in seeds]
        )
        return np.where(active, values, np.nan)

    window = max(1, len(steps) // 50)
    panels = [
        ("capture_rate", "capture rate (training)"),
        ("steps_to_capture", "steps to capture (training, captured only)"),
        ("episode_length", "episode length (training, finished only)"),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for ax, (key, title) in zip(axes[:3], panels, strict=True):
        curves = np.stack([smoothed(v, window) for v in series([key])])
        ax.plot(steps, np.nanmean(curves, 0), label=label)
        if curves.shape[0] > 1:
            ax.fill_between(steps, np.nanmin(curves, 0), np.nanmax(curves, 0), alpha=0.2)
        if baseline is not None and _finite(baseline.get(key)):
            ax.axhline(baseline[key], ls="--", color="gray", label="random predators (eval)")
        ax.set_title(title)
        ax.set_xlabel("env steps")
        ax.legend(fontsize=8)
    ax = axes[3]
    for role in ROLES:
        columns = [c for c in seeds[0][0] if c.startswith(f"return/{role}/")]
        total = series(columns)
        if not columns or np.isnan(total).all():
            continue
        ax.plot(
            steps,
            np.nanmean(np.stack([smoothed(v, window) for v in total]), 0),
            label=f"{role} total return",
        )
    ax.set_title("mean return per agent (training)")
    ax.set_xlabel("env steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=90)
    plt.close(fig)
    return path


def plot_capture_curves(
    path: str | os.PathLike,
    played: Mapping[str, Mapping],
    evaluation: Mapping[str, Mapping],
    horizon: int,
) -> Path:
    """capture_curves.png (``path``, or that name inside the directory ``path``): the
    Kaplan-Meier fraction captured by turn t of each evaluated row, predators beside random
    and greedy-chase predators (same prey), and, when the prey learn, the trained prey
    beside random and greedy-evade prey (same predators).

    ``played`` holds each row's per-episode ``episode_length`` and ``captured`` (any shape),
    ``evaluation`` each row's summary; ``horizon`` is the step limit."""
    from ppage_jax.viz import figures as plt  # off-screen figures; no global backend switch

    path = Path(path)
    if path.is_dir():
        path = path / CAPTURE_CURVES_FILE
    panels = [
        (
            f"{role} vs the same {'prey' if role == 'predators' else 'predators'} ({opponent})",
            [n for n in names if n in played],
        )
        for role, names, opponent in comparison_groups(evaluation)
    ]
    rest = [n for n in played if all(n not in names for _, names in panels)]
    if rest:
        panels.append(("other rows" if panels else "held-out evaluation", rest))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5.2), squeeze=False)
    turns = np.arange(horizon + 1)
    styles = ("-", "--", ":", "-.")  # overlapping curves stay visible
    for ax, (title, names) in zip(axes[0], panels, strict=True):
        for i, name in enumerate(names):
            ep = played[name]
            curve = capture_curve(ep["episode_length"], ep["captured"], horizon)
            row = evaluation[name]
            ax.step(
                turns,
                curve,
                where="post",
                ls=styles[i % len(styles)],
                lw=2.2 - 0.4 * i,
                label=f"{name}: {row.get('predators', '?')} vs {row.get('prey', '?')} "
                f"(median {turns_text(row['km_median'], horizon)}, "
                f"RMST {number_text(row['rmst'])})",
            )
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlim(0, horizon)
        ax.set_xlabel("turn t")
        ax.set_ylabel("fraction captured by turn t (Kaplan-Meier)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.tight_layout()
    save_figure(fig, path, dpi=90)
    plt.close(fig)
    return path
