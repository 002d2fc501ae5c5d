"""Rerun the reward-hacking detectors on finished runs, without training: each run or sweep
directory's saved curves are watched again (as the run watched them) with a settings file's
thresholds (default: the monitor's defaults), and monitor.csv, every run's first flag per
detector and monitor column, is written beside the curves. With --suite, the detector suite
(configs/studies/detectors/suite.yaml) is measured instead: its sweeps' runs read back, and
detectors.csv, rates.csv, report.md and roc.png written to --out."""

from __future__ import annotations

import argparse
from pathlib import Path

from ppage_jax.cli.args import UsageError, add_import_argument, import_user_modules

MONITOR_FILE = "monitor.csv"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_import_argument(parser)
    parser.add_argument(
        "directories",
        nargs="*",
        metavar="RUN_OR_SWEEP_DIR",
        help="run directories (summary.json, metrics.csv) or sweep directories (sweep.json, "
        "curves.csv)",
    )
    parser.add_argument(
        "--settings",
        default=None,
        metavar="FILE",
        help="detector settings file (default: the monitor's defaults; with --suite, the "
        "suite's own)",
    )
    parser.add_argument(
        "--suite", default=None, metavar="SUITE.yaml", help="measure a detector suite"
    )
    parser.add_argument(
        "--runs",
        default=None,
        metavar="DIR",
        help="with --suite: the directory holding one sweep output per scenario (default: "
        "each sweep file's output_dir)",
    )
    parser.add_argument(
        "--out",
        default="runs/studies/detectors",
        metavar="DIR",
        help="with --suite: where the suite's outputs go (default runs/studies/detectors)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing monitor.csv or suite output"
    )


def _refuse_existing(paths: list[Path], overwrite: bool) -> None:
    present = [str(p) for p in paths if p.exists()]
    if present and not overwrite:
        raise UsageError(
            f"monitor: {', '.join(present)} already exist(s); pass --overwrite to replace"
        )


def _replay(args: argparse.Namespace) -> int:
    from ppage_jax.analysis.batch.output import csv_text
    from ppage_jax.analysis.detectors.replay import (
        detection_rows,
        monitor_curves,
        read_directory,
        recorded_agreement,
    )
    from ppage_jax.analysis.detectors.settings import load_settings
    from ppage_jax.artifacts import write_text

    settings = load_settings(args.settings)
    directories = [Path(d) for d in args.directories]
    for directory in directories:
        read_directory(directory)  # every directory checked before any work
    _refuse_existing([d / MONITOR_FILE for d in directories], args.overwrite)
    for directory in directories:
        detections = monitor_curves(directory, settings)
        rows = detection_rows(detections)
        header = ("arm", "seed", "detector", "flagged", "first_update", "first_env_steps")
        write_text(
            directory / MONITOR_FILE, csv_text(header, [tuple(r[k] for k in header) for r in rows])
        )
        arms = sorted({d.arm for d in detections})
        print(
            f"{directory}: {len(detections)} runs of {len(arms)} arm(s), settings {settings.source}"
        )
        for arm in arms:
            mine = [d for d in detections if d.arm == arm]
            flagged = sum(d.flagged("monitor") for d in mine)
            print(f"  {arm}: monitor flagged {flagged}/{len(mine)} seeds")
        agree, recorded = recorded_agreement(directory, detections)
        if recorded:
            print(f"  the flags recorded while training: {agree}/{recorded} reproduced")
        print(f"  wrote {directory / MONITOR_FILE}")
    return 0


def _suite(args: argparse.Namespace) -> int:
    from ppage_jax.analysis.detectors.settings import load_settings
    from ppage_jax.analysis.detectors.suite import load_suite, read_suite_runs, scenario_directories
    from ppage_jax.analysis.detectors.suite_report import OUTPUTS, measure, write_suite

    suite = load_suite(args.suite)
    settings = load_settings(args.settings or suite.settings)
    read = read_suite_runs(suite, scenario_directories(suite, args.runs))
    out = Path(args.out)
    _refuse_existing([out / name for name in OUTPUTS], args.overwrite)
    result = measure(suite, read, settings)
    for path in write_suite(result, out):
        print(f"wrote {path}")
    combined = result.rate("audit_or_monitor")
    print(
        f"audit or monitor: TPR {combined.tpr.hits}/{combined.tpr.n}, "
        f"FPR {combined.fpr.hits}/{combined.fpr.n} (settings {settings.source})"
    )
    return 0


def main(args: argparse.Namespace) -> int:
    import_user_modules(args.imports)
    if args.suite is not None:
        if args.directories:
            raise UsageError("monitor: give run directories or --suite, not both")
        return _suite(args)
    if not args.directories:
        raise UsageError("monitor: give at least one RUN_OR_SWEEP_DIR (or --suite SUITE.yaml)")
    return _replay(args)
