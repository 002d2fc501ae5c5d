"""Population-based training (PBT) as a search strategy: the reward weights change while the
population trains, and the result is a schedule of weights.

``pbt.population`` members train side by side in one vmapped program, each from its own key
(member ``m`` from ``PRNGKey(train_seed + m)``) and its own traced reward weights, term
params and hyperparameters (the searched keys), drawn at the start from the start
distribution every strategy shares (:mod:`.strategies`). The run is cut into intervals of
``pbt.interval`` updates; the interval program is compiled once and called once per
interval (no recompile: everything that changes is traced). Between intervals, on the host:

1. each member is scored on the **task metric of its rolling block of episodes** (the
   training episodes that finished in the interval just trained, episode-weighted: the
   mean episode length for the time metrics, the capture rate, or the share not captured;
   never the shaped return);
2. the reward-hacking monitor (``experiment.monitor``'s frozen settings) reads each member's
   whole training curve (its lineage's: the curve of the learner it continues), and a member
   it flags (any of the constraint's checks) is infeasible, as is one whose design breaks
   the stall-margin constraint; infeasible members rank last;
3. **exploit**: each member of the worst ``quarter`` copies the learner of a member of the
   best quarter (drawn from a generator seeded by the search seed and the interval): the
   network parameters, the optimiser state and every other learner field of the runner
   state (:func:`exploit`; the member keeps its own grids, random key and counters);
4. **explore**: it takes the copied member's values, each multiplied by ``perturb`` or by
   its inverse (a fair coin per key), clipped to the box (:func:`perturb`). A perturbation
   that breaks the stall-margin constraint is dropped (the copy keeps the values unchanged).

The exploit itself runs inside the interval program (a gather over the member axis before
the updates); the host only chooses who copies whom. After the last interval every member
is evaluated on the search's held-out layouts (one more compiled program), the best
feasible member is selected, and its lineage's values per interval become a schedule:
``experiment.curriculum`` step schedules (:func:`schedule_curriculum`) in ``config.yaml``,
which ``ppage-jax run config.yaml`` replays from scratch; the re-evaluation retrains that
schedule on the fresh seeds and layouts.

Every interval is committed as it finishes (its record, its curves and the population's
state, then the manifest), so a killed search resumes from the last finished interval and
ends byte-identical to an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.analysis.audit.margin import stall_margins
from ppage_jax.analysis.batch.metrics import curve_rows, run_metrics
from ppage_jax.analysis.batch.monitoring import arm_monitors, monitor_run
from ppage_jax.analysis.batch.output import cell, csv_text, float_value
from ppage_jax.analysis.batch.program import take
from ppage_jax.analysis.batch.spec import Arm
from ppage_jax.analysis.batch.trainers import EvalFn
from ppage_jax.analysis.search.constraint import flagged_checks, margin_reason
from ppage_jax.analysis.search.space import Dimension, candidate_arm, candidate_values
from ppage_jax.analysis.search.spec import PBTSettings, SearchSpec, load_search
from ppage_jax.analysis.search.strategies import Strategy
from ppage_jax.analysis.search.writer import (
    open_search_writer,
    read_csv,
    write_above_bar,
)
from ppage_jax.artifacts import OutputError, fault, write_json, write_text
from ppage_jax.config import Config, load_config
from ppage_jax.env import GridWorld, make
from ppage_jax.state import EnvParams

PICK = "pick.json"  # the selected design or schedule, in one form for every strategy
FINAL = "final.json"  # every member on the search's held-out layouts

# Runner-state fields a member keeps when it copies another's learner: its grids, its random
# key and its counters. Every other field (networks, optimiser states, return scales) is
# the learner, and is copied.
OWN_FIELDS = ("env", "key", "progress")
CURVE_HEADER = ("member", "update", "env_steps", "metric", "value")
InitFn = Callable[..., Any]  # init(key, tc, params) -> runner state (an algorithm's init)
UpdateFn = Callable[..., tuple[Any, dict]]  # update(runner, tc, params) -> (runner, row)


# --------------------------------------------------------------------------- exploit, explore
def learner_fields(runner: Any) -> tuple[str, ...]:
    """The fields of a runner state that make its learner (all but :data:`OWN_FIELDS`)."""
    return tuple(f.name for f in dataclasses.fields(runner) if f.name not in OWN_FIELDS)


def exploit(runner: Any, source: jax.Array) -> Any:
    """The population's runner state [M] in which member ``m`` holds member ``source[m]``'s
    learner (network parameters, optimiser state, every field but :data:`OWN_FIELDS`),
    copied exactly; ``source[m] == m`` keeps its own. A gather over the member axis: no host
    sync, jittable."""
    copied = {
        name: jax.tree.map(lambda x: jnp.take(x, source, axis=0), getattr(runner, name))
        for name in learner_fields(runner)
    }
    return runner.replace(**copied)


def exploit_plan(
    losses: Sequence[float], feasible: Sequence[bool], movers: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(source int32[M], replaced bool[M])``: the ``movers`` worst members (infeasible
    first, then by loss, lower is better, later members first on ties) each copy a member
    of the ``movers`` best, drawn uniformly; everyone else keeps its own learner."""
    loss = np.where(np.isnan(np.asarray(losses, np.float64)), np.inf, losses)
    ok = np.asarray(feasible, bool)
    order = sorted(range(len(loss)), key=lambda i: (not ok[i], loss[i], i))
    best, worst = order[:movers], order[len(order) - movers :]
    source = np.arange(len(loss), dtype=np.int32)
    replaced = np.zeros(len(loss), bool)
    for w in worst:
        source[w] = best[int(rng.integers(len(best)))]
        replaced[w] = True
    return source, replaced


def perturb(
    dims: Sequence[Dimension],
    values: np.ndarray,
    source: np.ndarray,
    replaced: np.ndarray,
    factor: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """float64[M, d]: the next interval's values. A replaced member takes its source's
    values, each multiplied by ``factor`` or by ``1 / factor`` (a fair coin per key) and
    clipped to the key's bounds; the others keep theirs."""
    values = np.asarray(values, np.float64)
    out = values.copy()
    low = np.array([d.low for d in dims])
    high = np.array([d.high for d in dims])
    for m in np.flatnonzero(replaced):
        scale = np.where(rng.random(len(dims)) < 0.5, factor, 1.0 / factor)
        out[m] = np.clip(values[source[m]] * scale, low, high)
    return out


def block_score(metrics: Mapping[str, Any], metric: str) -> float:
    """The task metric of one member's rolling block of training episodes (its metrics rows
    of one interval), episode-weighted: the mean episode length (``rmst``, ``km_median``,
    ``episode_length``: truncated episodes count at the step limit), the capture rate, or
    the share not captured (``truncated_share``). NaN when no episode finished."""
    episodes = np.asarray(metrics["episodes"], np.float64)
    if "active" in metrics:
        episodes = np.where(np.asarray(metrics["active"], bool), episodes, 0.0)
    name = "capture_rate" if metric in ("capture_rate", "truncated_share") else "episode_length"
    values = np.asarray(metrics[name], np.float64)
    weights = np.where(np.isfinite(values), episodes, 0.0)
    if weights.sum() <= 0:
        return math.nan
    mean = float((weights * np.nan_to_num(values)).sum() / weights.sum())
    return 1.0 - mean if metric == "truncated_share" else mean


# --------------------------------------------------------------------------- the schedule
def curriculum_key(dim: Dimension) -> str:
    """The ``experiment.curriculum`` leaf a searched key schedules."""
    if dim.kind == "weights":
        return f"reward.weights.{dim.name}"
    if dim.kind == "params":
        return f"reward.term_params.{dim.name}.{dim.param_name}"
    return dim.name  # a traced hyperparameter, by name


def schedule_curriculum(
    dims: Sequence[Dimension],
    history: Sequence[Sequence[float]],
    interval: int,
    env_steps_per_update: int,
) -> dict[str, dict[str, Any]]:
    """``experiment.curriculum`` replaying a lineage's values per interval (``history[i]``:
    the values of interval ``i``): one ``step`` schedule per searched key, switching at the
    env steps each interval starts (``constant`` for a single interval)."""
    bounds = [i * interval * env_steps_per_update for i in range(1, len(history))]
    out: dict[str, dict[str, Any]] = {}
    for k, dim in enumerate(dims):
        values = [float(h[k]) for h in history]
        if len(values) == 1:
            out[curriculum_key(dim)] = {"schedule": "constant", "value": values[0]}
        else:
            out[curriculum_key(dim)] = {"schedule": "step", "values": values, "boundaries": bounds}
    return out


def schedule_config(spec: SearchSpec, curriculum: Mapping[str, Any]) -> Config:
    """The search's config replaying ``curriculum`` (every searched key scheduled)."""
    return spec.config.with_overrides({"experiment.curriculum": dict(curriculum)})


# --------------------------------------------------------------------------- the programs
@dataclasses.dataclass
class PBTProgram:
    """The compiled programs of a population: ``init`` (every member's runner state),
    ``interval`` (exploit, then ``pbt.interval`` updates of every member) and ``evaluate``
    (every member on the search's held-out layouts), each compiled once for the
    population's shapes; ``traces`` counts how often each was traced."""

    init: Any
    interval: Any
    evaluate: Any
    env_steps_per_update: int
    traces: dict[str, int]


_PROGRAMS: dict[tuple, PBTProgram] = {}


def pbt_program(
    spec: SearchSpec,
    env: GridWorld,
    init_fn: InitFn | None = None,
    update_fn: UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
) -> PBTProgram:
    """The population's programs (kept for the process, keyed by what their code depends
    on, so a resumed search in the same process reuses them). ``init_fn``/``update_fn``
    default to the config's algorithm, ``eval_fn`` to the search's held-out block."""
    from ppage_jax.analysis.batch.trainers import trainer_functions
    from ppage_jax.train.kit.loop import run_updates
    from ppage_jax.train.kit.traced import bind
    from ppage_jax.train.registry import algorithm
    from ppage_jax.train.run.experiment import make_train_config

    settings = _settings(spec)
    key = (
        spec.config.hash(),
        spec.eval_seed,
        spec.eval_episodes,
        spec.eval_max_steps,
        spec.eval_policy,
        settings.interval,
        id(init_fn),
        id(update_fn),
        id(eval_fn),
    )
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    tc = make_train_config(spec.config, env)
    module = algorithm(tc.algorithm)
    init_one = init_fn or module.init
    update_one = update_fn or module.update
    _, default_eval, steps = trainer_functions(spec.sweep(), env)
    eval_one = eval_fn or default_eval
    traces = {"init": 0, "interval": 0, "evaluate": 0}
    length = settings.interval

    def init_all(keys: jax.Array, params: EnvParams, hyper: dict) -> Any:
        traces["init"] += 1
        return jax.vmap(lambda k, p, h: init_one(k, bind(tc, h), p))(keys, params, hyper)

    def interval_all(runner: Any, source: jax.Array, params: EnvParams, hyper: dict) -> Any:
        traces["interval"] += 1
        runner = exploit(runner, source)
        return jax.vmap(lambda r, p, h: run_updates(update_one, r, tc, p, length, None, h))(
            runner, params, hyper
        )

    def evaluate_all(runner: Any, params: EnvParams) -> dict:
        traces["evaluate"] += 1
        return jax.vmap(eval_one)(runner, params)

    program = PBTProgram(
        jax.jit(init_all), jax.jit(interval_all), jax.jit(evaluate_all), steps, traces
    )
    _PROGRAMS[key] = program
    return program


def _settings(spec: SearchSpec) -> PBTSettings:
    if spec.pbt is None:
        raise ValueError(f"{spec.path}: the search has no pbt settings")
    return spec.pbt


def member_inputs(
    spec: SearchSpec, env: GridWorld, values: np.ndarray
) -> tuple[list[Arm], EnvParams, dict[str, jax.Array], list[EnvParams]]:
    """Each member's design at ``values`` [M, d]: the arms, their stacked EnvParams [M],
    their traced hyperparameters (name -> float32[M]) and the per-member EnvParams."""
    arms = [candidate_arm(spec.design, spec.dims, v, f"m{m:02d}") for m, v in enumerate(values)]
    sweep = spec.sweep(tuple(arms))
    params = sweep.arm_params(env)
    hyper = sweep.arm_hyperparams()
    names = list(hyper[0]) if hyper and hyper[0] else []
    stacked_hyper = {n: jnp.asarray([h[n] for h in hyper], jnp.float32) for n in names}
    return arms, jax.tree.map(lambda *xs: jnp.stack(xs), *params), stacked_hyper, params


# --------------------------------------------------------------------------- saved state
def state_bytes(runner: Any) -> bytes:
    """The population's runner state as ``.npz`` bytes (its leaves in tree order)."""
    buffer = io.BytesIO()
    leaves = [np.asarray(x) for x in jax.tree.leaves(runner)]
    np.savez(buffer, *leaves)
    return buffer.getvalue()


def load_state(path: Path, template: Any) -> Any:
    """A runner state saved by :func:`state_bytes`, in ``template``'s tree structure."""
    with np.load(path) as saved:
        leaves = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    treedef = jax.tree.structure(template)
    if treedef.num_leaves != len(leaves):
        raise OutputError(f"{path}: the saved population does not match this search")
    return jax.tree.unflatten(treedef, [jnp.asarray(x) for x in leaves])


# --------------------------------------------------------------------------- the population
@dataclasses.dataclass
class Population:
    """The host's view of the population after some intervals: each member's values of the
    next interval, whom it copies at its start, and its lineage (the first member of it,
    its values per interval, its training curve) so far."""

    values: np.ndarray  # float64[M, d]: the values the next interval trains with
    source: np.ndarray  # int32[M]: whose learner each member takes at the next interval
    roots: list[int]
    history: list[list[list[float]]]  # member -> interval -> values
    curves: list[list[tuple[int, int, str, float]]]  # member -> its lineage's curve
    feasible: list[bool]
    reasons: list[str]
    scores: list[float]  # the last block's task metric

    def advance(self, rows: list[list[tuple[int, int, str, float]]]) -> None:
        """The lineages after an interval trained with ``values`` from ``source``'s learners
        (``rows``: each member's own curve rows of the interval)."""
        src = self.source
        self.roots = [self.roots[s] for s in src]
        self.history = [
            [*self.history[s], [float(v) for v in self.values[m]]] for m, s in enumerate(src)
        ]
        self.curves = [[*self.curves[s], *rows[m]] for m, s in enumerate(src)]


def interval_rows(
    env: GridWorld, metrics: dict, member: int, offset: int, env_steps_per_update: int
) -> list[tuple[int, int, str, float]]:
    """Member ``member``'s curve rows of one interval, numbered from update ``offset``."""
    rows = curve_rows(env, take(metrics, member), env_steps_per_update)
    return [(u + offset, s + offset * env_steps_per_update, k, v) for u, s, k, v in rows]


def run_pbt(
    spec: SearchSpec | str | Path,
    output_dir: str | Path | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    report: bool = True,
    references: bool = True,
    evaluate: bool = True,
    should_stop: Callable[[], bool] | None = None,
    init_fn: InitFn | None = None,
    update_fn: UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the PBT search ``spec`` (strategy ``pbt``; see the module docstring) into
    ``output_dir`` (default: the spec's), resuming or overwriting as
    :func:`~ppage_jax.analysis.search.run.search_rewards` does. ``init_fn``/``update_fn``
    replace the config's algorithm (an algorithm's ``init``/``update``; tests count traces
    with them), ``eval_fn`` the held-out evaluation. ``evaluate=False`` stops after the
    intervals (no final evaluation, no re-evaluation); ``references=False`` re-evaluates the
    selected schedule alone.

    Returns ``{"candidates", "best", "population", "runner", "reevaluation", "generations_run",
    "compile_calls", "traces", "seconds", "output_dir", "stopped", "report"}``
    (``generations_run``: intervals run now; ``compile_calls``: traces of the interval
    program in this call)."""
    from tqdm.auto import tqdm

    if not isinstance(spec, SearchSpec):
        spec = load_search(spec)
    if spec.strategy != "pbt":
        raise ValueError(f"{spec.path}: strategy {spec.strategy!r} is not pbt")
    settings = _settings(spec)
    say = log or write_above_bar
    env = make(spec.config)
    program = pbt_program(spec, env, init_fn, update_fn, eval_fn)
    traced_before = program.traces["interval"]
    steps = program.env_steps_per_update
    horizon = spec.step_limit(env)
    out_dir = Path(output_dir or spec.output_dir)
    writer = open_search_writer(spec, out_dir, steps, horizon, resume=resume, overwrite=overwrite)
    if resume and evaluate and not writer.reevaluated and (out_dir / PICK).is_file():
        # killed during the re-evaluation: the pick and its schedule are written, and the
        # re-evaluation needs nothing else (not the population's state)
        return _reevaluate_written(spec, env, writer, out_dir, steps, progress, references, say)
    members = settings.population
    seeds = [spec.train_seed + m for m in range(members)]
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    unit = Strategy("pbt", members, len(spec.dims), spec.seed, spec.start, spec.std).ask()
    first = candidate_values(spec.dims, unit)
    _, params0, hyper0, member_params = member_inputs(spec, env, first)
    monitors = list(
        arm_monitors(
            spec.config, env, member_params, [f"m{m:02d}" for m in range(members)], spec.eval_seed
        ).values()
    )
    pop = Population(
        values=first,
        source=np.arange(members, dtype=np.int32),
        roots=list(range(members)),
        history=[[] for _ in range(members)],
        curves=[[] for _ in range(members)],
        feasible=[True] * members,
        reasons=[""] * members,
        scores=[math.nan] * members,
    )
    finished = writer.finished()
    candidates: list[dict] = []
    for g in finished:  # replay the host's bookkeeping from the committed intervals
        record = writer.read_generation(g)
        rows = _read_curves(writer.generation_file(g, "curves.csv"), members)
        pop.values = np.asarray([c["values"] for c in record["candidates"]], np.float64)
        pop.source = np.asarray([c["source"] for c in record["candidates"]], np.int32)
        pop.advance(rows)
        _apply_verdicts(pop, record["candidates"])
        candidates.extend(record["candidates"])
        if "next" in record:
            pop.values = np.asarray(record["next"]["values"], np.float64)
            pop.source = np.asarray(record["next"]["source"], np.int32)
    if finished:
        template = jax.eval_shape(program.init, keys, params0, hyper0)
        runner = load_state(writer.generation_file(finished[-1], "state.npz"), template)
    else:
        runner = program.init(keys, params0, hyper0)
    todo = [g for g in range(settings.intervals) if g not in set(finished)]
    asked_stop = should_stop or (lambda: False)
    bar = tqdm(
        total=settings.intervals,
        initial=settings.intervals - len(todo),
        unit="interval",
        desc="pbt",
        disable=not progress,
    )
    start = time.perf_counter()
    ran, stopped = 0, False
    for g in todo:
        if asked_stop():
            stopped = True
            break
        arms, params, hyper, member_params = member_inputs(spec, env, pop.values)
        runner, metrics = program.interval(runner, jnp.asarray(pop.source), params, hyper)
        metrics = jax.tree.map(np.asarray, metrics)
        fault(f"generation:{ran + 1}")  # testing hook: killed after an interval's program
        offset = g * settings.interval
        rows = [interval_rows(env, metrics, m, offset, steps) for m in range(members)]
        used_values, used_source = pop.values.copy(), pop.source.copy()
        pop.advance(rows)
        record_cands, results = _judge(spec, env, pop, metrics, member_params, monitors, seeds, g)
        _apply_verdicts(pop, record_cands)
        for m, c in enumerate(record_cands):
            c.update(
                unit=[d.unit(v) for d, v in zip(spec.dims, used_values[m], strict=True)],
                values=[float(v) for v in used_values[m]],
                source=int(used_source[m]),
            )
        losses = [c["loss"] for c in record_cands]
        record: dict[str, Any] = {
            "generation": g,
            "strategy": "pbt",
            "keys": [d.key for d in spec.dims],
            "metric": spec.metric,
            "candidates": record_cands,
            "fitness": [float(c["rank"]) for c in record_cands],
            "strategy_mean": None,
        }
        if g + 1 < settings.intervals:
            rng = np.random.default_rng([spec.seed, g + 1])
            source, replaced = exploit_plan(losses, pop.feasible, settings.movers, rng)
            values = perturb(spec.dims, used_values, source, replaced, settings.perturb, rng)
            values = _keep_margin(spec, env, used_values, values, source, replaced)
            pop.values, pop.source = values, source
            record["next"] = {
                "source": [int(s) for s in source],
                "values": [[float(v) for v in row] for row in values],
                "replaced": [int(m) for m in np.flatnonzero(replaced)],
            }
        curves = [(m, *row) for m in range(members) for row in rows[m]]
        writer.add_generation(
            g,
            record,
            results,
            [],
            {
                "curves.csv": csv_text(
                    CURVE_HEADER, [(m, u, s, k, cell(v)) for m, u, s, k, v in curves]
                ),
                "state.npz": state_bytes(runner),
            },
        )
        if g > 0:  # only the last interval's population is needed to resume
            writer.generation_file(g - 1, "state.npz").unlink(missing_ok=True)
        candidates.extend(record_cands)
        ran += 1
        bar.update(1)
    bar.close()
    seconds = time.perf_counter() - start
    summary: dict[str, Any] = {
        "candidates": candidates,
        "population": pop,
        "runner": runner,
        "generations_run": ran,
        "compile_calls": program.traces["interval"] - traced_before,
        "traces": dict(program.traces),
        "output_dir": str(out_dir),
        "stopped": stopped,
        "best": None,
        "reevaluation": None,
    }
    if stopped or len(writer.finished()) < settings.intervals or not evaluate:
        summary["seconds"] = seconds
        writer.write_description(search_seconds=round(writer.previous_seconds + seconds, 2))
        return summary
    final = _final(spec, env, program, runner, pop, out_dir, horizon, writer.reevaluated)
    best = final["members"][final["pick"]]
    summary["best"] = best
    curriculum = schedule_curriculum(spec.dims, best["schedule"], settings.interval, steps)
    config = schedule_config(spec, curriculum)
    _write_pick(out_dir, spec, best, config)
    if not best["feasible"]:
        say(
            f"pbt: no member was feasible; the re-evaluation takes {best['name']} "
            f"({best['reason']})"
        )
    if not writer.reevaluated:
        from ppage_jax.analysis.search.reevaluate import reevaluate

        say(
            f"pbt: re-evaluating {best['name']}'s schedule ({spec.metric} {best['metric']:.4g} "
            "in the search) on fresh seeds and layouts"
        )
        arm = candidate_arm(spec.design, spec.dims, best["schedule"][0], "selected")
        re_results, re_episodes = reevaluate(
            spec,
            env,
            arm,
            horizon,
            progress,
            (),
            out_dir,
            None,
            steps,
            schedule=config,
            references=references,
        )
        writer.write_reevaluation(re_results, re_episodes)
        summary["reevaluation"] = re_results
    seconds = time.perf_counter() - start
    summary["seconds"] = seconds
    summary["traces"] = dict(program.traces)
    writer.write_description(search_seconds=round(writer.previous_seconds + seconds, 2))
    if report:
        from ppage_jax.analysis.search.report import write_pbt_report

        summary["report"] = str(write_pbt_report(out_dir, spec))
    return summary


def _read_curves(path: Path, members: int) -> list[list[tuple[int, int, str, float]]]:
    rows: list[list[tuple[int, int, str, float]]] = [[] for _ in range(members)]
    for row in read_csv(path):
        rows[int(row["member"])].append(
            (int(row["update"]), int(row["env_steps"]), row["metric"], float_value(row["value"]))
        )
    return rows


def _apply_verdicts(pop: Population, cands: Sequence[Mapping]) -> None:
    pop.feasible = [bool(c["feasible"]) for c in cands]
    pop.reasons = [str(c["reason"]) for c in cands]
    pop.scores = [float(c["metric"]) for c in cands]


def _judge(
    spec: SearchSpec,
    env: GridWorld,
    pop: Population,
    metrics: dict,
    member_params: Sequence[EnvParams],
    monitors: Sequence[Any],
    seeds: Sequence[int],
    g: int,
) -> tuple[list[dict], dict]:
    """Each member's record of interval ``g`` (its block's task metric, the monitor's flags
    on its lineage's curve, the stall margin, feasibility, rank) and its results row."""
    records, results = [], {}
    for m in range(len(seeds)):
        score = block_score(take(metrics, m), spec.metric)
        result: dict[str, float] = {spec.metric: score}
        result.update(monitor_run(monitors[pop.roots[m]], seeds[m], pop.curves[m]))
        reasons = []
        checks = flagged_checks(result, spec.constraint.checks) if spec.constraint.monitor else []
        if checks:
            reasons.append(f"the reward-hacking monitor flagged its lineage ({', '.join(checks)})")
        if spec.constraint.stall_margin is not None:
            margin = margin_reason(
                stall_margins(env, member_params[m]), spec.constraint.stall_margin
            )
            if margin:
                reasons.append(margin.replace(" (not trained)", ""))
        name = f"i{g:02d}m{m:02d}"
        loss = -spec.direction * score if math.isfinite(score) else math.inf
        records.append(
            {
                "name": name,
                "generation": g,
                "index": m,
                "member": m,
                "root": int(pop.roots[m]),
                "seeds": [int(seeds[m])],
                "metric": score,
                "loss": loss,
                "flagged_seeds": {str(seeds[m]): len(checks)} if checks else {},
                "flagged_checks": {str(seeds[m]): checks} if checks else {},
                "feasible": not reasons,
                "reason": "; ".join(reasons),
                "audit_flags": [],
            }
        )
        results[name, int(seeds[m])] = result
    order = sorted(
        range(len(records)),
        key=lambda i: (not records[i]["feasible"], records[i]["loss"], i),
    )
    for rank, i in enumerate(order):
        records[i]["rank"] = rank
    return records, results


def _keep_margin(
    spec: SearchSpec,
    env: GridWorld,
    old: np.ndarray,
    new: np.ndarray,
    source: np.ndarray,
    replaced: np.ndarray,
) -> np.ndarray:
    """``new`` with each perturbation that breaks the stall-margin constraint dropped (the
    copy keeps its source's values)."""
    if spec.constraint.stall_margin is None:
        return new
    out = new.copy()
    _, _, _, params = member_inputs(spec, env, new)
    for m in np.flatnonzero(replaced):
        if margin_reason(stall_margins(env, params[m]), spec.constraint.stall_margin):
            out[m] = old[source[m]]
    return out


def _final(
    spec: SearchSpec,
    env: GridWorld,
    program: PBTProgram,
    runner: Any,
    pop: Population,
    out_dir: Path,
    horizon: int,
    done: bool,
) -> dict:
    """Every member evaluated on the search's held-out layouts (``final.json``; read back
    when the search already finished) and the selected member: the best feasible one by
    that score (earliest member on ties)."""
    path = out_dir / FINAL
    if done and path.is_file():
        return json.loads(path.read_text())
    last = np.asarray([h[-1] for h in pop.history], np.float64)
    _, params, _, _ = member_inputs(spec, env, last)
    episodes = jax.tree.map(np.asarray, program.evaluate(runner, params))
    members = []
    for m in range(len(pop.history)):
        value = float(run_metrics(env, take(episodes, m), horizon)[spec.metric])
        value = value if math.isfinite(value) else float(horizon)
        members.append(
            {
                "name": f"m{m:02d}",
                "member": m,
                "root": int(pop.roots[m]),
                "values": [float(v) for v in last[m]],
                "schedule": pop.history[m],
                "metric": value,
                "loss": -spec.direction * value,
                "block_metric": pop.scores[m],
                "feasible": pop.feasible[m],
                "reason": pop.reasons[m],
            }
        )
    order = sorted(
        range(len(members)), key=lambda i: (not members[i]["feasible"], members[i]["loss"], i)
    )
    final = {"members": members, "pick": order[0], "order": order}
    write_json(path, final, indent=1)
    return final


def _reevaluate_written(
    spec: SearchSpec,
    env: GridWorld,
    writer: Any,
    out_dir: Path,
    steps: int,
    progress: bool,
    references: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Re-evaluate the schedule a finished search wrote (``pick.json``, ``config.yaml``),
    then rewrite the report when the final evaluation's file is there."""
    from ppage_jax.analysis.search.reevaluate import reevaluate

    start = time.perf_counter()
    best = json.loads((out_dir / PICK).read_text())
    config = load_config(out_dir / "config.yaml")
    say(f"pbt: re-evaluating {best['name']}'s written schedule on fresh seeds and layouts")
    arm = candidate_arm(spec.design, spec.dims, best["schedule"][0], "selected")
    horizon = spec.step_limit(env)
    re_results, re_episodes = reevaluate(
        spec, env, arm, horizon, progress, (), out_dir, None, steps, config, references
    )
    writer.write_reevaluation(re_results, re_episodes)
    seconds = time.perf_counter() - start
    writer.write_description(search_seconds=round(writer.previous_seconds + seconds, 2))
    summary: dict[str, Any] = {
        "candidates": [],
        "best": best,
        "population": None,
        "runner": None,
        "generations_run": 0,
        "compile_calls": 0,
        "traces": {},
        "output_dir": str(out_dir),
        "stopped": False,
        "reevaluation": re_results,
        "seconds": seconds,
    }
    if (out_dir / FINAL).is_file():
        from ppage_jax.analysis.search.report import write_pbt_report

        summary["report"] = str(write_pbt_report(out_dir, spec))
    return summary


def _write_pick(out_dir: Path, spec: SearchSpec, best: dict, config: Config) -> None:
    """``config.yaml`` (the search's config replaying the selected schedule: ``ppage-jax run
    config.yaml``), ``rewards.yaml`` (its first interval's design, the schedule in a comment)
    and ``pick.json``."""
    from ppage_jax.analysis.search.reevaluate import replay_command
    from ppage_jax.analysis.search.report import rewards_yaml

    header = (
        f"# PBT's selected schedule ({Path(spec.path).name}, member {best['name']}): the "
        f"search's config with experiment.curriculum replaying its reward values per "
        "interval. Replay it with: ppage-jax run <this directory>/config.yaml\n"
        "# On the re-evaluation's seeds and layouts (the same bits as its re-evaluation): "
        f"{replay_command(spec, '<this directory>/config.yaml')}\n"
    )
    write_text(out_dir / "config.yaml", header + config.to_yaml())
    lines = ["# PBT's schedule, per interval of the run (experiment.curriculum in config.yaml):"]
    for i, values in enumerate(best["schedule"]):
        cells = ", ".join(f"{d.key}={v:.6g}" for d, v in zip(spec.dims, values, strict=True))
        lines.append(f"#   interval {i}: {cells}")
    text = rewards_yaml(spec, best["schedule"][0])
    write_text(out_dir / "rewards.yaml", "\n".join(lines) + "\n" + text)
    write_pick(out_dir, spec, best["name"], best["values"], best["metric"], best, best["schedule"])


def write_pick(
    out_dir: Path,
    spec: SearchSpec,
    name: str,
    values: Sequence[float],
    score: float,
    record: Mapping[str, Any],
    schedule: Sequence[Sequence[float]] | None = None,
) -> Path:
    """``pick.json``: the search's selected design (or schedule) in one form for every
    strategy: what the comparison of strategies reads."""
    return write_json(
        out_dir / PICK,
        {
            "strategy": spec.strategy,
            "name": name,
            "keys": [d.key for d in spec.dims],
            "values": [float(v) for v in values],
            "search_score": float(score),
            "metric": spec.metric,
            "feasible": bool(record.get("feasible", True)),
            "reason": str(record.get("reason", "")),
            "runs": spec.runs,
            "schedule": [list(map(float, row)) for row in schedule] if schedule else None,
        },
        indent=1,
    )
