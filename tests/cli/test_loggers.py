"""`--logger csv,tensorboard,wandb` for `ppage-jax run` and `ppage-jax sweep`: the event files
and the offline W&B run read back, and the logger choice never changes the result."""

from __future__ import annotations

import csv
import json
import os
import struct
from pathlib import Path

import pytest
from cli_testing import (
    HACKED,
    HACKED_EXPERIMENT,
    main_cli,
    write_run_config,
    write_sweep_file,
)

from ppage_jax.cli.main import main

tensorboard = pytest.importorskip("tensorboard")
wandb_pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402


@pytest.fixture(scope="module")
def offline_wandb():
    saved = {k: os.environ.get(k) for k in ("WANDB_MODE", "WANDB_SILENT", "WANDB_PROJECT")}
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_PROJECT="tests")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def runs(tmp_path_factory, offline_wandb):
    """The same run twice: every logger on with --strict, then csv only."""
    config_dir = write_run_config(tmp_path_factory.mktemp("tiny"), HACKED, **HACKED_EXPERIMENT)
    root = tmp_path_factory.mktemp("runs")
    every = main_cli(
        [
            "run",
            str(config_dir),
            "--out",
            str(root / "every"),
            "--no-progress",
            "--logger",
            "csv,tensorboard,wandb",
            "--strict",
        ]
    )
    plain = main_cli(["run", str(config_dir), "--out", str(root / "plain"), "--no-progress"])
    return root / "every", root / "plain", every, plain


def metrics_csv(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow  # trains once per logger
def test_the_logger_choice_never_changes_the_result(runs):
    every, plain, _, _ = runs
    assert (every / "metrics.csv").read_text() == (plain / "metrics.csv").read_text()
    assert (every / "checkpoint.msgpack").read_bytes() == (
        plain / "checkpoint.msgpack"
    ).read_bytes()
    first, second = (json.loads((d / "summary.json").read_text()) for d in (every, plain))
    assert first["evaluation"] == second["evaluation"]
    assert first["monitor"] == second["monitor"]
    assert not (plain / "tensorboard").exists() and not (plain / "wandb").exists()


@pytest.mark.slow  # trains to a monitor flag
def test_strict_exits_non_zero_when_the_monitor_flags(runs):
    every, plain, (code_every, out_every), (code_plain, out_plain) = runs
    assert (code_every, code_plain) == (3, 0)  # only --strict turns it into 3
    summary = json.loads((every / "summary.json").read_text())
    assert summary["monitor"]["flagged"]
    assert "hacking" in {f["check"] for f in summary["monitor"]["flags"]}
    for out in (out_every, out_plain):
        assert "REWARD-HACKING MONITOR" in out and "FLAGGED (1/1 seeds)" in out
    assert "--strict: the reward-hacking monitor flagged this run" in out_every
    assert "tracking: tensorboard " in out_every and ", wandb " in out_every
    assert "tracking: monitor " in out_plain  # csv alone costs nothing more
    rows = metrics_csv(every)
    assert {r["monitor/hacking/predator"] for r in rows} == {"0", "1"}


@pytest.mark.slow  # trains with every logger
def test_tensorboard_event_files_hold_the_run(runs):
    every = runs[0]
    rows = metrics_csv(every)
    acc = EventAccumulator(
        str(every / "tensorboard" / "seed_0"),
        size_guidance={"scalars": 0, "images": 0, "tensors": 0},
    )
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    columns = [c for c in rows[0] if c not in ("seed", "update", "env_steps", "active")]
    assert set(columns) <= tags  # every metrics.csv column
    for column in (
        "capture_rate",
        "return/predator/predator_distance",
        "loss/entropy/predator",
        "monitor/hacking/predator",
    ):
        logged = [(e.step, e.value) for e in acc.Scalars(column)]
        expected = [
            (int(r["env_steps"]), float(r[column])) for r in rows if r[column] not in ("nan", "")
        ]
        assert [s for s, _ in logged] == [s for s, _ in expected]
        assert [v for _, v in logged] == pytest.approx([v for _, v in expected], rel=1e-6)
    summary = json.loads((every / "summary.json").read_text())
    trained = summary["evaluation"]["rows"]["trained"]
    (final,) = acc.Scalars("eval/trained/capture_rate")
    assert (final.step, final.value) == (
        int(rows[-1]["env_steps"]),
        pytest.approx(trained["capture_rate"]),
    )
    (gif,) = acc.Images("episode")
    assert gif.encoded_image_string == (every / "episode.gif").read_bytes()
    start = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(start).session_start_info.hparams
    assert hparams["config_hash"].string_value == summary["config_hash"]
    assert hparams["experiment.algorithm.name"].string_value == "ippo"
    assert hparams["rewards.gamma"].number_value == pytest.approx(0.99)


def wandb_records(run_dir: Path) -> list:
    """The records of an offline W&B run file (LevelDB log format: 32 KiB blocks of
    7-byte-headed chunks after a 7-byte W&B header)."""
    (path,) = run_dir.glob("run-*.wandb")
    data, records, pending, pos, block = path.read_bytes(), [], b"", 7, 32768
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            records.append(wandb_pb.Record.FromString(pending))
            pending = b""
    return records


def items(updates) -> dict:
    return {(u.key or "/".join(u.nested_key)): json.loads(u.value_json) for u in updates}


@pytest.mark.slow  # trains with every logger
def test_wandb_offline_run_holds_the_run(runs):
    every = runs[0]
    rows = metrics_csv(every)
    (run_dir,) = (every / "wandb").glob("offline-run-*")
    records = wandb_records(run_dir)
    (run,) = [r.run for r in records if r.HasField("run")]
    assert (run.display_name, run.run_group, run.project) == ("every/seed_0", "every", "tests")
    config = items(run.config.update)
    summary = json.loads((every / "summary.json").read_text())
    assert config["config_hash"] == summary["config_hash"] and config["seed"] == 0
    history = [items(r.history.item) for r in records if r.HasField("history")]
    logged = {h["env_steps"]: h["capture_rate"] for h in history if "capture_rate" in h}
    expected = {
        int(r["env_steps"]): float(r["capture_rate"]) for r in rows if r["capture_rate"] != "nan"
    }
    assert logged == pytest.approx(expected)
    final = {}
    for r in records:
        if r.HasField("summary"):
            final.update(items(r.summary.update))
    trained = summary["evaluation"]["rows"]["trained"]
    assert final["eval/trained/rmst"] == pytest.approx(trained["rmst"])
    assert final["monitor/flags"] == sum(f["seed"] == 0 for f in summary["monitor"]["flags"]) >= 1
    (video,) = (run_dir / "files" / "media" / "videos").glob("episode_*.gif")
    assert video.read_bytes() == (every / "episode.gif").read_bytes()


@pytest.mark.slow  # trains a sweep
def test_a_sweep_logs_one_run_per_arm_and_seed(tmp_path, offline_wandb):
    sweep = write_sweep_file(
        tmp_path / "s.yaml",
        set={"experiment.algorithm": {"name": "random", "params": {"num_steps": 8}}},
        chunk_size=None,
        eval={"episodes": 4},
        output_dir=str(tmp_path / "abl"),
    )
    code, _ = main_cli(["sweep", str(sweep), "--no-progress", "--logger", "tensorboard,wandb"])
    assert code == 0
    with open(tmp_path / "abl" / "curves.csv", newline="") as fh:
        curves = [r for r in csv.DictReader(fh) if r["metric"] == "episode_length"]
    for arm in ("base_only", "both"):
        for seed in (0, 1):
            acc = EventAccumulator(str(tmp_path / "abl" / "tensorboard" / arm / f"seed_{seed}"))
            acc.Reload()
            logged = [e.value for e in acc.Scalars("episode_length")]
            assert logged == pytest.approx(
                [float(r["value"]) for r in curves if (r["arm"], r["seed"]) == (arm, str(seed))]
            )
            assert "eval/capture_rate" in acc.Tags()["scalars"]
    found = {}
    for run_dir in (tmp_path / "abl" / "wandb").glob("offline-run-*"):
        (run,) = [r.run for r in wandb_records(run_dir) if r.HasField("run")]
        found[run.display_name] = (run.run_group, run.job_type, items(run.config.update)["seed"])
    assert found == {
        f"abl/{arm}/seed_{s}": ("abl", arm, s) for arm in ("base_only", "both") for s in (0, 1)
    }


def test_unknown_or_missing_loggers_are_one_line_errors(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "configs/default", "--logger", "csv,mlflow"])
    assert exit_.value.code == 2
    (err,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert (
        "argument --logger: unknown logger 'mlflow'; choose any of ['csv', 'tensorboard', "
        "'wandb'], comma-separated (e.g. csv,tensorboard)" in err
    )
