"""`ppage-jax convert`: a PPAGE config directory becomes our six strict files, which load
without notices to the same config and build the same environment; and `--experiment` on the
commands that take a config directory."""

from __future__ import annotations

import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml

import ppage_jax as pj
from ppage_jax.cli.args import load_cli_config
from ppage_jax.cli.main import build_parser, main
from ppage_jax.config import ConfigNotice
from ppage_jax.config.ppage_format import experiment_files
from ppage_jax.defaults import SECTIONS
from ppage_jax.train.registry import ALGORITHMS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ppage_configs"
pytestmark = pytest.mark.filterwarnings("ignore::ppage_jax.config.ConfigNotice")


def registered_cases() -> list[tuple[str, str]]:
    """(directory, experiment file) of every fixture whose algorithm is implemented."""
    cases = []
    for directory in sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()):
        for file in experiment_files(FIXTURES / directory):
            config = yaml.safe_load((FIXTURES / directory / file).read_text())
            if config.get("experiment", config)["algorithm"]["name"] in ALGORITHMS:
                cases.append((directory, file))
    return cases


CASES = registered_cases()


def strict_load(directory: Path) -> pj.Config:
    """Load with notices turned into errors: the converted form must need none."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigNotice)
        return pj.load_config(directory)


@pytest.mark.parametrize(("directory", "file"), CASES, ids=[f"{d}/{f}" for d, f in CASES])
def test_convert_round_trips(tmp_path, capsys, directory, file):
    out = tmp_path / "out"
    assert main(["convert", str(FIXTURES / directory), str(out), "--experiment", file]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{s}.yaml" for s in SECTIONS)
    printed = capsys.readouterr().out
    assert f"with {file} -> {out}" in printed and "loads strictly" in printed
    original = pj.load_config(FIXTURES / directory, experiment=file)
    converted = strict_load(out)
    assert converted.to_dict() == original.to_dict()
    a, b = pj.make(original), pj.make(converted)
    assert a.layout == b.layout and a.agent_names == b.agent_names
    assert a.observation_size == b.observation_size and a.reward_terms == b.reward_terms
    assert jax.tree_util.tree_structure(a.default_params) == jax.tree_util.tree_structure(
        b.default_params
    )
    for x, y in zip(
        jax.tree_util.tree_leaves(a.default_params),
        jax.tree_util.tree_leaves(b.default_params),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_convert_prints_what_it_mapped(tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        main(
            ["convert", str(FIXTURES / "dqn_1v1"), str(out), "--experiment", "experiment_dqn.yaml"]
        )
        == 0
    )
    printed = capsys.readouterr().out
    mapped, dropped = printed.split("no effect here (dropped):\n")
    for line in (
        "experiment_dqn.yaml: experiment.algorithm.params.episodes = 2000 -> experiment.episodes",
        "experiment_dqn.yaml: experiment.algorithm.params.seed = 42 -> experiment.seed",
        "experiment_dqn.yaml: experiment.algorithm.params.min_replay_size = 32 "
        "(PPAGE's default; the file leaves it out)",
        "agents.yaml: agents.naming.predator_prefix = 'predator' -> agent names",
    ):
        assert f"  {line}" in mapped, line
    for key in (
        "env.render_mode",
        "env.window_size",
        "agents.predators.base_type",
        "agents.preys.base_type",
        "rewards.normalization",
        "experiment.algorithm.params.device",
        "experiment.algorithm.params.curves_path",
    ):
        assert sum(f" {key} = " in line for line in dropped.splitlines()) == 1, key
    assert all(str(FIXTURES) not in line for line in printed.splitlines()[1:])  # file names
    text = (out / "experiment.yaml").read_text()
    assert text.startswith("# Converted from PPAGE's") and "episodes: 2000" in text
    assert "hidden_layers: [64, 64]" in text


def test_convert_errors(tmp_path, capsys):
    assert main(["convert", str(FIXTURES / "dqn_1v1"), str(tmp_path / "a")]) == 2
    assert "several experiment files" in capsys.readouterr().err
    out = tmp_path / "b"
    assert main(["convert", str(FIXTURES / "d3qn"), str(out)]) == 0
    assert main(["convert", str(FIXTURES / "dqn_speed1"), str(out)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert main(["convert", str(FIXTURES / "dqn_speed1"), str(out), "--force"]) == 0
    assert strict_load(out)["agents"]["predators"]["speed"] == 1


@pytest.mark.parametrize("command", ["run", "render", "audit"])
def test_config_commands_take_an_experiment_file(command):
    args = build_parser().parse_args(
        [command, str(FIXTURES / "dqn_1v1"), "--experiment", "experiment_dqn.yaml"]
    )
    config = load_cli_config(args)
    assert config["experiment"]["algorithm"]["name"] == "dqn"
    assert config["experiment"]["episodes"] == 2000


def test_run_without_experiment_choice_lists_the_files(capsys):
    assert main(["run", str(FIXTURES / "dqn_1v1")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("config error:") and "experiment_a2c.yaml" in err
