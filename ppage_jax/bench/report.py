"""Benchmark runs and their reports: the per-config throughput table (``ppage-jax bench``)
and the whole benchmark set written to a directory as JSON and Markdown
(``ppage-jax bench --report DIR``): throughput by config and batch, scaling, compile times,
peak device memory where the backend reports it, and training throughput per algorithm.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ppage_jax.artifacts import write_text
from ppage_jax.bench import scaling
from ppage_jax.bench.peers import (
    PEER_RATIOS,
    PEERS_HEADING,
    PPAGE_PREFIX,
    peer_legend,
    run_peers,
)
from ppage_jax.bench.throughput import (
    Result,
    bench_env,
    bench_oracle,
    default_steps,
    device_info,
    first_step_seconds,
    peak_memory_bytes,
)
from ppage_jax.config import ConfigNotice, load_config
from ppage_jax.env import make


# ------------------------------------------------------------------------- per-config table
def run_benchmark(
    configs: Sequence[str],
    batch_sizes: Iterable[int],
    steps: int | None = None,
    *,
    repeats: int = 3,
    oracle: bool = True,
    oracle_seconds: float = 2.0,
    peers: bool = True,
    peer_batch: int = 4096,
    first_step: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure every config at every batch size, plus the oracle, the peers (if installed)
    and the compile-to-first-step time; returns a JSON-ready dict (see :func:`format_report`)."""
    report: dict[str, Any] = {
        "device": device_info(),
        "scaling": [],
        "oracle": [],
        "peers": [],
        "first_step": [],
    }
    for config in configs:
        env = make(load_config(config))
        for batch in batch_sizes:
            result = bench_env(
                env, batch, steps or default_steps(batch), repeats=repeats, name=config
            )
            report["scaling"].append(result.as_dict())
            log(result.row())
        if oracle:
            result = bench_oracle(env, oracle_seconds, name=config)
            report["oracle"].append(result.as_dict())
            log(result.row())
        if first_step:
            seconds = first_step_seconds(config, peer_batch)
            report["first_step"].append({"name": config, "batch": peer_batch, **seconds})
            log(
                f"{config}: make -> first auto-reset step at batch {peer_batch}: "
                f"{seconds['wall']:.2f} s wall, {seconds['cpu']:.2f} s CPU"
            )
    if peers:
        report["peers"] = run_peers(
            configs, peer_batch, steps or default_steps(peer_batch), repeats, log
        )
    return report


def device_line(dev: Mapping[str, Any]) -> str:
    load = dev.get("load_avg_1min")
    return (
        f"Device: {dev['platform']} ({dev['device_kind']}) x{dev['device_count']}, "
        f"jax {dev['jax']}, {dev['cpu_count']} CPU cores, 1-min load average "
        f"{'n/a' if load is None else f'{load:.1f}'} at the start."
    )


def throughput_table(results: Iterable[Mapping[str, Any]], bytes_format: str = "") -> list[str]:
    """Markdown lines of the per-config, per-batch throughput table of ``results``
    (:class:`Result` dicts), header first; ``bytes_format`` formats the bytes per state
    (``","``: with thousands separators)."""
    rows = (
        (
            r.name,
            r.batch,
            f"{r.env_steps_per_s:,.0f}",
            f"{r.agent_steps_per_s:,.0f}",
            f"{r.compile_s:.2f}",
            f"{r.bytes_per_state:{bytes_format}}",
        )
        for r in map(Result.from_dict, results)
    )
    columns = ("config", "batch", "env-steps/s", "agent-steps/s", "compile s", "bytes/state")
    return markdown_table(columns, rows)


def markdown_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], left: int = 1
) -> list[str]:
    """The lines of a Markdown table: the ``columns`` header, the rule (the first ``left``
    columns aligned left, the rest right) and a line per row of cells (``str()`` of each)."""
    rule = "".join("|---" if i < left else "|---:" for i in range(len(columns)))
    return [_table_line(columns), f"{rule}|", *map(_table_line, rows)]


def _table_line(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def format_report(report: Mapping[str, Any]) -> str:
    """Markdown tables of a :func:`run_benchmark` report (device line first)."""
    lines = [device_line(report["device"]), ""]
    lines += [
        "Each config with random actions and the batched auto-reset, each batch timed on its own:",
        "",
        *throughput_table(report["scaling"]),
    ]
    if report["oracle"]:
        oracle = map(Result.from_dict, report["oracle"])
        lines += [
            "",
            *markdown_table(
                ("NumPy oracle (1 grid, obs built each step)", "env-steps/s", "agent-steps/s"),
                (
                    (r.name, f"{r.env_steps_per_s:,.0f}", f"{r.agent_steps_per_s:,.0f}")
                    for r in oracle
                ),
            ),
        ]
    if report["first_step"]:
        lines += [
            "",
            *markdown_table(
                ("config", "batch", "make -> first auto-reset step, wall s", "same, process CPU s"),
                (
                    (d["name"], d["batch"], f"{d['wall']:.2f}", f"{d['cpu']:.2f}")
                    for d in report["first_step"]
                ),
            ),
        ]
    if report["peers"]:
        peers = [Result.from_dict(d) for d in report["peers"]]
        ref = peers[0].env_steps_per_s
        legend = peer_legend(peers[0].name.removeprefix(PPAGE_PREFIX), peers[0].batch)
        heading = PEERS_HEADING.format(batch=peers[0].batch)
        lines += [
            "",
            f"{heading[0].upper()}{heading[1:]}:",
            "",
            *(f"- `{name}`: {meaning}." for name, meaning in legend.items()),
            "",
            *markdown_table(
                (
                    f"at batch {peers[0].batch}",
                    "reset",
                    "env-steps/s",
                    "agent-steps/s",
                    "ratio to first row",
                ),
                (
                    (
                        r.name,
                        r.mode,
                        f"{r.env_steps_per_s:,.0f}",
                        f"{r.agent_steps_per_s:,.0f}",
                        f"{r.env_steps_per_s / ref:.2f}",
                    )
                    for r in peers
                ),
                left=2,
            ),
        ]
        rate = {r.name: r.env_steps_per_s for r in peers}
        for ours, theirs in PEER_RATIOS:
            if ours in rate and theirs in rate:
                lines.append(f"\n{ours} / {theirs}: {rate[ours] / rate[theirs]:.2f}x env-steps/s")
    return "\n".join(lines)


def plot_batches(report: Mapping[str, Any], path: str | Path) -> Path:
    """Write a log-log plot of env-steps/s against batch size per config (PNG)."""
    import matplotlib

    from ppage_jax.viz import figures as plt  # off-screen figures; no global backend switch

    fig, ax = plt.subplots(figsize=(8, 5))
    names = sorted({d["name"] for d in report["scaling"]})
    palette = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    for name in names:
        rows = sorted((d for d in report["scaling"] if d["name"] == name), key=lambda d: d["batch"])
        ax.plot(
            [d["batch"] for d in rows],
            [d["env_steps_per_s"] for d in rows],
            "o-",
            color=colors[name],
            label=f"{name} (auto-reset)",
        )
    for d in report["oracle"]:
        name = d["name"].removeprefix("oracle ")
        ax.plot([1], [d["env_steps_per_s"]], "x", ms=9, color=colors.get(name, "grey"))
    if report["oracle"]:
        ax.plot([], [], "x", color="grey", label="NumPy oracle, 1 grid (colour = config)")
    for d, marker in zip(report["peers"], "sD^v<>", strict=False):
        ax.plot(
            [d["batch"]],
            [d["env_steps_per_s"]],
            marker,
            ms=8,
            color="black",
            mfc="none",
            label=f"{d['name']} ({d['mode']})",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (grids)")
    ax.set_ylabel("env-steps/s")
    dev = report["device"]
    ax.set_title(
        f"random-policy throughput, jit(vmap), {dev['platform']} "
        f"x{dev['device_count']} ({dev['cpu_count']} cores)"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return plt.write_figure(fig, path, dpi=120)


# ------------------------------------------------------------------------- the whole set
# What `bench --report` measures: small enough to finish within five minutes on 2 CPU cores.
REPORT_CONFIGS = ("default", "1v1")
REPORT_BATCHES = (1, 4096, 65536)
REPORT_SIZES = (10, 100, 1000)
REPORT_AGENTS = (2, 32, 256)
REPORT_AGENT_BUILDERS = ("local_only", "grid")
TRAINING_CONFIG = "1v1"
TRAINING_ENVS = 64


def report_points(builders: Sequence[str] | None = None) -> list[scaling.Point]:
    """The scaling settings of the report: every builder at 10, 100 and 1000 cells a side,
    three agent counts and the showcases for local_only and grid, and the auto-reset at
    10x10 and 100x100 with the grid builder."""
    builders = list(builders) if builders is not None else None
    points = scaling.sweep_points(
        builders, sizes=REPORT_SIZES, agents=(), batches=(), showcases=False, reset_builders=()
    )
    keep = [b for b in REPORT_AGENT_BUILDERS if builders is None or b in builders]
    points += scaling.sweep_points(
        keep, sizes=(), agents=REPORT_AGENTS, batches=(), showcases=False, reset_builders=()
    )
    points += scaling.sweep_points(keep, sizes=(), agents=(), batches=(), reset_builders=())
    if "grid" in keep:
        points += [scaling.Point("grid size", "grid", s, 3, 3, 256, resets=True) for s in (10, 100)]
    return points


def training_throughput(
    algorithms: Sequence[str] | None = None, *, updates: int = 4, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Env-steps/s of each training algorithm (``ppage_jax.train``) on configs/1v1 with
    64 grids and its default hyperparameters: ``updates`` updates, compile timed apart.
    An algorithm whose defaults do not fit the small budget is listed with the reason."""
    from ppage_jax.train import ALGORITHMS, make_train_config
    from ppage_jax.train.run.experiment import train_agents

    rows = []
    for name in algorithms or list(ALGORITHMS):
        try:
            base = {
                "experiment.algorithm": {"name": name, "params": {}},
                "experiment.num_envs": TRAINING_ENVS,
                "experiment.episodes": None,
                "experiment.total_timesteps": 1,
            }
            with warnings.catch_warnings():  # a one-step budget, only to read the update size
                warnings.simplefilter("ignore", ConfigNotice)
                probe = make_train_config(load_config(TRAINING_CONFIG, base))
            per_update = probe.env_steps_per_update
            tc = make_train_config(
                load_config(
                    TRAINING_CONFIG, {**base, "experiment.total_timesteps": per_update * updates}
                )
            )
        except (ValueError, KeyError) as err:  # ConfigError is a ValueError
            rows.append({"algorithm": name, "skipped": str(err).splitlines()[0]})
            log(f"training {name}: skipped ({rows[-1]['skipped']})")
            continue
        params = tc.env.default_params
        start = time.perf_counter()
        compiled = (
            jax.jit(lambda key, tc=tc, params=params: train_agents(key, tc, params)[1])
            .lower(jax.random.PRNGKey(0))
            .compile()
        )
        compile_s = time.perf_counter() - start
        start = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.PRNGKey(1)))
        seconds = time.perf_counter() - start
        steps = tc.env_steps_per_update * tc.num_updates
        rows.append(
            {
                "algorithm": name,
                "num_envs": tc.num_envs,
                "updates": tc.num_updates,
                "env_steps": steps,
                "seconds": seconds,
                "compile_s": compile_s,
                "env_steps_per_s": steps / seconds,
            }
        )
        log(f"training {name}: {steps / seconds:,.0f} env-steps/s (compile {compile_s:.1f} s)")
        jax.clear_caches()
    return rows


def run_report(
    *,
    builders: Sequence[str] | None = None,
    configs: Sequence[str] = REPORT_CONFIGS,
    batches: Sequence[int] = REPORT_BATCHES,
    points: Sequence[scaling.Point] | None = None,
    algorithms: Sequence[str] | None = None,
    training_updates: int = 4,
    seconds: float = 0.2,
    repeats: int = 2,
    first_step: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole benchmark set as one JSON-ready dict: ``device``, ``throughput`` (configs x
    batches, auto-reset), ``first_step``, ``scaling`` (:func:`report_points`), ``training``
    and ``peak_memory_bytes`` (None where the backend does not report it, e.g. CPU)."""
    start = time.perf_counter()
    report: dict[str, Any] = {"device": device_info(), "throughput": [], "first_step": []}
    for config in configs:
        env = make(load_config(config))
        for batch in batches:
            result = bench_env(env, batch, None, repeats=repeats, name=config, seconds=seconds)
            report["throughput"].append(result.as_dict())
            log(result.row())
        jax.clear_caches()
    if first_step and configs:
        report["first_step"].append(
            {"name": configs[0], "batch": 4096, **first_step_seconds(configs[0], 4096)}
        )
    pts = report_points(builders) if points is None else points
    report["scaling"] = scaling.run_scaling(pts, seconds=seconds, repeats=repeats, log=log)
    report["training"] = training_throughput(algorithms, updates=training_updates, log=log)
    report["peak_memory_bytes"] = peak_memory_bytes()
    report["seconds"] = time.perf_counter() - start
    return report


def format_full_report(report: Mapping[str, Any]) -> str:
    """Markdown of a :func:`run_report` dict."""
    lines = [
        "# Benchmark report",
        "",
        device_line(report["device"]),
        f"Whole run: {report['seconds']:.0f} s. Random policy, `jit(vmap)`, best of the "
        f"timed runs; compile time apart.",
        "",
        "## Throughput by config and batch (batched auto-reset)",
        "",
        *throughput_table(report["throughput"], bytes_format=","),
        "",
        "## Compile times",
        "",
    ]
    for d in report["first_step"]:
        lines.append(
            f"- `make` -> first finished auto-reset step, {d['name']}, batch "
            f"{d['batch']}: {d['wall']:.2f} s wall, {d['cpu']:.2f} s CPU "
            f"(fresh process)."
        )
    compiles = [d["compile_s"] for d in report["scaling"]]
    if compiles:
        lines.append(
            f"- scaling points: median {np.median(compiles):.2f} s, max "
            f"{max(compiles):.2f} s per compiled rollout."
        )
    lines += [
        "",
        "## Scaling",
        "",
        scaling.format_scaling(report["scaling"]),
        "## Training throughput (configs/1v1, default hyperparameters)",
        "",
        "| algorithm | grids | updates | env-steps/s | compile s |",
        "|---|---:|---:|---:|---:|",
    ]
    for d in report["training"]:
        if "skipped" in d:
            lines.append(f"| {d['algorithm']} | | | skipped: {d['skipped']} | |")
        else:
            lines.append(
                f"| {d['algorithm']} | {d['num_envs']} | {d['updates']} | "
                f"{d['env_steps_per_s']:,.0f} | {d['compile_s']:.1f} |"
            )
    peak = report["peak_memory_bytes"]
    lines += [
        "",
        "## Peak device memory",
        "",
        "Not reported by this backend (`device.memory_stats()` is None on CPU)."
        if peak is None
        else f"{peak / 2**20:,.1f} MiB (`peak_bytes_in_use`, busiest device).",
    ]
    return "\n".join(lines) + "\n"


def write_report(report: Mapping[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and ``scaling.png`` under ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "report.json",
        "markdown": out / "report.md",
        "plot": out / "scaling.png",
    }
    write_text(paths["json"], json.dumps(report, indent=1))
    write_text(paths["markdown"], format_full_report(report))
    scaling.plot_scaling(report["scaling"], paths["plot"])
    return paths
