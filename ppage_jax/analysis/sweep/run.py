"""Reward-ablation sweeps: every (arm, seed) run as one compiled program.

A sweep (``ppage_jax.analysis.sweep.spec``) lists arms (reward designs in one shared term structure)
and a number of seeds. Each run trains with ``train(key, params)`` and then plays the
held-out evaluation block greedily; the runs are stacked on one leading axis (arm-major,
seed ``i`` of every arm starting from the same key, so environment seeds are paired across
arms), split across local devices with :mod:`ppage_jax.sharding`, and executed in chunks of
one compiled program (the last chunk padded, so every chunk reuses the same executable).
Results are written after every chunk, so an interrupted sweep keeps what finished:

- ``results.csv``: tidy ``arm, seed, metric, value`` rows of the evaluation (capture rate,
  episode length, steps to capture, base-reward return per role at unit weight, per-term
  return per role as paid);
- ``curves.csv``: ``arm, seed, update, env_steps, metric, value`` per training update;
- ``sweep.json``: the resolved arms, seeds and timings; then ``report.md`` and plots
  (:mod:`ppage_jax.analysis.sweep.report`).
"""
from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax.env import GridWorld
from ppage_jax.episodes.stats import episode_stats_init, episode_stats_update
from ppage_jax.sharding import make_mesh, shard_batch
from ppage_jax.state import EnvParams, State
from ppage_jax.analysis.sweep.spec import SweepSpec

# train_fn(key, params) -> (runner_state, metrics: dict of per-update arrays [U, ...])
TrainFn = Callable[[jax.Array, EnvParams], tuple[Any, dict]]
# eval_fn(runner_state, params) -> per-episode arrays (see play_episodes)
EvalFn = Callable[[Any, EnvParams], dict]
# actor(key, obs float32[E, A, F], batched state) -> int32[E, A]
Actor = Callable[[jax.Array, jax.Array, State], jax.Array]

ROLES = ("predator", "prey")
# On CPU, without an explicit chunk_size, the runs are split into this many chunks.
CPU_CHUNKS = 4


# ------------------------------------------------------------------------- evaluation
def episode_keys(seed: int, episodes: int) -> jax.Array:
    """The held-out block: episode ``j`` uses ``PRNGKey(seed + j)``."""
    return jax.vmap(jax.random.PRNGKey)(jnp.arange(seed, seed + episodes))


def play_episodes(env: GridWorld, actor: Actor, params: EnvParams, keys: jax.Array
                  ) -> dict[str, jax.Array]:
    """One episode per key, to its end (no auto-reset); pure, jittable and vmappable.

    Episode ``j`` starts from the layout of ``fold_in(keys[j], 0)``. Returns ``captured``
    bool[N] (terminated within the step cap), ``length`` int32[N], ``returns`` float32[N, A, T]
    (undiscounted, as paid) and ``unit_returns`` float32[N, A, T] (per unit weight).
    """
    n = keys.shape[0]
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys), params)
    carry = {"obs": obs, "state": state, "t": jnp.zeros((), jnp.int32),
             "done": jnp.zeros(n, bool), "captured": jnp.zeros(n, bool),
             "stats": episode_stats_init(env, (n,)),
             "length": jnp.zeros(n, jnp.int32),
             "returns": jnp.zeros((n, env.num_agents, len(env.reward_terms)), jnp.float32),
             "unit_returns": jnp.zeros((n, env.num_agents, len(env.reward_terms)),
                                       jnp.float32)}

    def body(c):
        t = c["t"] + 1
        actions = actor(jax.random.fold_in(keys[0], t), c["obs"], c["state"])
        obs, state, _, term, trunc, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.vmap(lambda k: jax.random.fold_in(k, t))(keys), c["state"], actions, params)
        live = ~c["done"]
        stats, finished = episode_stats_update(c["stats"], info, term & live, trunc & live,
                                               params.reward.gamma)
        stats = jax.tree.map(
            lambda new, old: jnp.where(live.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
            stats, c["stats"])
        # `stats` restarts from zero where an episode ends: keep the ended episode's values
        # from `finished` (zero except on the step each episode ends).
        return {"obs": obs, "state": state, "t": t, "done": c["done"] | term | trunc,
                "captured": c["captured"] | (live & term), "stats": stats,
                "length": c["length"] + finished["length"],
                "returns": c["returns"] + finished["returns"],
                "unit_returns": c["unit_returns"] + finished["unit_returns"]}

    out = lax.while_loop(lambda c: ~c["done"].all(), body, carry)
    return {"captured": out["captured"], "length": out["length"],
            "returns": out["returns"], "unit_returns": out["unit_returns"]}


def trainer_functions(spec: SweepSpec, env: GridWorld) -> tuple[TrainFn, EvalFn, int]:
    """``(train_fn, eval_fn, env_steps_per_update)`` from the config's experiment section:
    ``ppage_jax.train``'s algorithm, evaluated on the sweep's held-out block with its greedy
    or sampled actions (``eval.policy``); a role that does not learn plays its baseline."""
    from ppage_jax.train.evaluate import eval_params, make_actor
    from ppage_jax.train.experiment import algorithm, make_train_config

    tc = make_train_config(spec.config, env)
    module = algorithm(tc.algorithm)
    keys = episode_keys(spec.eval_seed, spec.eval_episodes)

    def train_fn(key: jax.Array, params: EnvParams):
        return module.train(key, tc, params)

    def eval_fn(runner: Any, params: EnvParams) -> dict:
        capped = eval_params(params, spec.eval_max_steps)
        choice = "trained" if spec.eval_policy == "greedy" else "sampled"
        actor = make_actor(tc, module.policy_state(runner), capped, choice, choice)
        return play_episodes(env, actor, capped, keys)

    return train_fn, eval_fn, tc.env_steps_per_update


# ------------------------------------------------------------------------- metrics
def run_metrics(env: GridWorld, episodes: dict[str, np.ndarray]) -> dict[str, float]:
    """Evaluation metrics of one run from :func:`play_episodes` output (NumPy)."""
    captured = np.asarray(episodes["captured"], bool)
    length = np.asarray(episodes["length"], np.float64)
    returns = np.asarray(episodes["returns"], np.float64)
    unit = np.asarray(episodes["unit_returns"], np.float64)
    out = {"capture_rate": float(captured.mean()),
           "episode_length": float(length.mean()),
           "steps_to_capture": float(length[captured].mean()) if captured.any() else math.nan}
    is_pred = np.asarray(env.is_predator, bool)
    terms = env.reward_terms
    for role, rows in zip(ROLES, (is_pred, ~is_pred)):
        if not rows.any():
            continue
        if "base" in terms:
            out[f"base_return/{role}"] = float(unit[:, rows, terms.index("base")].mean())
        per_term = returns[:, rows, :].mean(axis=(0, 1))
        for name, value in zip(terms, per_term):
            out[f"return/{role}/{name}"] = float(value)
        out[f"return/{role}/total"] = float(per_term.sum())
    return out


def curve_rows(env: GridWorld, metrics: dict[str, Any], env_steps_per_update: int
               ) -> list[tuple[int, int, str, float]]:
    """``(update, env_steps, metric, value)`` rows of one run's per-update training metrics.

    Scalar-per-update entries keep their name (nested dicts such as ``losses`` become
    ``losses/<name>``); ``returns`` [U, 2, T] becomes ``return/<role>/<term>``. Rows of
    updates marked inactive (``active`` False) are dropped.
    """
    flat: dict[str, np.ndarray] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}/{key}" if prefix else key, value)
        else:
            flat[prefix] = np.asarray(node)

    walk("", metrics)
    active = flat.pop("active", None)
    returns = flat.pop("returns", None)
    updates = next(iter(flat.values())).shape[0] if flat else \
        (returns.shape[0] if returns is not None else 0)
    rows = []
    for u in range(updates):
        if active is not None and not bool(active[u]):
            continue
        steps = (u + 1) * env_steps_per_update
        for name, values in flat.items():
            if values.ndim == 1:
                rows.append((u + 1, steps, name, float(values[u])))
        if returns is not None and returns.ndim == 3:
            for r, role in enumerate(ROLES):
                for t, term in enumerate(env.reward_terms):
                    rows.append((u + 1, steps, f"return/{role}/{term}", float(returns[u, r, t])))
    return rows


# ------------------------------------------------------------------------- running
def stack_runs(spec: SweepSpec, env: GridWorld) -> tuple[list[tuple[str, int]], jax.Array,
                                                          EnvParams]:
    """The runs (arm-major): names ``[(arm, seed)]``, keys [R] and stacked params [R].

    Seed ``i`` of every arm trains from ``PRNGKey(train_seed + i)``: paired across arms.
    """
    arm_params = spec.arm_params(env)
    runs, keys, params = [], [], []
    for arm, p in zip(spec.arms, arm_params):
        for i in range(spec.seeds):
            runs.append((arm.name, spec.train_seed + i))
            keys.append(jax.random.PRNGKey(spec.train_seed + i))
            params.append(p)
    return runs, jnp.stack(keys), jax.tree.map(lambda *xs: jnp.stack(xs), *params)


def make_program(train_fn: TrainFn, eval_fn: EvalFn) -> Callable:
    """``vmap`` over runs of train-then-evaluate: ``(keys [R], params [R]) -> (metrics, eval)``."""
    def one_run(key: jax.Array, params: EnvParams):
        runner, metrics = train_fn(key, params)
        return metrics, eval_fn(runner, params)

    return jax.vmap(one_run)


def _take(tree: Any, index: np.ndarray) -> Any:
    return jax.tree.map(lambda x: x[index], tree)


def _device_memory_limit() -> int | None:
    device = jax.local_devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:      # backends without memory stats
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _program_bytes(compiled) -> int | None:
    try:
        ma = compiled.memory_analysis()
    except Exception:
        return None
    if ma is None:
        return None
    return int(ma.temp_size_in_bytes + ma.argument_size_in_bytes + ma.output_size_in_bytes)


def compile_chunk(program: Callable, keys: jax.Array, params: EnvParams, chunk: int,
                  mesh, auto: bool, memory_fraction: float = 0.7):
    """Compile ``program`` for ``chunk`` runs (a multiple of the device count). With
    ``auto``, halve the chunk until the compiled program's memory fits ``memory_fraction``
    of one device's memory. Returns ``(compiled, chunk)``."""
    n_dev = len(mesh.devices.flat)
    limit = _device_memory_limit() if auto else None
    while True:
        index = np.arange(chunk) % keys.shape[0]
        args = shard_batch((keys[index], _take(params, index)), mesh)
        compiled = jax.jit(program).lower(*args).compile()
        need = _program_bytes(compiled)
        per_device = need / n_dev if need is not None else None
        if not auto or limit is None or per_device is None or chunk <= n_dev \
                or per_device <= memory_fraction * limit:
            return compiled, chunk
        chunk = max(n_dev, int(math.ceil(chunk / 2 / n_dev)) * n_dev)


class SweepWriter:
    """Appends each finished chunk to results.csv and curves.csv (flushed at once)."""

    RESULT_HEADER = ("arm", "seed", "metric", "value")
    CURVE_HEADER = ("arm", "seed", "update", "env_steps", "metric", "value")

    def __init__(self, output_dir: str | Path, description: dict):
        self.dir = Path(output_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.description = dict(description)
        self.results_path = self.dir / "results.csv"
        self.curves_path = self.dir / "curves.csv"
        for path, header in ((self.results_path, self.RESULT_HEADER),
                             (self.curves_path, self.CURVE_HEADER)):
            with open(path, "w", newline="") as fh:
                csv.writer(fh).writerow(header)
        self.write_description()

    def write_description(self, **extra: Any) -> None:
        self.description.update(extra)
        (self.dir / "sweep.json").write_text(json.dumps(self.description, indent=2))

    def add(self, arm: str, seed: int, results: dict[str, float],
            curves: list[tuple[int, int, str, float]]) -> None:
        with open(self.results_path, "a", newline="") as fh:
            writer = csv.writer(fh)
            for metric, value in results.items():
                writer.writerow((arm, seed, metric, repr(float(value))))
        with open(self.curves_path, "a", newline="") as fh:
            writer = csv.writer(fh)
            for update, steps, metric, value in curves:
                writer.writerow((arm, seed, update, steps, metric, repr(float(value))))


def run_sweep(spec: SweepSpec, train_fn: TrainFn | None = None, eval_fn: EvalFn | None = None,
              env_steps_per_update: int | None = None, output_dir: str | Path | None = None,
              progress: bool = True, report: bool = True) -> dict[str, Any]:
    """Run every (arm, seed) of ``spec``; write results as chunks finish; return a summary.

    ``train_fn``/``eval_fn`` default to the config's training algorithm and greedy
    evaluation on the held-out block (:func:`trainer_functions`); pass your own to sweep
    anything with the same contract. Chunks: ``spec.chunk_size`` runs per call; by default
    every run at once on an accelerator (halved until the program fits in memory), and
    ``CPU_CHUNKS`` chunks on CPU (for the progress bar and early results).

    Returns ``{"runs", "results", "curves", "chunk_size", "chunks", "compile_seconds",
    "seconds", "output_dir"}`` (results: {(arm, seed): metrics}).
    """
    from tqdm.auto import tqdm

    env = spec.make_env()
    if train_fn is None or eval_fn is None:
        default_train, default_eval, default_steps = trainer_functions(spec, env)
        train_fn = train_fn or default_train
        eval_fn = eval_fn or default_eval
        env_steps_per_update = env_steps_per_update or default_steps
    env_steps_per_update = env_steps_per_update or 1
    out_dir = Path(output_dir or spec.output_dir)
    runs, keys, params = stack_runs(spec, env)
    total = len(runs)
    mesh = make_mesh()
    n_dev = len(mesh.devices.flat)
    if spec.chunk_size is not None:
        wanted = min(spec.chunk_size, total)
    elif jax.devices()[0].platform == "cpu":
        # a few cores gain little from a wider vmap: chunk for progress and early results
        wanted = int(math.ceil(total / CPU_CHUNKS))
    else:
        wanted = total
    chunk = int(math.ceil(wanted / n_dev)) * n_dev
    writer = SweepWriter(out_dir, dict(spec.describe(), runs=total, devices=n_dev,
                                       platform=jax.devices()[0].platform,
                                       env_steps_per_update=env_steps_per_update))
    start = time.perf_counter()
    compiled, chunk = compile_chunk(make_program(train_fn, eval_fn), keys, params, chunk, mesh,
                                    auto=spec.chunk_size is None)
    compile_seconds = time.perf_counter() - start
    writer.write_description(chunk_size=chunk, compile_seconds=round(compile_seconds, 2))
    results: dict[tuple[str, int], dict[str, float]] = {}
    curves: dict[tuple[str, int], list] = {}
    bar = tqdm(total=total, unit="run", desc="sweep", disable=not progress)
    n_chunks = 0
    for first in range(0, total, chunk):
        index = np.arange(first, first + chunk)
        real = int((index < total).sum())
        index = np.minimum(index, total - 1)            # pad the last chunk with its last run
        metrics, episodes = compiled(*shard_batch((keys[index], _take(params, index)), mesh))
        metrics, episodes = jax.device_get((metrics, episodes))
        for j in range(real):
            arm, seed = runs[first + j]
            result = run_metrics(env, _take(episodes, j))
            curve = curve_rows(env, _take(metrics, j), env_steps_per_update)
            results[(arm, seed)], curves[(arm, seed)] = result, curve
            writer.add(arm, seed, result, curve)
        n_chunks += 1
        bar.update(real)
        done = [r["capture_rate"] for r in results.values()]
        bar.set_postfix(capture_rate=f"{np.mean(done):.2f}")
    bar.close()
    seconds = time.perf_counter() - start
    writer.write_description(seconds=round(seconds, 2), chunks=n_chunks)
    summary = {"runs": runs, "results": results, "curves": curves, "chunk_size": chunk,
               "chunks": n_chunks, "compile_seconds": compile_seconds, "seconds": seconds,
               "output_dir": str(out_dir)}
    if report:
        from ppage_jax.analysis.sweep.report import write_report
        summary["report"] = str(write_report(out_dir))
    return summary
