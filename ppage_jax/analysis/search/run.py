"""Reward search: propose reward designs, train them all at once, keep what does the task
without being gamed.

Each generation the strategy (:mod:`.strategies`, evosax) proposes ``population`` designs in
the search space (:mod:`.space`); every candidate x seed trains and is evaluated on the
held-out layouts as one call of one compiled program (the sweep's program,
:mod:`.programs`), compiled once for the whole search. Each candidate is audited (the
sweep's audit stage, a few episodes per policy pair) and each run is watched by the
reward-hacking monitor (the sweep's, host-side). Candidates are ranked on the task metric
alone, the infeasible ones (flagged by the monitor in most seeds) last (:mod:`.constraint`),
and the ranks go back to the strategy. After the last generation the selected design is
re-evaluated with the reference arms on fresh training seeds and fresh layouts, in one more
program (:mod:`.reevaluate`), and the report is written (:mod:`.report`).

A killed search resumes from its last finished generation: the strategy's state is replayed
from the recorded ranks (the proposals are checked to be the recorded ones), and the results
are byte-identical to an uninterrupted search (:mod:`.writer`).

:func:`search_rewards` runs the stages in order on the search's plan (:mod:`.plan`):
:func:`replay_generations` (resume), :func:`run_generations` (each generation:
:func:`propose`, :func:`train_generation`, :func:`judge_generation`, then the ranks told to
the strategy and the generation committed), :func:`pick_and_reevaluate`, then the report.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppage_jax.analysis.audit.margin import stall_margins
from ppage_jax.analysis.batch.auditing import audit_rows
from ppage_jax.analysis.batch.monitoring import arm_monitors, monitor_run
from ppage_jax.analysis.batch.spec import Arm
from ppage_jax.analysis.batch.trainers import EvalFn, TrainFn
from ppage_jax.analysis.search.constraint import judge, margin_reason, selection_order
from ppage_jax.analysis.search.plan import (
    SearchOptions,
    SearchPlan,
    finish,
    plan_search,
    reevaluate_pick,
)
from ppage_jax.analysis.search.programs import RunProgram
from ppage_jax.analysis.search.space import candidate_arm, candidate_values, outside_box
from ppage_jax.analysis.search.spec import SearchSpec, load_search
from ppage_jax.analysis.search.strategies import Strategy, rank_fitness
from ppage_jax.analysis.search.writer import SELECTED, write_pick
from ppage_jax.artifacts import OutputError, fault
from ppage_jax.config import notice
from ppage_jax.env import make
from ppage_jax.state import EnvParams
from ppage_jax.tracking.sweep import SweepRecorder

Results = dict[tuple[str, int], dict[str, float]]


def candidate_name(generation: int, index: int) -> str:
    return f"g{generation:02d}c{index:02d}"


def untrained_record(
    name: str, generation: int, index: int, unit: np.ndarray, values: np.ndarray, reason: str
) -> dict:
    """The record of a candidate the constraint refused before training: no seeds, no
    metric, infeasible with ``reason`` (it ranks after every trained candidate)."""
    return {
        "name": name,
        "generation": generation,
        "index": index,
        "unit": [float(u) for u in unit],
        "values": [float(v) for v in values],
        "seeds": [],
        "metric": float("nan"),
        "loss": float("inf"),
        "flagged_seeds": {},
        "flagged_checks": {},
        "feasible": False,
        "reason": reason,
        "audit_flags": [],
        "trained": False,
    }


def announce_clipped(spec: SearchSpec, generation: int, unit: np.ndarray, said: set[str]) -> None:
    """Notice, once per key (``said`` holds the keys already named), that generation
    ``generation``'s proposals ``unit`` [P, d] left the search space and are clipped."""
    clipped = [k for k in outside_box(spec.dims, unit) if k not in said]
    if clipped:
        said.update(clipped)
        notice(
            f"search generation {generation}: {spec.strategy} proposed values outside the "
            f"search space for {clipped}; they are clipped to the bounds (said once per key)"
        )


def search_rewards(
    spec: SearchSpec | str | Path,
    output_dir: str | Path | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    report: bool = True,
    loggers: Sequence[str] = (),
    should_stop: Callable[[], bool] | None = None,
    train_fn: TrainFn | None = None,
    eval_fn: EvalFn | None = None,
    env_steps_per_update: int | None = None,
    log: Callable[[str], None] | None = None,
    references: bool = True,
) -> dict[str, Any]:
    """Run the reward search ``spec`` (a :class:`SearchSpec` or a search file's path);
    strategy ``pbt`` runs :func:`ppage_jax.analysis.search.pbt.search_pbt`.

    Writes ``output_dir`` (default: the spec's ``output_dir``) as each generation finishes;
    a directory that already holds a search is refused unless ``resume`` (continue it from
    its last finished generation) or ``overwrite``. ``should_stop()`` is asked between
    generations. ``train_fn``/``eval_fn`` replace the config's algorithm and evaluation of
    the search's generations (the sweep's contract; tests count traces with them).
    ``loggers`` (``ppage_jax.tracking`` backends) get every run and each generation's
    summary. ``log`` receives one line per notable event (default: stderr).
    ``references=False`` re-evaluates the selected design alone (a repeated search whose
    references are re-evaluated once, :mod:`.repeat`).

    Returns ``{"candidates", "best", "reevaluation", "generations_run", "compile_calls",
    "seconds", "output_dir", "stopped", "report"}``.
    """
    options = SearchOptions(
        output_dir=output_dir,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        report=report,
        references=references,
        loggers=loggers,
        should_stop=should_stop,
        log=log,
    )
    if not isinstance(spec, SearchSpec):
        spec = load_search(spec)
    if spec.strategy == "pbt":  # population-based training: a search of its own (.pbt)
        from ppage_jax.analysis.search.pbt import search_pbt

        return search_pbt(spec, options)
    env = make(spec.config)
    program = RunProgram(spec.sweep(), env, train_fn, eval_fn, env_steps_per_update)
    plan = plan_search(spec, options, env, program.env_steps_per_update, train_fn)
    strategy = Strategy(
        spec.strategy, spec.population, len(spec.dims), spec.seed, spec.start, spec.std
    )
    candidates = replay_generations(plan, strategy)
    start = time.perf_counter()
    ran, stopped = run_generations(plan, program, strategy, candidates)
    summary: dict[str, Any] = {
        "candidates": candidates,
        "generations_run": ran,
        "compile_calls": program.compile_calls,
        "output_dir": str(plan.out_dir),
        "stopped": stopped,
        "best": None,
        "reevaluation": None,
    }
    if stopped or len(plan.writer.finished()) < spec.generations:
        return finish(plan, start, summary)
    summary["best"], summary["reevaluation"] = pick_and_reevaluate(plan, candidates)
    from ppage_jax.analysis.search.report import write_report

    calls = program.compile_calls
    return finish(plan, start, summary, write_report, compile_calls_this_process=calls)


def replay_generations(plan: SearchPlan, strategy: Strategy) -> list[dict]:
    """The finished generations' candidates (a resumed search), the strategy's state replayed
    from their recorded ranks; OutputError when this machine proposes differently."""
    candidates: list[dict] = []
    for g in plan.writer.finished():
        record = plan.writer.read_generation(g)
        asked = strategy.ask()
        recorded = np.asarray([c["unit"] for c in record["candidates"]], np.float64)
        if g != strategy.generation or not np.array_equal(asked, recorded):
            raise OutputError(
                f"{plan.out_dir}: generation {g} was proposed differently on this machine; the "
                f"search cannot be resumed here (rerun it with --overwrite)"
            )
        strategy.tell(record["fitness"])
        candidates.extend(record["candidates"])
    return candidates


def run_generations(
    plan: SearchPlan, program: RunProgram, strategy: Strategy, candidates: list[dict]
) -> tuple[int, bool]:
    """The generations not finished yet, in order, each committed as it ends (its candidates
    added to ``candidates``), asking ``should_stop()`` before each: ``(generations run,
    stopped)``."""
    from tqdm.auto import tqdm

    spec, writer = plan.spec, plan.writer
    todo = [g for g in range(spec.generations) if g not in set(writer.finished())]
    bar = tqdm(
        total=spec.generations,
        initial=spec.generations - len(todo),
        unit="gen",
        desc="search",
        disable=not plan.options.progress,
    )
    tracker = SearchTracker(plan.options.loggers, plan.out_dir, spec)
    ran, stopped = 0, False
    announced: set[str] = set()  # keys whose clipped proposals were announced
    for g in todo:
        if plan.stop():
            stopped = True
            break
        proposal = propose(plan, strategy, g, announced)
        results, audit = train_generation(plan, program, proposal)
        fault(f"generation:{ran + 1}")  # testing hook: killed after a generation's program
        record_cands = judge_generation(plan, proposal, results, audit)
        fitness = rank_fitness(
            [c["loss"] for c in record_cands], [c["feasible"] for c in record_cands]
        )
        for c, f in zip(record_cands, fitness, strict=True):
            c["rank"] = int(f)
        record = {
            "generation": g,
            "keys": [d.key for d in spec.dims],
            "metric": spec.metric,
            "candidates": record_cands,
            "fitness": [float(f) for f in fitness],
            "strategy_mean": None if (mean := strategy.mean()) is None else list(mean),
        }
        strategy.tell(fitness)
        writer.add_generation(g, record, results, audit)
        candidates.extend(record_cands)
        tracker.generation(g, record_cands)
        ran += 1
        bar.update(1)
        feasible = [c["metric"] for c in record_cands if c["feasible"]]
        bar.set_postfix(
            best=f"{min(feasible) if spec.direction < 0 else max(feasible):.4g}"
            if feasible
            else "none feasible"
        )
    bar.close()
    tracker.close()
    return ran, stopped


@dataclasses.dataclass(frozen=True)
class Proposal:
    """One generation's candidates as the strategy proposed them: unit coordinates [P, d],
    values [P, d], names, designs and their EnvParams, the stall margins (empty without a
    stall-margin constraint) and the candidates the constraint refuses to train, with why."""

    generation: int
    unit: np.ndarray
    values: np.ndarray
    names: list[str]
    arms: tuple[Arm, ...]
    params: list[EnvParams]
    margins: list[dict]
    skipped: dict[str, str]

    @property
    def trained(self) -> tuple[Arm, ...]:
        """The designs that train (not refused by the constraint)."""
        return tuple(a for a in self.arms if a.name not in self.skipped)

    @property
    def trained_params(self) -> list[EnvParams]:
        return [
            p for a, p in zip(self.arms, self.params, strict=True) if a.name not in self.skipped
        ]


def propose(plan: SearchPlan, strategy: Strategy, g: int, announced: set[str]) -> Proposal:
    """Generation ``g``'s :class:`Proposal` (asking the strategy), its clipped proposals
    announced once per key, and the stall-margin constraint applied before training."""
    spec, env = plan.spec, plan.env
    unit = strategy.ask()
    announce_clipped(spec, g, unit, announced)
    values = candidate_values(spec.dims, unit)
    names = [candidate_name(g, i) for i in range(spec.population)]
    arms = tuple(
        candidate_arm(spec.design, spec.dims, v, n) for v, n in zip(values, names, strict=True)
    )
    all_params = spec.sweep(arms).arm_params(env)
    limit = spec.constraint.stall_margin
    margins = [stall_margins(env, p) if limit is not None else {} for p in all_params]
    skipped = {
        name: reason
        for name, m in zip(names, margins, strict=True)
        if (reason := margin_reason(m, limit))
    }
    return Proposal(g, unit, values, names, arms, all_params, margins, skipped)


def train_generation(
    plan: SearchPlan, program: RunProgram, proposal: Proposal
) -> tuple[Results, list]:
    """``(results, audit rows)`` of a generation's trained candidates: the audit of each
    design, then every candidate x seed trained and evaluated in one call of the program
    (compiled for the whole population), each run watched by the reward-hacking monitor."""
    spec, env, horizon = plan.spec, plan.env, plan.horizon
    trained, arm_params = proposal.trained, proposal.trained_params
    trained_names = [a.name for a in trained]
    audit = (
        audit_rows(env, arm_params, trained_names, horizon, spec.audit_episodes)
        if spec.audit_episodes and trained
        else []
    )
    results: Results = {}
    if trained:
        gspec = spec.sweep(trained)
        monitors = arm_monitors(spec.config, env, arm_params, trained_names, spec.eval_seed)
        recorder = SweepRecorder(plan.options.loggers, plan.out_dir, gspec)
        runs, keys, inputs = program.inputs(gspec)
        metrics, episodes = program(keys, inputs, pad_to=spec.population * spec.seeds)
        for j, (arm, seed) in enumerate(runs):
            result, curve = program.results(metrics, episodes, j, horizon)
            result.update(monitor_run(monitors[arm], seed, curve))
            results[arm, seed] = result
            recorder.add(arm, seed, result, curve)
    return results, audit


def judge_generation(
    plan: SearchPlan, proposal: Proposal, results: Results, audit: list
) -> list[dict]:
    """Each candidate's record: its task metric over its seeds, the monitor's and the
    audit's flags, feasibility and why not (:func:`judge`); a refused candidate's
    :func:`untrained_record`. Each infeasible candidate is said."""
    spec, g = plan.spec, proposal.generation
    records = []
    for i, name in enumerate(proposal.names):
        extra = {}
        if spec.constraint.stall_margin is not None:
            margin = proposal.margins[i].get("predator", {}).get("margin", 0.0)
            extra["stall_margin"] = float(margin)
        unit, values = proposal.unit[i], proposal.values[i]
        if name in proposal.skipped:
            records.append(untrained_record(name, g, i, unit, values, proposal.skipped[name]))
            records[-1].update(extra)
            plan.say(f"search generation {g}: {name} is infeasible: {proposal.skipped[name]}")
            continue
        per_seed = {s: r for (a, s), r in results.items() if a == name}
        audit_flags = sorted({row[1] for row in audit if row[0] == name and row[4] == 1})
        verdict = judge(
            per_seed, spec.metric, spec.direction, spec.constraint, plan.horizon, audit_flags
        )
        records.append(
            {
                "name": name,
                "generation": g,
                "index": i,
                "unit": [float(u) for u in unit],
                "values": [float(v) for v in values],
                "seeds": sorted(per_seed),
                "metric": verdict.metric,
                "loss": verdict.loss,
                "flagged_seeds": {str(s): len(c) for s, c in verdict.flagged.items()},
                "flagged_checks": {str(s): c for s, c in verdict.flagged.items()},
                "feasible": verdict.feasible,
                "reason": verdict.reason,
                "audit_flags": audit_flags,
                **extra,
            }
        )
        if not verdict.feasible:
            plan.say(f"search generation {g}: {name} is infeasible: {verdict.reason}")
    return records


def pick_and_reevaluate(plan: SearchPlan, candidates: list[dict]) -> tuple[dict, dict | None]:
    """``(best, re-evaluation results)``: the selected candidate (feasible first, then by
    the task metric: :func:`selection_order`) written to pick.json, then re-evaluated with
    the references on fresh seeds and layouts (None when already done)."""
    spec = plan.spec
    best = candidates[selection_order(candidates)[0]]
    write_pick(plan.out_dir, spec, best["name"], best["values"], best["metric"], best)
    if not best["feasible"]:
        plan.say(
            "search: no candidate was feasible; the re-evaluation takes the best infeasible "
            f"one, {best['name']} ({best['reason']})"
        )
    announce = (
        f"search: re-evaluating {best['name']} ({spec.metric} {best['metric']:.4g} in the "
        f"search) against {', '.join(r.name for r in spec.references)} on fresh seeds "
        f"and layouts"
    )
    arm = candidate_arm(spec.design, spec.dims, best["values"], SELECTED)
    return best, reevaluate_pick(plan, arm, announce)


class SearchTracker:
    """Each generation's summary to the trackers: one run named ``search``, stepped by
    generation (best and median task metric, feasible share, the best candidate's values)."""

    def __init__(self, loggers: Sequence[str], out_dir: Path, spec: SearchSpec):
        from ppage_jax.tracking.base import flat_hparams
        from ppage_jax.tracking.loggers import LOGGERS, open_logger

        self.spec = spec
        backends = [b for b in loggers if LOGGERS[b] is not None]
        self.logger = (
            open_logger(
                backends, out_dir, "search", out_dir.name, flat_hparams({"search": spec.describe()})
            )
            if backends
            else None
        )

    def generation(self, g: int, cands: list[dict]) -> None:
        if self.logger is None:
            return
        spec = self.spec
        feasible = [c for c in cands if c["feasible"]]
        scalars = {
            f"search/median_{spec.metric}": float(np.nanmedian([c["metric"] for c in cands])),
            "search/feasible_share": len(feasible) / len(cands),
        }
        if feasible:
            pick = min if spec.direction < 0 else max
            best = pick(feasible, key=lambda c: c["metric"])
            scalars[f"search/best_{spec.metric}"] = best["metric"]
            for dim, value in zip(spec.dims, best["values"], strict=True):
                scalars[f"search/best/{dim.key}"] = value
        self.logger.log_scalars(g, scalars)

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()
