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
   state (:func:`.programs.exploit`; the member keeps its own grids, random key and
   counters);
4. **explore**: it takes the copied member's values, each multiplied by ``perturb`` or by
   its inverse (a fair coin per key), clipped to the box (:func:`.programs.perturb`). A
   perturbation that breaks the stall-margin constraint is dropped (the copy keeps the
   values unchanged).

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

:func:`search_pbt` runs the stages in order on the search's plan (:mod:`.plan`):
:func:`start_population`, :func:`replay_intervals` (resume), :func:`start_runner`,
:func:`run_intervals` (each :func:`train_interval`, then :func:`next_interval`), and
:func:`pick_schedule`; the programs, exploit and explore are in :mod:`.programs`, the
members' scores and verdicts in :mod:`.constraint`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.analysis.batch.metrics import curve_rows, run_metrics
from ppage_jax.analysis.batch.monitoring import arm_monitors
from ppage_jax.analysis.batch.output import cell, csv_text, float_value
from ppage_jax.analysis.batch.program import take
from ppage_jax.analysis.batch.trainers import EvalFn
from ppage_jax.analysis.search.constraint import judge_members
from ppage_jax.analysis.search.plan import (
    SearchOptions,
    SearchPlan,
    finish,
    plan_search,
    reevaluate_pick,
)
from ppage_jax.analysis.search.programs import (
    InitFn,
    PBTProgram,
    UpdateFn,
    exploit_plan,
    keep_margin,
    load_state,
    member_inputs,
    pbt_program,
    pbt_settings,
    perturb,
    state_bytes,
)
from ppage_jax.analysis.search.sections import PBTSettings
from ppage_jax.analysis.search.space import Dimension, candidate_arm, candidate_values
from ppage_jax.analysis.search.spec import SearchSpec, load_search
from ppage_jax.analysis.search.strategies import Strategy
from ppage_jax.analysis.search.writer import PICK, SELECTED, read_csv, rewards_yaml, write_pick
from ppage_jax.artifacts import fault, write_json, write_text
from ppage_jax.config import Config, load_config
from ppage_jax.env import GridWorld, make
from ppage_jax.state import EnvParams

FINAL = "final.json"  # every member on the search's held-out layouts
CURVE_HEADER = ("member", "update", "env_steps", "metric", "value")


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
    evaluate: bool = True,
    init_fn: InitFn | None = None,
    update_fn: UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run the PBT search ``spec`` (strategy ``pbt``; see the module docstring) into
    ``output_dir`` (default: the spec's): :func:`search_pbt` with ``options``, the fields of
    :class:`~ppage_jax.analysis.search.plan.SearchOptions` (``resume``, ``overwrite``,
    ``progress``, ``report``, ``references``, ``should_stop``, ``log``)."""
    if not isinstance(spec, SearchSpec):
        spec = load_search(spec)
    search = SearchOptions(output_dir, **options)
    return search_pbt(spec, search, evaluate, init_fn, update_fn, eval_fn)


@dataclasses.dataclass(frozen=True, eq=False)
class PBTStart:
    """What every interval of a PBT search shares: its settings and compiled programs, the
    members' training seeds and keys, the EnvParams [M] and hyperparameters of their first
    values (the init's inputs) and the reward-hacking monitor of each lineage's root."""

    settings: PBTSettings
    program: PBTProgram
    seeds: list[int]
    keys: jax.Array
    params: EnvParams
    hyper: dict[str, jax.Array]
    monitors: list[Any]


def search_pbt(
    spec: SearchSpec,
    options: SearchOptions,
    evaluate: bool = True,
    init_fn: InitFn | None = None,
    update_fn: UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
) -> dict[str, Any]:
    """Run the PBT search ``spec`` with ``options``, resuming or overwriting as
    :func:`~ppage_jax.analysis.search.run.search_rewards` does (PBT logs to no tracker).
    ``init_fn``/``update_fn`` replace the config's algorithm (an algorithm's
    ``init``/``update``; tests count traces with them), ``eval_fn`` the held-out
    evaluation. ``evaluate=False`` stops after the intervals (no final evaluation, no
    re-evaluation); ``options.references=False`` re-evaluates the selected schedule alone.

    Returns ``{"candidates", "best", "population", "runner", "reevaluation", "generations_run",
    "compile_calls", "traces", "seconds", "output_dir", "stopped", "report"}``
    (``generations_run``: intervals run now; ``compile_calls``: traces of the interval
    program in this call)."""
    if spec.strategy != "pbt":
        raise ValueError(f"{spec.path}: strategy {spec.strategy!r} is not pbt")
    settings = pbt_settings(spec)
    env = make(spec.config)
    program = pbt_program(spec, env, init_fn, update_fn, eval_fn)
    traced_before = program.traces["interval"]
    options = dataclasses.replace(options, loggers=())
    plan = plan_search(spec, options, env, program.env_steps_per_update)
    if (
        options.resume
        and evaluate
        and not plan.writer.reevaluated
        and (plan.out_dir / PICK).is_file()
    ):
        # killed during the re-evaluation: the pick and its schedule are written, and the
        # re-evaluation needs nothing else (not the population's state)
        return reevaluate_written(plan)
    begin, pop = start_population(plan, program)
    candidates = replay_intervals(plan, pop)
    runner = start_runner(plan, begin)
    start = time.perf_counter()
    runner, ran, stopped = run_intervals(plan, begin, pop, runner, candidates)
    summary: dict[str, Any] = {
        "candidates": candidates,
        "population": pop,
        "runner": runner,
        "generations_run": ran,
        "compile_calls": program.traces["interval"] - traced_before,
        "traces": dict(program.traces),
        "output_dir": str(plan.out_dir),
        "stopped": stopped,
        "best": None,
        "reevaluation": None,
    }
    if stopped or len(plan.writer.finished()) < settings.intervals or not evaluate:
        return finish(plan, start, summary)
    summary["best"], summary["reevaluation"] = pick_schedule(plan, program, runner, pop)
    summary["traces"] = dict(program.traces)
    from ppage_jax.analysis.search.report import write_pbt_report

    return finish(plan, start, summary, write_pbt_report)


def start_population(plan: SearchPlan, program: PBTProgram) -> tuple[PBTStart, Population]:
    """The population before its first interval: member ``m`` trains from ``train_seed +
    m`` with values drawn from the start distribution every strategy shares, its own
    lineage's root."""
    spec, env = plan.spec, plan.env
    members = pbt_settings(spec).population
    seeds = [spec.train_seed + m for m in range(members)]
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    unit = Strategy("pbt", members, len(spec.dims), spec.seed, spec.start, spec.std).ask()
    first = candidate_values(spec.dims, unit)
    _, params0, hyper0, member_params = member_inputs(spec, env, first)
    names = [f"m{m:02d}" for m in range(members)]
    monitors = arm_monitors(spec.config, env, member_params, names, spec.eval_seed)
    begin = PBTStart(
        pbt_settings(spec), program, seeds, keys, params0, hyper0, list(monitors.values())
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
    return begin, pop


def replay_intervals(plan: SearchPlan, pop: Population) -> list[dict]:
    """The committed intervals' candidates (a resumed search), the host's bookkeeping of
    ``pop`` replayed from them."""
    writer = plan.writer
    members = len(pop.roots)
    candidates: list[dict] = []
    for g in writer.finished():
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
    return candidates


def start_runner(plan: SearchPlan, begin: PBTStart) -> Any:
    """The population's runner state: the last committed interval's (a resumed search),
    else every member's init."""
    finished = plan.writer.finished()
    program = begin.program
    if not finished:
        return program.init(begin.keys, begin.params, begin.hyper)
    template = jax.eval_shape(program.init, begin.keys, begin.params, begin.hyper)
    return load_state(plan.writer.generation_file(finished[-1], "state.npz"), template)


def run_intervals(
    plan: SearchPlan, begin: PBTStart, pop: Population, runner: Any, candidates: list[dict]
) -> tuple[Any, int, bool]:
    """The intervals not committed yet, in order, each committed as it ends (its record, its
    curves and the population's state; the previous state deleted), asking
    ``should_stop()`` before each: ``(runner, intervals run, stopped)``."""
    from tqdm.auto import tqdm

    writer, intervals = plan.writer, begin.settings.intervals
    todo = [g for g in range(intervals) if g not in set(writer.finished())]
    bar = tqdm(
        total=intervals,
        initial=intervals - len(todo),
        unit="interval",
        desc="pbt",
        disable=not plan.options.progress,
    )
    ran, stopped = 0, False
    for g in todo:
        if plan.stop():
            stopped = True
            break
        runner, record, results, files = train_interval(plan, begin, pop, runner, g, ran + 1)
        writer.add_generation(g, record, results, [], files)
        if g > 0:  # only the last interval's population is needed to resume
            writer.generation_file(g - 1, "state.npz").unlink(missing_ok=True)
        candidates.extend(record["candidates"])
        ran += 1
        bar.update(1)
    bar.close()
    return runner, ran, stopped


def train_interval(
    plan: SearchPlan, begin: PBTStart, pop: Population, runner: Any, g: int, number: int
) -> tuple[Any, dict, dict, dict[str, str | bytes]]:
    """Interval ``g`` (the ``number``-th of this call) trained, its members judged and the
    next interval's exploit and explore chosen: ``(runner, record, results, files)``, the
    files being its curves and the population's state."""
    spec, env, settings = plan.spec, plan.env, begin.settings
    members = settings.population
    _, params, hyper, member_params = member_inputs(spec, env, pop.values)
    runner, metrics = begin.program.interval(runner, jnp.asarray(pop.source), params, hyper)
    metrics = jax.tree.map(np.asarray, metrics)
    fault(f"generation:{number}")  # testing hook: killed after an interval's program
    offset = g * settings.interval
    steps = plan.env_steps_per_update
    rows = [interval_rows(env, metrics, m, offset, steps) for m in range(members)]
    used_values, used_source = pop.values.copy(), pop.source.copy()
    pop.advance(rows)
    seeds, monitors = begin.seeds, begin.monitors
    lineages = list(zip(pop.roots, pop.curves, strict=True))
    record_cands, results = judge_members(
        spec, env, lineages, metrics, member_params, monitors, seeds, g
    )
    _apply_verdicts(pop, record_cands)
    for m, c in enumerate(record_cands):
        c.update(
            unit=[d.unit(v) for d, v in zip(spec.dims, used_values[m], strict=True)],
            values=[float(v) for v in used_values[m]],
            source=int(used_source[m]),
        )
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
        losses = [c["loss"] for c in record_cands]
        record["next"] = next_interval(plan, settings, pop, losses, used_values, g)
    curves = [(m, u, s, k, cell(v)) for m in range(members) for u, s, k, v in rows[m]]
    files = {"curves.csv": csv_text(CURVE_HEADER, curves), "state.npz": state_bytes(runner)}
    return runner, record, results, files


def next_interval(
    plan: SearchPlan,
    settings: PBTSettings,
    pop: Population,
    losses: Sequence[float],
    used: np.ndarray,
    g: int,
) -> dict[str, list]:
    """Exploit and explore after interval ``g`` (``used``: its values): who copies whom
    (:func:`exploit_plan`, from a generator seeded by the search seed and the interval) and
    the copies' perturbed values (:func:`perturb`, a perturbation that breaks the stall
    margin dropped), set on ``pop``; the record's ``next``."""
    spec = plan.spec
    rng = np.random.default_rng([spec.seed, g + 1])
    source, replaced = exploit_plan(losses, pop.feasible, settings.movers, rng)
    values = perturb(spec.dims, used, source, replaced, settings.perturb, rng)
    values = keep_margin(spec, plan.env, used, values, source, replaced)
    pop.values, pop.source = values, source
    return {
        "source": [int(s) for s in source],
        "values": [[float(v) for v in row] for row in values],
        "replaced": [int(m) for m in np.flatnonzero(replaced)],
    }


def pick_schedule(
    plan: SearchPlan, program: PBTProgram, runner: Any, pop: Population
) -> tuple[dict, dict | None]:
    """``(best, re-evaluation results)``: every member evaluated on the search's layouts,
    the selected lineage's values per interval written as a schedule (config.yaml,
    rewards.yaml, pick.json), then re-trained under it on fresh seeds and layouts (None
    when already done)."""
    spec, writer = plan.spec, plan.writer
    final = _final(
        spec, plan.env, program, runner, pop, plan.out_dir, plan.horizon, writer.reevaluated
    )
    best = final["members"][final["pick"]]
    interval = pbt_settings(spec).interval
    steps = plan.env_steps_per_update
    config = schedule_config(
        spec, schedule_curriculum(spec.dims, best["schedule"], interval, steps)
    )
    _write_pick(plan.out_dir, spec, best, config)
    if not best["feasible"]:
        plan.say(
            f"pbt: no member was feasible; the re-evaluation takes {best['name']} "
            f"({best['reason']})"
        )
    announce = (
        f"pbt: re-evaluating {best['name']}'s schedule ({spec.metric} {best['metric']:.4g} "
        "in the search) on fresh seeds and layouts"
    )
    arm = candidate_arm(spec.design, spec.dims, best["schedule"][0], SELECTED)
    return best, reevaluate_pick(plan, arm, announce, config)


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


def reevaluate_written(plan: SearchPlan) -> dict[str, Any]:
    """Re-evaluate the schedule a finished search wrote (``pick.json``, ``config.yaml``),
    then rewrite the report when the final evaluation's file is there."""
    spec, out_dir = plan.spec, plan.out_dir
    start = time.perf_counter()
    best = json.loads((out_dir / PICK).read_text())
    config = load_config(out_dir / "config.yaml")
    announce = f"pbt: re-evaluating {best['name']}'s written schedule on fresh seeds and layouts"
    arm = candidate_arm(spec.design, spec.dims, best["schedule"][0], SELECTED)
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
        "reevaluation": reevaluate_pick(plan, arm, announce, config),
    }
    finish(plan, start, summary)
    if (out_dir / FINAL).is_file():
        from ppage_jax.analysis.search.report import write_pbt_report

        summary["report"] = str(write_pbt_report(out_dir, spec))
    return summary


def _write_pick(out_dir: Path, spec: SearchSpec, best: dict, config: Config) -> None:
    """``config.yaml`` (the search's config replaying the selected schedule: ``ppage-jax run
    config.yaml``), ``rewards.yaml`` (its first interval's design, the schedule in a comment)
    and ``pick.json``."""
    from ppage_jax.analysis.search.reevaluate import replay_command

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
