"""PPAGE's shipped config directories load unchanged: experiment files, PPAGE-only keys
(mapped, or dropped with one notice each), and a key PPAGE does not have still fails."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
import yaml

import ppage_jax as pj
from ppage_jax.config import ConfigError, ConfigNotice
from ppage_jax.config.experiment.algorithms import ALGORITHM_PARAMS
from ppage_jax.config.experiment.base import defaults as declared_defaults
from ppage_jax.config.ppage_format import (
    PARAM_NOTICES,
    PPAGE_ALGORITHMS,
    PPAGE_DEFAULTS,
    SECTION_NOTICES,
    experiment_files,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ppage_configs"
DIRS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
CASES = [(d, f) for d in DIRS for f in experiment_files(FIXTURES / d)]
pytestmark = pytest.mark.filterwarnings("ignore::ppage_jax.config.ConfigNotice")


def raw_experiment(directory: str, file: str) -> dict:
    """The experiment file as PPAGE reads it: {"name", "params"}."""
    body = yaml.safe_load((FIXTURES / directory / file).read_text())
    return body.get("experiment", body)["algorithm"]


def load(directory: str | Path, **kwargs) -> tuple[pj.Config, list[str]]:
    """Load with every notice recorded; returns the config and the notice messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = pj.load_config(directory, **kwargs)
    return config, [str(w.message) for w in caught if issubclass(w.category, ConfigNotice)]


def copy_fixture(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def test_every_ppage_directory_is_a_fixture():
    assert DIRS == [
        "d3qn",
        "demo_diagonal",
        "demo_plus",
        "demo_speed",
        "dqn_1v1",
        "dqn_speed1",
        "dqn_speed2",
        "dqn_speed3",
        "jalgt_quickstart",
        "top",
    ]
    assert len(CASES) == 22


@pytest.mark.parametrize(("directory", "file"), CASES, ids=[f"{d}/{f}" for d, f in CASES])
def test_every_fixture_loads_with_each_experiment_file(directory, file):
    algorithm = raw_experiment(directory, file)
    name, params = algorithm["name"], algorithm["params"]
    assert name in PPAGE_ALGORITHMS
    if name not in ALGORITHM_PARAMS:  # PPAGE baselines not implemented yet: a clear error
        with pytest.raises(ConfigError, match=f"PPAGE's '{name}' is not available") as info:
            pj.load_config(FIXTURES / directory, experiment=file)
        assert info.value.key == "experiment.algorithm.name"
        assert info.value.source == str(FIXTURES / directory / file)
        return
    config, _ = load(FIXTURES / directory, experiment=file)
    exp = config["experiment"]
    assert exp["algorithm"]["name"] == name
    assert (exp["episodes"], exp["total_timesteps"]) == (params["episodes"], None)
    assert exp["seed"] == params.get("seed", 42)
    for key, value in params.items():  # every hyperparameter we share keeps its value
        if key in exp["algorithm"]["params"]:
            assert exp["algorithm"]["params"][key] == value, key
    pj.make(config)  # builds (no step, no compile)


def test_shipped_values_arrive():
    config, _ = load(FIXTURES / "dqn_1v1", experiment="experiment_dqn.yaml")
    assert config["agents"]["predators"] == {"count": 1, "speed": 2, "stamina": 9999}
    assert config["agents"]["preys"] == {"count": 1, "speed": 1, "stamina": 9999}
    assert config["env"]["seed"] == 42 and config["env"]["obstacle_percentage"] == 20.0
    assert config["observations"]["params"] == {
        "include_agents": True,
        "include_obstacles": True,
        "radius": 8,
    }
    assert [t["name"] for t in config["rewards"]["shaping"]] == ["predator_distance"]
    params = config["experiment"]["algorithm"]["params"]
    assert (params["double_dqn"], params["dueling"], params["hidden_layers"]) == (
        True,
        True,
        [64, 64],
    )
    assert (
        params["batch_size"],
        params["buffer_size"],
        params["target_update_interval"],
        params["epsilon_decay"],
        params["action_dim"],
    ) == (32, 10000, 100, 0.998, 5)
    # left out of the file: PPAGE's code defaults (min_replay_size = batch_size, raw rewards)
    assert (params["min_replay_size"], params["reward_scale"]) == (32, 1.0)
    env = pj.make(config)
    assert env.agent_names == ("predator_1", "prey_1") and env.layout.max_speed == 2


def test_ppage_defaults_fill_what_a_file_leaves_out():
    config, _ = load(FIXTURES / "top")  # experiment.yaml: iql, epsilon 0.2, no decay
    params = config["experiment"]["algorithm"]["params"]
    assert (params["epsilon"], params["epsilon_decay"], params["min_epsilon"]) == (
        0.2,
        1.0,
        0.01,
    )  # PPAGE's IQL keeps epsilon at 0.2
    assert config["experiment"]["episodes"] == 500
    for name, table in PPAGE_DEFAULTS.items():  # every default names a hyperparameter of ours
        assert set(table) <= set(declared_defaults(ALGORITHM_PARAMS[name])), name


def test_experiment_file_choice(tmp_path):
    assert load(FIXTURES / "top")[0]["experiment"]["algorithm"]["name"] == "iql"
    config, _ = load(FIXTURES / "d3qn")  # its only experiment file
    assert config["experiment"]["algorithm"]["name"] == "dqn"
    assert config["experiment"]["episodes"] == 5
    with pytest.raises(ConfigError) as info:
        pj.load_config(FIXTURES / "dqn_1v1")
    message = str(info.value)
    assert "several experiment files" in message
    for name in (
        "experiment_a2c.yaml",
        "experiment_a3c.yaml",
        "experiment_actor_critic.yaml",
        "experiment_dqn.yaml",
    ):
        assert name in message
    with pytest.raises(ConfigError, match="no such experiment file") as info:
        pj.load_config(FIXTURES / "top", experiment="experiment_ppo.yaml")
    assert "experiment_dqn.yaml" in str(info.value)
    with pytest.raises(ConfigError, match="only in a config directory"):
        pj.load_config("configs/default/env.yaml", experiment="experiment.yaml")


def test_legacy_experiment_file_without_wrapper():
    config, notices = load(FIXTURES / "top", experiment="iql_experiment.yaml")
    params = config["experiment"]["algorithm"]["params"]
    assert (params["epsilon"], config["experiment"]["episodes"]) == (0.1, 1000)
    assert sum("legacy form" in n for n in notices) == 1


# The PPAGE keys of the top level with experiment_dqn.yaml that have no effect here.
TOP_DQN_NOTICES = [
    "env.render_mode",
    "env.window_size",
    "agents.predators.base_type",
    "agents.preys.base_type",
    "observations.per_agent",
    "rewards.normalization",
    "experiment.algorithm.params.device",
    "experiment.algorithm.params.curves_path",
]


def test_each_notice_appears_once():
    config, notices = load(FIXTURES / "top", experiment="experiment_dqn.yaml")
    assert len(notices) == len(TOP_DQN_NOTICES)
    for key in TOP_DQN_NOTICES:
        hits = [n for n in notices if f" {key} = " in n]
        assert len(hits) == 1, (key, notices)
        assert "\n" not in hits[0] and "has no effect here" in hits[0]
    assert config["observations"]["per_agent"] is None  # PPAGE ignores it: dropped
    # applies_to equal to the term's own agents changes nothing: kept, without a notice
    assert [t.get("applies_to") for t in config["rewards"]["shaping"]] == ["predator", "prey"]
    every = {
        **SECTION_NOTICES,
        **{f"experiment.algorithm.params.{k}": v for k, v in PARAM_NOTICES.items()},
    }
    for key in TOP_DQN_NOTICES:
        assert any(every[key] in n for n in notices)


def test_a_second_load_notices_again_once(tmp_path):
    _, first = load(FIXTURES / "dqn_speed3")
    _, second = load(FIXTURES / "dqn_speed3")
    assert first == second and len(first) == len(set(first)) == 7


def test_our_own_configs_load_without_notices():
    for name in ("default", "1v1", "ablation/both"):
        _, notices = load(name)
        assert notices == []


@pytest.mark.parametrize(
    ("file", "text", "key"),
    [
        ("agents.yaml", "  colour: grey\n", "agents.colour"),
        ("env.yaml", "  sise: 10\n", "env.sise"),
    ],
)
def test_a_key_ppage_does_not_have_still_fails(tmp_path, file, text, key):
    directory = copy_fixture("dqn_speed3", tmp_path)
    with open(directory / file, "a") as handle:
        handle.write(text)
    with pytest.raises(ConfigError, match="unknown key") as info:
        pj.load_config(directory)
    assert info.value.key == key and info.value.source == str(directory / file)


def test_an_unknown_ppage_hyperparameter_still_fails(tmp_path):
    directory = copy_fixture("dqn_speed3", tmp_path)
    text = (directory / "experiment_dqn.yaml").read_text()
    (directory / "experiment_dqn.yaml").write_text(text + "      prioritized_replay: true\n")
    with pytest.raises(ConfigError, match="unknown hyperparameter of 'dqn'") as info:
        pj.load_config(directory)
    assert info.value.key == "experiment.algorithm.params.prioritized_replay"


def test_action_dim_is_checked_against_the_action_table(tmp_path):
    directory = copy_fixture("demo_diagonal", tmp_path)
    path = directory / "experiment_dqn.yaml"
    path.write_text(path.read_text().replace("action_dim: 5", "action_dim: 9"))
    with pytest.raises(ConfigError, match="must equal the size of action table 'cross', 5"):
        pj.load_config(directory)


def test_unregistered_algorithm_error_names_it():
    saved = dict(ALGORITHM_PARAMS)  # restored whole afterwards, in its original order
    del ALGORITHM_PARAMS["dqn"]
    try:
        with pytest.raises(ConfigError) as info:
            pj.load_config(FIXTURES / "d3qn")
    finally:
        ALGORITHM_PARAMS.clear()
        ALGORITHM_PARAMS.update(saved)
    assert str(info.value).startswith(str(FIXTURES / "d3qn" / "experiment_dqn.yaml"))
    assert "experiment.algorithm.name = 'dqn': PPAGE's 'dqn' is not available" in str(info.value)


def test_naming_prefixes_name_the_agents(tmp_path):
    directory = copy_fixture("top", tmp_path)
    path = directory / "agents.yaml"
    path.write_text(
        path.read_text()
        .replace("predator_prefix: predator", "predator_prefix: wolf")
        .replace("prey_prefix: prey", "prey_prefix: deer")
    )
    env = pj.make(pj.load_config(directory))
    assert env.agent_names == ("wolf_1", "wolf_2", "wolf_3", "deer_1", "deer_2", "deer_3")
    from ppage_jax.observations import slot_order

    assert list(slot_order(env.layout)) == [3, 4, 5, 0, 1, 2]  # names sorted: deer < wolf
    path.write_text(path.read_text().replace("prey_prefix: deer", "prey_prefix: wolf"))
    with pytest.raises(ConfigError, match="must differ from agents.naming.predator_prefix"):
        pj.load_config(directory)


def test_ignored_ppage_cases_are_dropped_with_a_notice(tmp_path):
    directory = copy_fixture("dqn_speed1", tmp_path)
    (directory / "env.yaml").write_text(
        (directory / "env.yaml").read_text().replace("render_mode: null", "render_mode: human")
    )
    (directory / "rewards.yaml").write_text(
        "rewards:\n  base:\n    enabled: true\n  shaping:\n    - name: predator_distance\n"
        "      weight: 0.5\n      applies_to: prey\n      params: {scale: 2}\n"
        "  normalization:\n    enabled: true\n"
    )
    config, notices = load(directory)
    assert config["env"]["render_mode"] is None
    assert config["rewards"]["shaping"] == [{"name": "predator_distance", "weight": 0.5}]
    assert config["rewards"]["normalization"] == {"enabled": False}
    for key in (
        "env.render_mode = 'human'",
        "rewards.shaping[0].applies_to = 'prey'",
        "rewards.shaping[0].params = {'scale': 2}",
        "rewards.normalization = {'enabled': True}",
    ):
        assert sum(key in n for n in notices) == 1, key
    # the same values in our own strict form are errors or take effect
    strict = tmp_path / "strict"
    strict.mkdir()
    (strict / "env.yaml").write_text("env:\n  render_mode: human\n")
    with pytest.raises(ConfigError, match="rgb_array"):
        pj.load_config(strict)


def test_episodes_in_both_places_is_an_error(tmp_path):
    directory = copy_fixture("dqn_speed2", tmp_path)
    path = directory / "experiment_dqn.yaml"
    path.write_text(path.read_text() + "  episodes: 10\n")
    with pytest.raises(ConfigError, match="keep one") as info:
        pj.load_config(directory)
    assert info.value.key == "experiment.algorithm.params.episodes"
