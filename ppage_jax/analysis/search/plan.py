"""What every search strategy shares: the options a search runs with
(:class:`SearchOptions`), its plan (:class:`SearchPlan`: the spec, the env, the output
directory and its writer, the evaluation's step limit) and the stages around the search
proper: opening it (:func:`plan_search`), re-evaluating the pick (:func:`reevaluate_pick`)
and the end (:func:`finish`: the timings, then the report).

The evolution strategies (:mod:`.run`) and population-based training (:mod:`.pbt`) each
run their own middle between these stages.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppage_jax.analysis.batch.spec import Arm
from ppage_jax.analysis.batch.trainers import TrainFn
from ppage_jax.analysis.search.reevaluate import RunSetup, reevaluate
from ppage_jax.analysis.search.spec import SearchSpec
from ppage_jax.analysis.search.writer import SearchWriter, open_search_writer, write_above_bar
from ppage_jax.config import Config
from ppage_jax.env import GridWorld

# report(output_dir, spec) -> the report's path
ReportFn = Callable[[Path, SearchSpec], Path]


@dataclasses.dataclass(frozen=True)
class SearchOptions:
    """How a search runs, whatever its strategy (each option as
    :func:`~ppage_jax.analysis.search.run.search_rewards` documents it)."""

    output_dir: str | Path | None = None
    resume: bool = False
    overwrite: bool = False
    progress: bool = True
    report: bool = True
    references: bool = True
    loggers: Sequence[str] = ()
    should_stop: Callable[[], bool] | None = None
    log: Callable[[str], None] | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class SearchPlan:
    """A search settled before its first generation: the spec and options, the env, the
    output directory and its writer (opened: refused, resumed or overwritten), the
    evaluation's step limit, the env steps per update and the search's own train function
    (None: the config's)."""

    spec: SearchSpec
    options: SearchOptions
    env: GridWorld
    out_dir: Path
    writer: SearchWriter
    horizon: int
    env_steps_per_update: int
    train_fn: TrainFn | None = None

    def say(self, line: str) -> None:
        """One line about a notable event: to ``options.log``, else above the progress bar."""
        (self.options.log or write_above_bar)(line)

    def stop(self) -> bool:
        """Whether ``options.should_stop()`` asks the search to stop now."""
        return self.options.should_stop is not None and bool(self.options.should_stop())

    @property
    def setup(self) -> RunSetup:
        """How the re-evaluation trains: this search's env, step limit, progress, trackers,
        directory and train function."""
        options = self.options
        return RunSetup(
            self.env,
            self.horizon,
            options.progress,
            options.loggers,
            self.out_dir,
            self.train_fn,
            self.env_steps_per_update,
        )


def plan_search(
    spec: SearchSpec,
    options: SearchOptions,
    env: GridWorld,
    env_steps_per_update: int,
    train_fn: TrainFn | None = None,
) -> SearchPlan:
    """The :class:`SearchPlan` of ``spec`` on ``env``: the output directory (default: the
    spec's) opened with the writer (:func:`open_search_writer`), and the step limit."""
    horizon = spec.step_limit(env)
    out_dir = Path(options.output_dir or spec.output_dir)
    writer = open_search_writer(
        spec,
        out_dir,
        env_steps_per_update,
        horizon,
        resume=options.resume,
        overwrite=options.overwrite,
    )
    return SearchPlan(spec, options, env, out_dir, writer, horizon, env_steps_per_update, train_fn)


def reevaluate_pick(
    plan: SearchPlan, arm: Arm, announce: str, schedule: Config | None = None
) -> dict | None:
    """The pick ``arm`` (and, with ``options.references``, the references) re-evaluated on
    fresh seeds and layouts and committed (:func:`~.reevaluate.reevaluate`; ``schedule``: a
    PBT schedule), after saying ``announce``; its results, or None when the directory
    already holds the re-evaluation."""
    writer = plan.writer
    if writer.reevaluated:
        return None
    plan.say(announce)
    results, episodes = reevaluate(plan.spec, arm, plan.setup, schedule, plan.options.references)
    writer.write_reevaluation(results, episodes)
    return results


def finish(
    plan: SearchPlan,
    start: float,
    summary: dict[str, Any],
    report: ReportFn | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The end of a search: the seconds since ``start`` into ``summary`` and, with those of
    earlier runs of the search, into search.json (with ``extra``); then, for a finished
    search (``report`` given) and ``options.report``, the report ``report`` writes into
    ``summary["report"]``. Returns ``summary``."""
    seconds = time.perf_counter() - start
    summary["seconds"] = seconds
    search_seconds = round(plan.writer.previous_seconds + seconds, 2)
    plan.writer.write_description(search_seconds=search_seconds, **extra)
    if report is not None and plan.options.report:
        summary["report"] = str(report(plan.out_dir, plan.spec))
    return summary
