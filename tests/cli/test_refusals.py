"""Loaded policies are checked and evaluations under another config keep the run intact:
a checkpoint holding a NaN is refused in one line by evaluate, crossplay and render (exit
2, naming the checkpoint and the array), and ``evaluate --set`` writes to
RUN/eval-<hash>/, never over the run's own capture_curves.png; ``run --strict`` with the
monitor disabled says that nothing was checked."""

from __future__ import annotations

import shutil

import jax
import numpy as np
import pytest
import yaml
from cli_testing import write_run_config
from train_testing import untrained_policies

import ppage_jax as pj
from ppage_jax.cli.main import main
from ppage_jax.train import make_train_config
from ppage_jax.train.run import report
from ppage_jax.train.run.checkpoint import save_checkpoint


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two run directories of the tiny IQL config with untrained (zero) Q-tables: ``good``,
    and ``nan`` whose seed-1 table holds one NaN."""
    tmp = tmp_path_factory.mktemp("safety")
    config = pj.load_config(write_run_config(tmp / "tiny"))
    tc = make_train_config(config)
    policies = untrained_policies(tc)
    made = {}
    for name in ("good", "nan"):
        run = tmp / name
        run.mkdir()
        report.write_config(run, config)
        if name == "nan":
            leaves, tree = jax.tree.flatten(policies)
            first = np.array(leaves[0], copy=True)
            first[1].flat[3] = np.nan
            policies = jax.tree.unflatten(tree, [first, *leaves[1:]])
        save_checkpoint(run / report.CHECKPOINT_FILE, tc, policies)
        made[name] = run
    leaf = jax.tree_util.tree_flatten_with_path(policies)[0][0][0]
    made["array"] = "/".join(str(getattr(k, "key", k)) for k in leaf)
    return made


def test_a_nan_checkpoint_is_refused_by_evaluate_crossplay_and_render(runs, tmp_path, capsys):
    path = runs["nan"] / report.CHECKPOINT_FILE
    said = f"{path}: array {runs['array']!r} holds 1 non-finite value(s) (NaN or inf) of "
    assert main(["evaluate", str(runs["nan"])]) == 2
    err = _error(capsys)
    assert err.startswith(f"cannot evaluate: {said}") and "did its training diverge?" in err
    out = tmp_path / "crossplay"
    assert main(["crossplay", str(runs["good"]), str(runs["nan"]), "--out", str(out)]) == 2
    err = _error(capsys)
    assert err.startswith("cannot cross-play: ") and said in err, err
    assert not (out / "crossplay.csv").exists()
    gif = tmp_path / "episode.gif"
    config = str(runs["nan"] / report.CONFIG_FILE)
    assert main(["render", config, "--run", str(runs["nan"]), "--out", str(gif)]) == 2
    assert _error(capsys).startswith(f"ppage-jax render: {said}")
    assert not gif.exists()


def test_a_failed_evaluation_leaves_no_eval_folder(runs, tmp_path, capsys, monkeypatch):
    """Under another config (--episodes 2) the results would go to RUN/eval-<hash>/: a
    refused checkpoint, or a failure while evaluating, leaves no such folder behind."""
    before = sorted(p.name for p in runs["nan"].iterdir())
    assert main(["evaluate", str(runs["nan"]), "--episodes", "2"]) == 2
    assert _error(capsys).startswith("cannot evaluate: ")
    assert sorted(p.name for p in runs["nan"].iterdir()) == before
    run = tmp_path / "run"
    shutil.copytree(runs["good"], run)

    def full_disk(out_dir, *args, **kwargs):
        (out_dir / "capture_curves.png.tmp").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ppage_jax.cli.evaluate.run_evaluation", full_disk)
    assert main(["evaluate", str(run), "--episodes", "2"]) != 0
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in runs["good"].iterdir())


@pytest.mark.slow  # a run through the CLI
def test_evaluate_under_another_config_writes_beside_the_run(runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs["good"], run)
    own = run / report.CAPTURE_CURVES_FILE
    own.write_bytes(b"the run's own curves")
    before = sorted(p.name for p in run.iterdir())
    assert main(["evaluate", str(run), "--set", "env.size=6", "--episodes", "2"]) == 0
    changed = pj.load_config(
        run / report.CONFIG_FILE, {"env.size": 6, "experiment.eval.episodes": 2}
    )
    where = run / f"eval-{changed.hash()}"
    out = capsys.readouterr().out
    assert f"results go to {where}, the run's artefacts are left as they are" in out
    assert own.read_bytes() == b"the run's own curves"
    assert sorted(p.name for p in run.iterdir()) == sorted([*before, where.name])
    assert sorted(p.name for p in where.iterdir()) == [
        "capture_curves.png",
        "evaluated_config.yaml",
        "evaluation.json",
    ]
    evaluated = yaml.safe_load((where / "evaluated_config.yaml").read_text())
    assert evaluated["env"]["size"] == 6 and evaluated["experiment"]["eval"]["episodes"] == 2
    assert pj.load_config(where / "evaluated_config.yaml").hash() == changed.hash()
    assert '"episodes": 2' in (where / "evaluation.json").read_text()


@pytest.mark.slow  # a run through the CLI
def test_strict_with_the_monitor_disabled_says_nothing_was_checked(tmp_path, capsys):
    # One update of the tiny run (8 grids x 16 turns) with the monitor off.
    config = write_run_config(
        tmp_path / "tiny", total_timesteps=128, num_seeds=1, monitor={"enabled": False}
    )
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--strict"]) == 0
    printed = capsys.readouterr().out
    assert (
        "--strict: nothing was checked, the reward-hacking monitor is disabled "
        "(experiment.monitor.enabled: false)\n"
    ) in printed
    assert (out / report.SUMMARY_FILE).is_file()
