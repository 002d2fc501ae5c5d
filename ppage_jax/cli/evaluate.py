"""Reload a run directory's checkpoint and evaluate it on held-out seeds beside baselines
(the run's eval block unless --episodes/--seed/--max-steps say otherwise); print the tables
and rewrite the run's capture_curves.png. Under a changed config (--set, or another eval
block) nothing of the run is rewritten: the curves, the config evaluated and the results go
to RUN_DIR/eval-<config hash>/ (docs/evaluation.md explains the metrics)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppage_jax.artifacts import OutputError, prepare_output_dir, write_json, write_text
from ppage_jax.cli.args import (
    add_import_argument,
    add_set_argument,
    import_user_modules,
    positive_int,
    seed_number,
)
from ppage_jax.tracking.status import phase

if TYPE_CHECKING:
    from ppage_jax.config import Config
    from ppage_jax.state import EnvParams
    from ppage_jax.train.config import TrainConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by ppage-jax run")
    parser.add_argument("--episodes", type=positive_int, default=None, help="episodes to evaluate")
    parser.add_argument(
        "--seed", type=seed_number, default=None, help="first seed of the eval block"
    )
    parser.add_argument("--max-steps", type=positive_int, default=None, help="step cap per episode")
    add_set_argument(
        parser,
        "evaluate under a changed config (shapes must match), e.g. "
        "--set experiment.roles.preys=evade",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_import_argument(parser)


def run_evaluation(
    run_dir: Path,
    config: Config,
    tc: TrainConfig,
    policies: Any,
    params: EnvParams,
    quiet: bool = False,
) -> dict:
    """Evaluate ``policies`` (stacked over seeds) on the config's eval block, write
    ``run_dir/capture_curves.png``, print the tables (unless ``quiet``) and return
    summary.json's ``evaluation`` section: ``episodes``, ``seed``, ``max_steps`` and
    ``rows`` (``{row: summary}``, rows of :data:`ppage_jax.train.run.evaluate.ROWS`)."""
    from ppage_jax.train.run import report
    from ppage_jax.train.run.evaluate import evaluate_episodes, rows_for, summarize_rows
    from ppage_jax.viz.run_figures import plot_capture_curves

    ev = config["experiment"]["eval"]
    cap = ev["max_steps"] or tc.env.spec.max_steps
    assert cap is not None  # the config requires eval.max_steps when the env has no limit
    which = rows_for(tc)
    with phase(
        f"evaluating: {len(which)} rows ({', '.join(which)}) x {ev['episodes']} held-out "
        f"episodes per trained seed, compiled then played",
        stderr=quiet,
    ):
        played = evaluate_episodes(
            tc, policies, params, ev["seed"], ev["episodes"], ev["max_steps"], which
        )
    with phase("summarising the evaluation: Kaplan-Meier curves and bootstrap CIs", stderr=quiet):
        rows = summarize_rows(tc, played, which, cap)
        curves = plot_capture_curves(run_dir, played, rows, cap)
    if not quiet:
        num_seeds = next(iter(played.values()))["captured"].shape[0]
        print(
            f"\nheld-out evaluation of {tc.algorithm}: {ev['episodes']} episodes (layouts of "
            f"seeds [{ev['seed']}, {ev['seed'] + ev['episodes']})) x {num_seeds} trained "
            f"seed(s) pooled, step limit {cap}; time to capture is censored at the limit "
            f"(RMST, Kaplan-Meier median)\n"
        )
        print(report.summary_table(rows, cap))
        print(f"\ncapture curves: {curves}")
    return {"episodes": ev["episodes"], "seed": ev["seed"], "max_steps": cap, "rows": rows}


def main(args: argparse.Namespace) -> int:
    from ppage_jax.config import load_config, parse_override
    from ppage_jax.train import make_train_config
    from ppage_jax.train.run import report
    from ppage_jax.train.run.checkpoint import CheckpointError, load_checkpoint

    import_user_modules(args.imports)  # before the run's config names their terms
    run_dir = Path(args.run_dir)
    overrides = dict(parse_override(text) for text in args.overrides)
    for key, value in (
        ("episodes", args.episodes),
        ("seed", args.seed),
        ("max_steps", args.max_steps),
    ):
        if value is not None:
            overrides[f"experiment.eval.{key}"] = value
    try:
        is_run = (run_dir / report.CONFIG_FILE).is_file()
    except OSError as err:  # a name the OS refuses (too long, ...): bad input
        raise OutputError(f"cannot use run directory {run_dir}: {err.strerror or err}") from None
    if not is_run:
        raise OutputError(f"{run_dir} is not a run directory (no {report.CONFIG_FILE})")
    own = load_config(run_dir / report.CONFIG_FILE)
    config = own.with_overrides(overrides) if overrides else own
    out_dir = evaluation_dir(run_dir, own, config)
    tc = make_train_config(config)
    try:
        policies = load_checkpoint(run_dir / report.CHECKPOINT_FILE, tc)
    except (CheckpointError, FileNotFoundError) as err:
        print(f"cannot evaluate: {err}", file=sys.stderr)
        return 2
    # An eval-<hash>/ folder made here goes again if the evaluation fails: no empty leftover.
    made = not out_dir.exists()
    prepare_output_dir(out_dir, "evaluation directory")  # capture_curves.png goes there
    try:
        return _evaluate(args, run_dir, own, config, tc, policies, out_dir)
    except BaseException:
        if made and out_dir != run_dir:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _evaluate(args, run_dir: Path, own: Config, config: Config, tc, policies, out_dir: Path) -> int:
    """Evaluate and write the results into ``out_dir`` (:func:`main` after its checks)."""
    from ppage_jax.train.run import report

    if not args.json:
        print(f"{run_dir}: {tc.algorithm}")
    if out_dir != run_dir:
        write_text(
            out_dir / EVALUATED_CONFIG_FILE,
            f"# config evaluated (hash {config.hash()}); the run's own is ../"
            f"{report.CONFIG_FILE} (hash {own.hash()})\n" + config.to_yaml(),
        )
        print(
            f"the config differs from the run's own (hash {config.hash()} vs {own.hash()}): "
            f"results go to {out_dir}, the run's artefacts are left as they are",
            file=sys.stderr if args.json else sys.stdout,
        )
    evaluation = run_evaluation(
        out_dir, config, tc, policies, tc.env.default_params, quiet=args.json
    )
    if out_dir != run_dir:
        write_json(out_dir / EVALUATION_FILE, report.json_safe(evaluation), indent=2)
    if args.json:
        print(json.dumps(report.json_safe(evaluation), indent=2))
    return 0


EVALUATED_CONFIG_FILE = "evaluated_config.yaml"
EVALUATION_FILE = "evaluation.json"


def evaluation_dir(run_dir: Path, own: Config, config: Config) -> Path:
    """Where an evaluation of ``run_dir`` writes: the run directory itself under the run's own
    config, else ``run_dir/eval-<config hash>`` (never over the run's own artefacts)."""
    if config.hash() == own.hash():
        return run_dir
    return run_dir / f"eval-{config.hash()}"
