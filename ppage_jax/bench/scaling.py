"""How the step cost grows: env-steps/s and bytes per environment against grid size, agent
count and batch size, per observation builder, plus PPAGE's showcase settings
(``ppage-jax bench --scaling``).

Every point is the default config with a few overrides (size, agent counts, builder),
random actions, no resets unless the row says ``auto-reset``, timed by
:func:`~ppage_jax.bench.throughput.prepare_env`. Large settings run smaller batches: the
batch is cut (to a power of two) so that the batch's states and observations stay within
``memory_budget`` bytes; the table says which batch ran.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax

from ppage_jax.bench.throughput import (
    AUTO_RESET,
    NO_RESET,
    Result,
    Timed,
    interleaved,
    prepare_env,
    state_bytes,
)
from ppage_jax.config import load_config
from ppage_jax.env import GridWorld, make
from ppage_jax.observations import observation_builders

SIZES = (10, 20, 50, 100, 200, 500, 1000)
AGENTS = (2, 4, 8, 16, 32, 64, 128, 256)
BATCHES = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
# Each builder at PPAGE's shipped radius; the others take their defaults.
BUILDER_PARAMS: dict[str, dict[str, Any]] = {"grid": {"radius": 3}, "local_radius": {"radius": 3}}
# PPAGE's showcases: 3 predators and 10 prey on 50x50; 5 predators against 20 prey on 100x100.
SHOWCASES = {"showcase 3v10 50x50": (50, 3, 10), "showcase 5v20 100x100": (100, 5, 20)}
AGENT_AXIS_SIZE = 50  # the grid of the agent-count sweep (room for 256 agents)
MEMORY_BUDGET = 256 << 20  # bytes of states + observations per batch


@dataclasses.dataclass(frozen=True)
class Point:
    """One setting: the default config at ``size`` with ``n_predators`` v ``n_prey`` and
    ``builder`` (at :data:`BUILDER_PARAMS`), ``batch`` grids (before the memory cut)."""

    axis: str
    builder: str
    size: int
    n_predators: int
    n_prey: int
    batch: int
    resets: bool = False
    label: str = ""

    def overrides(self) -> dict[str, Any]:
        return {
            "env.size": self.size,
            "agents.predators.count": self.n_predators,
            "agents.preys.count": self.n_prey,
            "observations.type": self.builder,
            "observations.params": dict(BUILDER_PARAMS.get(self.builder, {})),
            "observations.per_agent": None,
        }


def _split(n_agents: int) -> tuple[int, int]:
    """n agents as predators v prey, half each (the odd one a prey)."""
    return max(1, n_agents // 2), max(1, n_agents - n_agents // 2)


def sweep_points(
    builders: Sequence[str] | None = None,
    sizes: Iterable[int] = SIZES,
    agents: Iterable[int] = AGENTS,
    batches: Iterable[int] = BATCHES,
    batch: int = 256,
    showcases: bool = True,
    reset_builders: Sequence[str] = ("grid",),
) -> list[Point]:
    """The settings of a scaling run: per builder, grid sizes (3v3; for ``reset_builders``
    also with the batched auto-reset, right after), agent counts (on 50x50, at most half the
    cells), batch sizes (3v3, 10x10) and the showcases; no resets unless the point says so."""
    builders = list(observation_builders() if builders is None else builders)
    points = []
    for b in builders:
        points += [Point("grid size", b, s, 3, 3, batch) for s in sizes]
        if b in reset_builders:
            points += [Point("grid size", b, s, 3, 3, batch, resets=True) for s in sizes]
        points += [
            Point("agents", b, AGENT_AXIS_SIZE, *_split(n), batch)
            for n in agents
            if n <= AGENT_AXIS_SIZE**2 // 2
        ]
        points += [Point("batch", b, 10, 3, 3, n) for n in batches]
        if showcases:
            points += [
                Point("showcase", b, s, p, q, batch, label=name)
                for name, (s, p, q) in SHOWCASES.items()
            ]
    return points


def env_bytes(env: GridWorld) -> dict[str, int]:
    """Bytes one environment holds in a batch: its State and its observation."""
    obs = env.num_agents * env.observation_size * 4
    return {"state_bytes": state_bytes(env), "obs_bytes": obs}


def fit_batch(batch: int, bytes_per_env: int, budget: int = MEMORY_BUDGET) -> int:
    """``batch``, or the largest power of two whose environments fit in ``budget`` bytes."""
    if batch * bytes_per_env <= budget:
        return batch
    return max(1, min(batch, 2 ** int(math.log2(max(1, budget // bytes_per_env)))))


def prepare_point(
    point: Point,
    *,
    config: str | None = "default",
    seconds: float = 0.2,
    budget: int = MEMORY_BUDGET,
) -> tuple[Timed, dict[str, Any]]:
    """Compile one setting's rollout (steps calibrated to ``seconds`` per run); returns the
    timer and the row's fixed fields (the point's, the batch that runs, bytes per env)."""
    env = make(load_config(config, point.overrides()))
    sizes = env_bytes(env)
    batch = fit_batch(point.batch, sizes["state_bytes"] + sizes["obs_bytes"], budget)
    timer = prepare_env(env, batch, None, resets=point.resets, name=point.builder, seconds=seconds)
    return timer, {
        **dataclasses.asdict(point),
        "batch_requested": point.batch,
        "batch": batch,
        "mode": AUTO_RESET if point.resets else NO_RESET,
        "num_agents": env.num_agents,
        "num_obstacles": env.layout.num_obstacles,
        "observation_size": env.observation_size,
        **sizes,
        "bytes_per_env": sizes["state_bytes"] + sizes["obs_bytes"],
    }


def _row(fixed: Mapping[str, Any], result: Result) -> dict[str, Any]:
    return {
        **fixed,
        "steps": result.steps,
        "seconds": result.seconds,
        "compile_s": result.compile_s,
        "env_steps_per_s": result.env_steps_per_s,
        "agent_steps_per_s": result.agent_steps_per_s,
    }


def run_scaling(
    points: Sequence[Point],
    *,
    config: str | None = "default",
    seconds: float = 0.2,
    repeats: int = 3,
    budget: int = MEMORY_BUDGET,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Measure every point, logging one line each. The points of one panel line of the plot
    (same axis and builder, consecutive in ``points``; with and without auto-reset together)
    are compiled together and timed in turns, ``repeats`` rounds, so that a shared machine's
    drifting load bends neither the line nor the auto-reset / no-reset ratio; the best run
    of each counts."""
    rows = []
    for _, group in itertools.groupby(points, key=lambda p: (p.axis, p.builder)):
        prepared = [prepare_point(p, config=config, seconds=seconds, budget=budget) for p in group]
        results = interleaved([timer for timer, _ in prepared], repeats)
        for (_, fixed), result in zip(prepared, results, strict=True):
            rows.append(_row(fixed, result))
            log(format_row(rows[-1]))
        del prepared
        jax.clear_caches()  # compiled programs of finished lines are not needed again
    return rows


SCALING_HEADER = (
    f"{'axis':<10} {'builder':<13} {'mode':<10} {'size':>5} {'agents':>7} "
    f"{'batch':>6} {'env-steps/s':>12} {'bytes/env':>11} {'compile s':>9}"
)


def format_row(row: Mapping[str, Any]) -> str:
    """One printed line of a scaling row (see :data:`SCALING_HEADER`)."""
    agents = f"{row['n_predators']}v{row['n_prey']}"
    return (
        f"{row['axis']:<10} {row['builder']:<13} {row['mode']:<10} {row['size']:>5} "
        f"{agents:>7} {row['batch']:>6} {row['env_steps_per_s']:>12,.0f} "
        f"{row['bytes_per_env']:>11,} {row['compile_s']:>9.2f}"
    )


def format_scaling(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: one table per axis, builders as rows, settings as columns (env-steps/s),
    and one table of bytes per environment against grid size and agent count."""
    lines: list[str] = []
    for axis, key, unit in (
        ("grid size", "size", "{}x{}"),
        ("agents", "num_agents", "{}"),
        ("batch", "batch_requested", "{}"),
    ):
        for mode in (NO_RESET, AUTO_RESET):
            sel = [r for r in rows if r["axis"] == axis and r["mode"] == mode]
            if not sel:
                continue
            values = sorted({r[key] for r in sel})
            heads = [unit.format(v, v) for v in values]
            lines += [
                f"env-steps/s against {axis} ({mode}; batch in brackets where the "
                f"memory budget cut it):",
                "",
                "| builder | " + " | ".join(heads) + " |",
                "|---|" + "---:|" * len(values),
            ]
            for builder in dict.fromkeys(r["builder"] for r in sel):
                cells = []
                for v in values:
                    r = next((r for r in sel if r["builder"] == builder and r[key] == v), None)
                    cells.append("" if r is None else _rate(r))
                lines.append(f"| {builder} | " + " | ".join(cells) + " |")
                if mode == AUTO_RESET:
                    lines.append(_reset_ratio(rows, axis, key, builder, values))
            lines.append("")
    shows = [r for r in rows if r["axis"] == "showcase"]
    if shows:
        lines += [
            "PPAGE's showcases (no reset):",
            "",
            "| setting | builder | batch | env-steps/s | agent-steps/s | bytes/env |",
            "|---|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['label']} | {r['builder']} | {r['batch']} | "
            f"{r['env_steps_per_s']:,.0f} | {r['agent_steps_per_s']:,.0f} | "
            f"{r['bytes_per_env']:,} |"
            for r in shows
        ]
        lines.append("")
    sized = [r for r in rows if r["axis"] == "grid size" and r["mode"] == NO_RESET]
    if sized:
        values = sorted({r["size"] for r in sized})
        lines += [
            "Bytes per environment (state + observation) against grid size (3v3):",
            "",
            "| builder | " + " | ".join(f"{v}x{v}" for v in values) + " |",
            "|---|" + "---:|" * len(values),
        ]
        state = {r["size"]: r["state_bytes"] for r in sized}
        lines.append("| state only | " + " | ".join(f"{state[v]:,}" for v in values) + " |")
        for builder in dict.fromkeys(r["builder"] for r in sized):
            by = {r["size"]: r["bytes_per_env"] for r in sized if r["builder"] == builder}
            lines.append(
                f"| {builder} | "
                + " | ".join(f"{by[v]:,}" if v in by else "" for v in values)
                + " |"
            )
    return "\n".join(lines).rstrip() + "\n"


def _reset_ratio(
    rows: Sequence[Mapping[str, Any]], axis: str, key: str, builder: str, values: Sequence[Any]
) -> str:
    """Table row: each auto-reset rate over the same setting's no-reset rate."""
    rate = {
        (r["mode"], r[key]): r["env_steps_per_s"]
        for r in rows
        if r["axis"] == axis and r["builder"] == builder
    }
    cells = [
        f"{rate[AUTO_RESET, v] / rate[NO_RESET, v]:.2f}" if (NO_RESET, v) in rate else ""
        for v in values
    ]
    return f"| {builder}, auto-reset / no reset | " + " | ".join(cells) + " |"


def _rate(row: Mapping[str, Any]) -> str:
    text = f"{row['env_steps_per_s']:,.0f}"
    if row["batch"] != row["batch_requested"]:
        text += f" ({row['batch']})"
    return text


def plot_scaling(rows: Sequence[Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """PNG: env-steps/s (top) and bytes per environment (bottom) against grid size, agent
    count and batch size, one line per builder (dashed: with the batched auto-reset)."""
    import matplotlib

    from ppage_jax.viz import figures as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    builders = list(dict.fromkeys(r["builder"] for r in rows))
    palette = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {b: palette[i % len(palette)] for i, b in enumerate(builders)}
    panels = (
        ("grid size", "size", "grid side (cells)"),
        ("agents", "num_agents", f"agents ({AGENT_AXIS_SIZE}x{AGENT_AXIS_SIZE} grid)"),
        ("batch", "batch_requested", "batch size (grids, 10x10)"),
    )
    for col, (axis, key, label) in enumerate(panels):
        for builder in builders:
            for mode, style in ((NO_RESET, "o-"), (AUTO_RESET, "s--")):
                sel = sorted(
                    (
                        r
                        for r in rows
                        if r["axis"] == axis and r["builder"] == builder and r["mode"] == mode
                    ),
                    key=lambda r: r[key],
                )
                if not sel:
                    continue
                name = builder if mode == NO_RESET else f"{builder}, auto-reset"
                xs = [r[key] for r in sel]
                axes[0][col].plot(
                    xs,
                    [r["env_steps_per_s"] for r in sel],
                    style,
                    color=color[builder],
                    label=name,
                    ms=4,
                )
                if mode == NO_RESET:
                    ys = (
                        [r["bytes_per_env"] * r["batch"] for r in sel]
                        if axis == "batch"
                        else [r["bytes_per_env"] for r in sel]
                    )
                    axes[1][col].plot(xs, ys, style, color=color[builder], label=name, ms=4)
        for row, ylabel in (
            (0, "env-steps/s (no reset unless dashed)"),
            (1, "bytes per batch" if axis == "batch" else "bytes per env"),
        ):
            ax = axes[row][col]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(label)
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
    for r in rows:
        if r["axis"] == "showcase":
            axes[0][0].plot(
                [r["size"]],
                [r["env_steps_per_s"]],
                "*",
                ms=10,
                color=color[r["builder"]],
                mec="black",
                mew=0.5,
            )
    if any(r["axis"] == "showcase" for r in rows):
        axes[0][0].plot([], [], "*", color="grey", mec="black", label="showcases (3v10, 5v20)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title or "random-policy env-steps/s and memory against scale")
    return plt.write_figure(fig, path, dpi=100)
