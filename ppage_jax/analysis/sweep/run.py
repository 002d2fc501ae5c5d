"""Reward-ablation sweeps: every (arm, seed) run as one compiled program.

A sweep (``ppage_jax.analysis.sweep.spec``) lists arms (reward designs in one shared term structure)
and a number of seeds. Each run trains with ``train(key, params)`` and then plays the
held-out evaluation block greedily; the runs are stacked on one leading axis (arm-major,
seed ``i`` of every arm starting from the same key, so environment seeds are paired across
arms), split across every process's devices with :mod:`ppage_jax.sharding`, and executed in
chunks of one compiled program (the last chunk padded, so every chunk reuses the same
executable; sized from the device memory when not given, :mod:`.program`). With several
processes (:mod:`ppage_jax.distributed`) every process runs ``run_sweep`` with the same
arguments, and only process 0 reads and writes the output directory, reports and logs.
Results are committed after every chunk (:mod:`.writer`), so an interrupted sweep keeps what
finished and ``run_sweep(..., resume=True)`` (``ppage-jax sweep --resume OUT_DIR``) runs only
the rest:

- ``audit.csv``: the reward audit of every arm, run before training (:mod:`.auditing`;
  skipped with ``audit: false``, and on resume when the file is there);
- ``baselines.csv``: the fixed baselines (random and greedy BFS chase or evade) on the same
  held-out layouts (:mod:`.baselines`; kept on resume);
- ``results.csv``: tidy ``arm, seed, metric, value`` rows of the evaluation (capture rate,
  time to capture censored at the step limit: ``rmst`` and ``km_median``, the share that hit
  the limit, episode length, steps to capture of the captured episodes, base-reward return
  per role at unit weight, per-term return per role as paid; :mod:`.metrics`) and of the
  reward-hacking monitor over the run's training curve (``monitor/...`` flags and
  ``monitor_first/...`` env steps; :mod:`.monitoring`);
- ``curves.csv``: ``arm, seed, update, env_steps, metric, value`` per training update;
- ``sweep.json``: the resolved arms, seeds and timings; then ``report.md`` and plots
  (:mod:`ppage_jax.analysis.sweep.report`).

Modules: ``trainers`` (the default train/eval functions), ``program`` (stacking, compiling,
chunking), ``metrics`` (per-run numbers), ``monitoring`` (the reward-hacking monitor per run),
``auditing`` (the audit stage), ``baselines`` (the fixed baselines), ``writer`` (files),
``run`` (:func:`run_sweep`: :func:`plan_sweep`, then the stages in order).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from ppage_jax import distributed
from ppage_jax.analysis.batch.auditing import AUDIT_FILE, audit_rows, write_audit
from ppage_jax.analysis.batch.metrics import checkpoint_rows, curve_rows, run_metrics
from ppage_jax.analysis.batch.monitoring import arm_monitors, describe_monitors, monitor_run
from ppage_jax.analysis.batch.output import MANIFEST, identity_hash
from ppage_jax.analysis.batch.program import (
    MEMORY_BUDGET_ENV,
    compile_chunk,
    make_program,
    memory_budget,
    stack_hyperparams,
    stack_runs,
    take,
)
from ppage_jax.analysis.batch.spec import SweepSpec
from ppage_jax.analysis.batch.trainers import EvalFn, TrainFn, trainer_functions
from ppage_jax.analysis.family.endpoints import DERIVED, NoHeadroom, score_scale
from ppage_jax.analysis.family.paired import COMPARISONS_FILE
from ppage_jax.analysis.sweep.baselines import (
    BASELINES_FILE,
    CHECKPOINT_BLOCK,
    EVAL_BLOCK,
    baseline_levels,
    baseline_rows,
    write_baselines,
)
from ppage_jax.analysis.sweep.spec import ScenarioSweep
from ppage_jax.analysis.sweep.writer import (
    DESCRIPTION,
    MANIFEST_FORMAT,
    FollowerWriter,
    SweepWriter,
    open_sweep_writer,
    resumed_manifest,
)
from ppage_jax.artifacts import clear_output, fault, prepare_output_dir, write_json
from ppage_jax.config import ConfigError
from ppage_jax.env import GridWorld
from ppage_jax.sharding import make_mesh, shard_global, to_host
from ppage_jax.state import EnvParams
from ppage_jax.tracking.status import status
from ppage_jax.tracking.sweep import SweepRecorder

# On CPU, without an explicit chunk_size, the runs are split into this many chunks.
CPU_CHUNKS = 4
# How a chunk's runs are trained: one program vmapped over them, or one call per run of a
# program compiled for one run per device (the same numbers, run after run).
LAYOUTS = ("vmap", "sequential")

Writer = SweepWriter | FollowerWriter
# One scored run of a chunk: (arm, seed, results, training curve rows).
ScoredRun = tuple[str, int, dict[str, float], list]


@dataclasses.dataclass(frozen=True, eq=False)
class SweepPlan:
    """What a sweep runs, settled before it touches the output directory: the env, the
    train/eval functions, the stacked runs (arm-major) and the evaluation's step limit."""

    spec: SweepSpec
    env: GridWorld
    train_fn: TrainFn
    eval_fn: EvalFn
    env_steps_per_update: int
    out_dir: Path
    runs: list[tuple[str, int]]
    keys: jax.Array  # [R]
    inputs: Any  # what the program takes per run: EnvParams [R], or (EnvParams, hyperparams)
    arm_params: list[EnvParams]
    horizon: int  # the evaluation's step limit (time to capture is censored there)
    mesh: Mesh  # every process's devices
    layout: str  # one of LAYOUTS

    @property
    def total(self) -> int:
        return len(self.runs)

    @property
    def devices(self) -> int:
        return int(self.mesh.devices.size)

    @property
    def arm_names(self) -> list[str]:
        return [arm.name for arm in self.spec.arms]


def sweep_identity(
    spec: SweepSpec, runs: list[tuple[str, int]], env_steps_per_update: int, horizon: int
) -> dict[str, Any]:
    """What defines a sweep's results (hashed into its manifest): the arms, seeds, eval
    block and config (by hash; not the paths they were read from) and the runs in order."""
    described = {k: v for k, v in spec.describe().items() if k not in ("sweep", "config")}
    return dict(
        described,
        runs=[list(r) for r in runs],
        env_steps_per_update=env_steps_per_update,
        eval_step_limit=horizon,
    )


def choose_layout(layout: str | None = None) -> str:
    """The sweep's layout: ``layout`` when given, else ``vmap`` on every device kind.
    Measured on a 2-core CPU the two layouts train within about 10 % of each other
    (docs/performance.md), and a learner's floats differ between them, so the vmapped
    program, which made the shipped results, stays the default there too. ValueError naming
    the allowed values."""
    if layout is None:
        return "vmap"
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return layout


def plan_sweep(
    spec: SweepSpec,
    train_fn: TrainFn | None = None,
    eval_fn: EvalFn | None = None,
    env_steps_per_update: int | None = None,
    output_dir: str | Path | None = None,
    layout: str | None = None,
) -> SweepPlan:
    """The :class:`SweepPlan` of ``spec``: the config's training and evaluation
    (:func:`trainer_functions`) where a function is not given, the output directory
    (default: the spec's), the stacked runs, the mesh of every process's devices and the
    layout (:func:`choose_layout`)."""
    layout = choose_layout(layout)
    env = spec.make_env()
    if train_fn is None or eval_fn is None:
        default_train, default_eval, default_steps = trainer_functions(spec, env)
        train_fn = train_fn or default_train
        eval_fn = eval_fn or default_eval
        env_steps_per_update = env_steps_per_update or default_steps
    runs, keys, params = stack_runs(spec, env)
    hyper = stack_hyperparams(spec)
    return SweepPlan(
        spec=spec,
        env=env,
        train_fn=train_fn,
        eval_fn=eval_fn,
        env_steps_per_update=env_steps_per_update or 1,
        out_dir=Path(output_dir or spec.output_dir),
        runs=runs,
        keys=keys,
        inputs=(params, hyper) if hyper else params,
        arm_params=spec.arm_params(env),
        horizon=spec.eval_max_steps or int(np.asarray(params.max_steps).reshape(-1)[0]),
        mesh=make_mesh(),
        layout=layout,
    )


def open_writer(plan: SweepPlan, source: dict | None, resume: bool, overwrite: bool) -> Writer:
    """The sweep's output directory (:func:`open_sweep_writer`: refused, resumed or
    overwritten) with sweep.json's first description of the sweep and the machine."""
    spec = plan.spec
    description = dict(
        spec.describe(),
        runs=plan.total,
        devices=plan.devices,
        processes=jax.process_count(),
        platform=jax.devices()[0].platform,
        layout=plan.layout,
        env_steps_per_update=plan.env_steps_per_update,
        eval_step_limit=plan.horizon,
    )
    identity = sweep_identity(spec, plan.runs, plan.env_steps_per_update, plan.horizon)
    return open_sweep_writer(
        plan.out_dir, description, identity, source=source, resume=resume, overwrite=overwrite
    )


def audit_stage(plan: SweepPlan) -> None:
    """audit.csv: the reward audit of every arm (skipped with ``audit: false``, and on
    resume when the file is there)."""
    if plan.spec.audit and not (plan.out_dir / AUDIT_FILE).is_file():
        rows = audit_rows(plan.env, plan.arm_params, plan.arm_names, plan.horizon)
        write_audit(plan.out_dir, rows)


def baselines_stage(plan: SweepPlan) -> None:
    """baselines.csv: the fixed baselines on the held-out layouts, and on the checkpoint
    block when the sweep has one (kept on resume); then the headroom the declared analysis
    needs (:func:`check_headroom`)."""
    path = plan.out_dir / BASELINES_FILE
    if not path.is_file():
        spec, env = plan.spec, plan.env
        blocks = [(EVAL_BLOCK, spec.eval_seed, spec.eval_episodes)]
        if spec.checkpoints is not None:
            points = spec.checkpoints
            blocks.append((CHECKPOINT_BLOCK, points.seed, points.episodes))
        rows = []
        for block, seed, episodes in blocks:
            rows += baseline_rows(
                spec.config, env, env.default_params, seed, episodes, spec.eval_max_steps, block
            )
        write_baselines(plan.out_dir, rows)
    check_headroom(plan.spec, path)


def check_headroom(spec: SweepSpec, path: Path) -> None:
    """A ConfigError at ``sweep.analysis.endpoint`` when the declared analysis reads the
    normalised score (``score``, ``auc``) and the baselines in ``path`` leave no headroom
    between random and the scripted policy (:func:`score_scale`), before anything trains."""
    needs = [e for e in spec.analysis.endpoints if e in DERIVED]
    if not spec.analysis.declared or not needs:
        return
    block = CHECKPOINT_BLOCK if needs == ["auc"] else EVAL_BLOCK
    where = f"scenario {spec.scenario}: " if spec.scenario else ""
    try:
        score_scale(baseline_levels(path, block), where)
        if "auc" in needs:
            score_scale(baseline_levels(path, CHECKPOINT_BLOCK), where)
    except NoHeadroom as err:
        raise ConfigError(spec.path, "sweep.analysis.endpoint", needs[0], str(err)) from None


def before_training(plan: SweepPlan, writer: Writer, monitors: dict) -> None:
    """Process 0's stages before anything trains: the monitor's settings into sweep.json,
    then :func:`audit_stage` and :func:`baselines_stage`."""
    writer.write_description(
        monitor=describe_monitors(plan.spec.config, monitors), audit=plan.spec.audit
    )
    audit_stage(plan)
    baselines_stage(plan)


def choose_chunk_size(
    plan: SweepPlan, recorded: int | None, memory_budget_bytes: int | str | None
) -> tuple[int, int | None]:
    """``(chunk, budget)``: the runs per compiled call to start from, a multiple of the
    devices, and the memory budget per device it is to be shrunk to (None: the chunk is
    fixed). A resumed sweep keeps its ``recorded`` chunk size (the same program), then
    ``spec.chunk_size``; else every run at once within the budget (process 0's), or
    ``CPU_CHUNKS`` chunks on CPU without a set budget."""
    total, n_dev = plan.total, plan.devices
    if recorded is not None:
        return recorded, None
    if plan.spec.chunk_size is not None:
        return int(math.ceil(min(plan.spec.chunk_size, total) / n_dev)) * n_dev, None
    budget = distributed.share(memory_budget(memory_budget_bytes))  # process 0's
    given = memory_budget_bytes is not None or bool(os.environ.get(MEMORY_BUDGET_ENV))
    if jax.devices()[0].platform == "cpu" and not given:
        # a few cores gain little from a wider vmap: chunk for progress and early results
        return int(math.ceil(math.ceil(total / CPU_CHUNKS) / n_dev)) * n_dev, budget
    return int(math.ceil(total / n_dev)) * n_dev, budget


def unfinished_chunks(writer: Writer, total: int, chunk: int) -> list[int]:
    """Indices of the chunks of ``chunk`` runs the output directory does not hold yet."""
    done = set(writer.finished())
    return [i for i in range(math.ceil(total / chunk)) if i not in done]


@dataclasses.dataclass
class FinishedRuns:
    """The sweep's finished runs (process 0's; empty on the others): their results and
    training curves, kept in the output directory and logged to the trackers as each chunk
    finishes."""

    writer: Writer
    recorder: SweepRecorder
    results: dict[tuple[str, int], dict[str, float]] = dataclasses.field(default_factory=dict)
    curves: dict[tuple[str, int], list] = dataclasses.field(default_factory=dict)

    def read_back(self) -> None:
        """Take in the chunks the output directory already holds (a resumed sweep)."""
        for index in self.writer.finished():
            results, curves = self.writer.read_chunk(index)
            self.results.update(results)
            self.curves.update(curves)

    def keep(self, index: int, first: int, scored: list[ScoredRun]) -> None:
        """Chunk ``index``'s scored runs (from run ``first``): into the tables, to the
        trackers, then committed to the output directory."""
        for arm, seed, result, curve in scored:
            self.results[arm, seed], self.curves[arm, seed] = result, curve
            self.recorder.add(arm, seed, result, curve)
        self.writer.add_chunk(index, first, scored)


def compile_sweep(
    plan: SweepPlan, writer: Writer, chunk: int, budget: int | None
) -> tuple[Any, int, float]:
    """``(compiled, chunk, seconds)``: the train-then-evaluate program compiled for a chunk
    (:func:`compile_chunk`, shrunk to the ``budget``), every process at process 0's size;
    the chunk size is committed and sweep.json gains the compile time and program size.
    With the sequential layout the program takes one run per device, and ``chunk`` runs
    are committed together."""
    start = time.perf_counter()
    program = make_program(plan.train_fn, plan.eval_fn)
    if plan.layout == "sequential":
        compiled, _, need = compile_chunk(program, plan.keys, plan.inputs, plan.devices, plan.mesh)
        budget = None
    else:
        compiled, chunk, need = compile_chunk(
            program, plan.keys, plan.inputs, chunk, plan.mesh, budget
        )
    agreed = distributed.share(chunk)
    if agreed != chunk and plan.layout == "vmap":  # another process measured otherwise
        compiled, chunk, need = compile_chunk(program, plan.keys, plan.inputs, agreed, plan.mesh)
    chunk = agreed
    seconds = time.perf_counter() - start
    writer.set_chunk_size(chunk)
    writer.set_layout(plan.layout)
    writer.write_description(
        chunk_size=chunk,
        compile_seconds=round(seconds, 2),
        memory_budget_bytes=budget,
        program_bytes_per_device=need,
    )
    return compiled, chunk, seconds


def train_chunk(
    plan: SweepPlan, compiled: Any, index: int, chunk: int, number: int
) -> tuple[int, int, Any, Any]:
    """Train and evaluate chunk ``index`` (its ``number``-th of this call): ``(first, real,
    metrics, episodes)``, the index of its first run, how many runs are real (the last chunk
    is padded with its last run) and the host copies of the outputs (a collective).

    The vmap layout trains the chunk in one call. The sequential layout dispatches one call
    per run (per device), all before the first is read back, so the device never waits on
    the host between runs; only the real runs are trained."""
    first = index * chunk
    real = min(chunk, plan.total - first)
    per_call = chunk if plan.layout == "vmap" else plan.devices
    calls = math.ceil(real / per_call)
    positions = np.minimum(np.arange(first, first + calls * per_call), plan.total - 1)
    keys = np.asarray(plan.keys)
    outputs = []
    for start in range(0, calls * per_call, per_call):
        at = positions[start : start + per_call]
        outputs.append(compiled(*shard_global((keys[at], take(plan.inputs, at)), plan.mesh)))
    fault(f"chunk:{number}")  # testing hook: killed while a chunk runs
    outputs = [to_host(out) for out in outputs]
    metrics, episodes = jax.tree.map(lambda *xs: np.concatenate(xs), *outputs)
    return first, real, metrics, episodes


def score_runs(
    plan: SweepPlan, monitors: dict, metrics: Any, episodes: Any, first: int, count: int
) -> list[ScoredRun]:
    """The first ``count`` runs of a trained chunk (starting at run ``first``): each one's
    evaluation metrics, training curve and reward-hacking monitor columns."""
    scored = []
    for j in range(count):
        arm, seed = plan.runs[first + j]
        result = run_metrics(plan.env, take(episodes, j), plan.horizon)
        run = take(metrics, j)
        curve = curve_rows(plan.env, run, plan.env_steps_per_update)
        result.update(monitor_run(monitors[arm], seed, curve))
        if "checkpoints" in run:  # the evaluation curve (sweep.checkpoints)
            updates = int(np.asarray(run["active"]).shape[0])
            curve += checkpoint_rows(
                run["checkpoints"], plan.horizon, updates, plan.env_steps_per_update
            )
        scored.append((arm, seed, result, curve))
    return scored


def train_chunks(
    plan: SweepPlan,
    compiled: Any,
    chunk: int,
    todo: list[int],
    *,
    monitors: dict,
    finished: FinishedRuns,
    stop: Callable[[], bool],
    progress: bool,
) -> tuple[int, bool]:
    """Train, score and keep the ``todo`` chunks in order, asking ``stop()`` before each:
    ``(chunks run, stopped)``. Without a ``compiled`` program (stopped before compiling)
    nothing runs. ``progress``: a progress bar over every run of the sweep."""
    from tqdm.auto import tqdm

    lead = distributed.is_writer()
    bar = tqdm(
        total=plan.total,
        unit="run",
        desc="sweep",
        disable=not progress,
        initial=len(finished.results),
    )
    ran, stopped = 0, False
    for index in todo:
        if compiled is None or stop():
            stopped = True
            break
        first, real, metrics, episodes = train_chunk(plan, compiled, index, chunk, ran + 1)
        scored = score_runs(plan, monitors, metrics, episodes, first, real if lead else 0)
        finished.keep(index, first, scored)
        ran += 1
        fault(f"between:{ran}")  # testing hook: killed between chunks
        bar.update(real)
        if lead:
            rates = [r["capture_rate"] for r in finished.results.values()]
            bar.set_postfix(capture_rate=f"{np.mean(rates):.2f}")
    bar.close()
    return ran, stopped


def stop_signal(should_stop: Callable[[], bool] | None) -> Callable[[], bool]:
    """``should_stop`` asked on every process; true on all when true on any, so every
    process stops at the same chunk."""
    asked = (lambda: False) if should_stop is None else should_stop
    return lambda: distributed.any_process(asked())


def run_scenarios(
    spec: ScenarioSweep,
    output_dir: str | Path | None = None,
    report: bool = True,
    *,
    resume: bool = False,
    overwrite: bool = False,
    source: dict | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Run a sweep with ``scenarios``: each scenario's sweep in turn, in its own directory
    ``OUT/<scenario>`` (:func:`run_sweep`, with ``kwargs``), then the family's analysis over
    all of them at the top (report.md, comparisons.csv). The top directory's manifest.json
    holds the identity of the whole (every scenario's) and ``source``, for ``--resume``; a
    resumed scenario sweep resumes where its own manifest is, and starts where none is yet.

    Returns ``{"scenarios": {name: run_sweep's summary}, "seconds", "output_dir",
    "stopped", "report"}``, the summaries of the scenarios that ran (it stops at the first
    one that stops)."""
    out = prepare_output_dir(Path(output_dir or spec.output_dir), "sweep directory")
    lead = distributed.is_writer()
    names = (MANIFEST, DESCRIPTION, "report.md", COMPARISONS_FILE, *spec.scenarios)
    identity = identity_hash(
        {
            name: {k: v for k, v in sub.describe().items() if k not in ("sweep", "config")}
            for name, sub in spec.scenarios.items()
        }
    )
    if lead:
        if resume:
            resumed_manifest(out, identity)
        else:
            clear_output(out, names, "sweep", overwrite, f"--resume {out}")
            write_json(
                out / MANIFEST,
                {"format": MANIFEST_FORMAT, "identity": identity, "source": source},
                indent=1,
            )
    summaries, seconds, stopped = {}, 0.0, False
    for name, sub in spec.scenarios.items():
        where = out / name
        again = resume and (where / MANIFEST).is_file()
        summary = run_sweep(
            sub, output_dir=where, report=report, resume=again, overwrite=False, **kwargs
        )
        summaries[name] = summary
        seconds += _recorded_seconds(where)
        if summary["stopped"]:
            stopped = True
            break
    result: dict[str, Any] = {
        "scenarios": summaries,
        "seconds": seconds,
        "output_dir": str(out),
        "stopped": stopped,
    }
    if lead:
        write_json(out / DESCRIPTION, dict(spec.describe(), seconds=round(seconds, 2)), indent=2)
        if report and not stopped:
            from ppage_jax.analysis.sweep.report import write_report

            result["report"] = str(write_report(out))
    return result


def _recorded_seconds(directory: Path) -> float:
    """The ``seconds`` a sweep directory's sweep.json records (0 when none)."""
    try:
        return float(json.loads((directory / DESCRIPTION).read_text()).get("seconds") or 0.0)
    except (OSError, ValueError):
        return 0.0


def run_sweep(
    spec: SweepSpec | ScenarioSweep,
    train_fn: TrainFn | None = None,
    eval_fn: EvalFn | None = None,
    env_steps_per_update: int | None = None,
    output_dir: str | Path | None = None,
    progress: bool = True,
    report: bool = True,
    loggers: Sequence[str] = (),
    *,
    resume: bool = False,
    overwrite: bool = False,
    should_stop: Callable[[], bool] | None = None,
    source: dict | None = None,
    memory_budget_bytes: int | str | None = None,
    layout: str | None = None,
) -> dict[str, Any]:
    """Run every (arm, seed) of ``spec``; write results as chunks finish; return a summary.

    ``train_fn``/``eval_fn`` default to the config's training algorithm and greedy
    evaluation on the held-out block (:func:`trainer_functions`); pass your own to sweep
    anything with the same contract. Chunks: ``spec.chunk_size`` runs per call, else as many
    runs as fit the memory budget: ``memory_budget_bytes`` (bytes or ``"512M"``) or
    ``PPAGE_JAX_MEMORY_BUDGET`` when set, else 70 % of the device's memory
    (:func:`~ppage_jax.analysis.batch.program.memory_budget`), starting from ``CPU_CHUNKS``
    chunks on CPU without a set budget (for the progress bar and early results).
    ``layout`` (``"vmap"``, the default, or ``"sequential"``: :func:`choose_layout`) says
    whether a chunk trains as one vmapped program or run after run in a program compiled
    for one run: the same computation, rounded differently by XLA, so learned runs differ
    in their floats between layouts (a resumed sweep keeps its layout).
    ``loggers`` (``ppage_jax.tracking`` backends) receive every run as it finishes.

    An output directory that already holds a sweep is refused
    (:class:`~ppage_jax.artifacts.OutputError`) unless ``resume`` (the same sweep: finished
    chunks are read back, the others run with the recorded chunk size, giving the same
    results.csv as an uninterrupted sweep) or ``overwrite``. ``should_stop()`` is asked
    between chunks; when true the sweep stops there (``summary["stopped"]``, no report).
    ``source`` (how to rebuild ``spec``) is recorded for ``ppage-jax sweep --resume``.

    With several processes the runs are split over every process's devices (a chunk is a
    multiple of the global device count); only process 0 writes, reports and logs, and
    its summary alone holds the results (the others' ``results`` and ``curves`` are empty).

    Returns ``{"runs", "results", "curves", "chunk_size", "chunks", "chunks_run", "layout",
    "compile_seconds", "seconds", "output_dir", "stopped"}`` (results: {(arm, seed):
    metrics}; ``chunks`` counts the finished chunks, ``chunks_run`` those run by this call).
    A :class:`~ppage_jax.analysis.sweep.spec.ScenarioSweep` runs through
    :func:`run_scenarios` and returns its summary.
    """
    if isinstance(spec, ScenarioSweep):  # one sweep per scenario, then the family
        return run_scenarios(
            spec,
            output_dir,
            report,
            resume=resume,
            overwrite=overwrite,
            source=source,
            train_fn=train_fn,
            eval_fn=eval_fn,
            env_steps_per_update=env_steps_per_update,
            progress=progress,
            loggers=loggers,
            should_stop=should_stop,
            memory_budget_bytes=memory_budget_bytes,
            layout=layout,
        )
    plan = plan_sweep(spec, train_fn, eval_fn, env_steps_per_update, output_dir, layout)
    lead = distributed.is_writer()
    writer = open_writer(plan, source, resume, overwrite)
    if writer.layout is not None and writer.layout != plan.layout:  # a resumed sweep's
        if layout is not None:
            raise ValueError(
                f"layout {layout!r} differs from the sweep's {writer.layout!r}: a resumed "
                f"sweep keeps its layout (the two give different floats)"
            )
        plan = dataclasses.replace(plan, layout=writer.layout)
        writer.write_description(layout=plan.layout)
    finished = FinishedRuns(writer, SweepRecorder(loggers if lead else (), plan.out_dir, spec))
    say = status if progress and lead else (lambda *_: None)
    say(f"the monitors' start: random actions under each of {len(plan.arm_names)} arms")
    monitors = (
        arm_monitors(spec.config, plan.env, plan.arm_params, plan.arm_names, spec.eval_seed)
        if lead
        else {}
    )
    if lead:
        if spec.audit and not (plan.out_dir / AUDIT_FILE).is_file():
            say(f"auditing the rewards of {len(plan.arm_names)} arms with baseline policies")
        if not (plan.out_dir / BASELINES_FILE).is_file():
            say(f"the baselines on {spec.eval_episodes} held-out layouts")
        before_training(plan, writer, monitors)
    chunk, budget = choose_chunk_size(plan, writer.chunk_size, memory_budget_bytes)
    finished.read_back()
    stop = stop_signal(should_stop)

    start = time.perf_counter()
    compiled, compile_seconds = None, 0.0
    todo = unfinished_chunks(writer, plan.total, chunk)
    if todo and not stop():
        say(f"compiling the sweep's program (chunks of {chunk} runs: train, then evaluate)")
        compiled, chunk, compile_seconds = compile_sweep(plan, writer, chunk, budget)
        todo = unfinished_chunks(writer, plan.total, chunk)
    ran, stopped = train_chunks(
        plan,
        compiled,
        chunk,
        todo,
        monitors=monitors,
        finished=finished,
        stop=stop,
        progress=progress and lead,
    )
    if not todo:
        writer.write_tables()  # a kill may have come before they were written
    seconds = time.perf_counter() - start
    writer.write_description(
        seconds=round(writer.seconds_before + seconds, 2), chunks=len(writer.finished())
    )
    summary = {
        "runs": plan.runs,
        "results": finished.results,
        "curves": finished.curves,
        "chunk_size": chunk,
        "chunks": len(writer.finished()),
        "chunks_run": ran,
        "layout": plan.layout,
        "compile_seconds": compile_seconds,
        "seconds": seconds,
        "output_dir": str(plan.out_dir),
        "stopped": stopped,
    }
    if report and lead and not stopped:
        from ppage_jax.analysis.sweep.report import write_report

        summary["report"] = str(write_report(plan.out_dir))
    return summary
