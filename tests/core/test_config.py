"""Config loading: strict errors (file, key, value, rule), shipped configs, overrides, --set."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import ppage_jax as pj
from ppage_jax import cli
from ppage_jax.config import ConfigError, parse_override
from ppage_jax.state import UNLIMITED_STAMINA

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def load_error(directory: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        pj.load_config(directory)
    return info.value


def assert_names_all(err: ConfigError, file: Path, key: str, value, rule: str) -> None:
    """The message names the file, the dotted key, the value and the rule."""
    message = str(err)
    assert str(file) in message, message
    assert key in message, message
    assert repr(value) in message, message
    assert rule in message, message
    assert (err.source, err.key, err.value) == (str(file), key, value)


# (file, YAML text, dotted key, offending value, words of the rule)
BAD_VALUES = {
    "unknown key": ("env.yaml", "env:\n  sise: 10\n", "env.sise", 10, "unknown key"),
    "unknown nested key": (
        "env.yaml",
        "env:\n  dynamics:\n    allow_sharing: true\n",
        "env.dynamics.allow_sharing",
        True,
        "unknown key",
    ),
    "key PPAGE lacks too": (
        "agents.yaml",
        "agents:\n  predators:\n    colour: grey\n",
        "agents.predators.colour",
        "grey",
        "unknown key",
    ),
    "wrong type: string size": (
        "env.yaml",
        "env:\n  size: ten\n",
        "env.size",
        "ten",
        "must be an integer",
    ),
    "wrong type: bool size": (
        "env.yaml",
        "env:\n  size: true\n",
        "env.size",
        True,
        "must be an integer",
    ),
    "wrong type: flag": (
        "env.yaml",
        "env:\n  dynamics:\n    allow_cell_sharing: maybe\n",
        "env.dynamics.allow_cell_sharing",
        "maybe",
        "must be true or false",
    ),
    "wrong type: percentage": (
        "env.yaml",
        "env:\n  obstacle_percentage: lots\n",
        "env.obstacle_percentage",
        "lots",
        "must be a number",
    ),
    "grid smaller than 2": ("env.yaml", "env:\n  size: 1\n", "env.size", 1, ">= 2"),
    "negative predators": (
        "agents.yaml",
        "agents:\n  predators:\n    count: -1\n",
        "agents.predators.count",
        -1,
        ">= 0",
    ),
    "negative prey": (
        "agents.yaml",
        "agents:\n  preys:\n    count: -2\n",
        "agents.preys.count",
        -2,
        ">= 0",
    ),
    "obstacles 100 %": (
        "env.yaml",
        "env:\n  obstacle_percentage: 100\n",
        "env.obstacle_percentage",
        100,
        "in [0, 100)",
    ),
    "obstacles below 0 %": (
        "env.yaml",
        "env:\n  obstacle_percentage: -0.5\n",
        "env.obstacle_percentage",
        -0.5,
        "in [0, 100)",
    ),
    "speed below 1": (
        "agents.yaml",
        "agents:\n  preys:\n    speed: 0\n",
        "agents.preys.speed",
        0,
        ">= 1",
    ),
    "negative stamina": (
        "agents.yaml",
        "agents:\n  predators:\n    stamina: -1\n",
        "agents.predators.stamina",
        -1,
        ">= 0",
    ),
    "capture threshold below 0": (
        "env.yaml",
        "env:\n  termination:\n    capture_threshold: -1\n",
        "env.termination.capture_threshold",
        -1,
        ">= 0",
    ),
    "max_steps below 1": (
        "env.yaml",
        "env:\n  termination:\n    max_steps: 0\n",
        "env.termination.max_steps",
        0,
        ">= 1",
    ),
    "unknown action table": (
        "actions.yaml",
        "actions:\n  type: hexagonal\n",
        "actions.type",
        "hexagonal",
        "unknown action table",
    ),
}


@pytest.mark.parametrize("case", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_bad_value_names_file_key_value_and_rule(tmp_path, case):
    file_name, text, key, value, rule = BAD_VALUES[case]
    directory = write(tmp_path / "cfg", {file_name: text})
    err = load_error(directory)
    assert_names_all(err, directory / file_name, key, value, rule)


def test_unknown_action_table_lists_the_known_ones(tmp_path):
    directory = write(tmp_path / "cfg", {"actions.yaml": "actions:\n  type: hexagonal\n"})
    message = str(load_error(directory))
    for known in ("discrete_5", "cross", "discrete_9"):
        assert known in message


def test_more_agents_than_cells(tmp_path):
    directory = write(
        tmp_path / "cfg",
        {
            "env.yaml": "env:\n  size: 2\n  obstacle_percentage: 0\n",
            "agents.yaml": "agents:\n  predators:\n    count: 3\n  preys:\n    count: 2\n",
        },
    )
    err = load_error(directory)
    assert_names_all(
        err,
        directory / "agents.yaml",
        "agents.preys.count",
        2,
        "5 agents do not fit on 4 cells (2x2)",
    )


def test_no_agents_at_all(tmp_path):
    directory = write(
        tmp_path / "cfg",
        {"agents.yaml": "agents:\n  predators:\n    count: 0\n  preys:\n    count: 0\n"},
    )
    err = load_error(directory)
    assert_names_all(err, directory / "agents.yaml", "agents.predators.count", 0, "at least 1")


def test_unknown_file(tmp_path):
    directory = write(
        tmp_path / "cfg", {"env.yaml": "env:\n  size: 5\n", "rewardz.yaml": "rewardz: {}\n"}
    )
    err = load_error(directory)
    assert_names_all(
        err, directory / "rewardz.yaml", "<file>", "rewardz.yaml", "unknown config file"
    )
    assert "rewards.yaml" in str(err)  # lists what is allowed


def test_missing_path(tmp_path):
    missing = tmp_path / "nowhere"
    err = load_error(missing)
    assert str(missing) in str(err) and "must be an existing config directory" in str(err)


def test_directory_without_config_files(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    err = load_error(empty)
    assert str(empty) in str(err) and "holds no config files" in str(err)
    assert "env.yaml" in str(err)  # lists what is allowed


def test_file_with_the_wrong_top_level_key(tmp_path):
    directory = write(tmp_path / "cfg", {"env.yaml": "environment:\n  size: 5\n"})
    err = load_error(directory)
    assert str(directory / "env.yaml") in str(err)
    assert "'environment'" in str(err) and "'env'" in str(err)


def test_invalid_yaml(tmp_path):
    directory = write(tmp_path / "cfg", {"env.yaml": "env: [unclosed\n"})
    err = load_error(directory)
    assert str(directory / "env.yaml") in str(err) and "not valid YAML" in str(err)
    assert "\n" not in str(err) and str(err).endswith("but got '<stream end>' at line 2, column 1")


def test_error_names_the_file_that_set_the_key(tmp_path):
    # The value is valid alone; the layout check names agents.yaml, where the count was set.
    directory = write(
        tmp_path / "cfg",
        {"env.yaml": "env:\n  size: 3\n", "agents.yaml": "agents:\n  preys:\n    count: 7\n"},
    )
    err = load_error(directory)
    assert err.source == str(directory / "agents.yaml")
    assert "10 agents do not fit on 9 cells" in str(err)


# ------------------------------------------------------------------------ shipped configs


def test_shipped_default_config():
    config = pj.load_config(CONFIGS / "default")
    env = pj.make(config)
    assert config.get("env.size") == 10
    assert config.get("env.obstacle_percentage") == 20.0
    assert config.get("agents.predators.count") == 3 and config.get("agents.preys.count") == 3
    assert env.layout.size == 10 and env.layout.num_obstacles == 20
    assert env.agent_names == (
        "predator_1",
        "predator_2",
        "predator_3",
        "prey_1",
        "prey_2",
        "prey_3",
    )
    assert env.default_params.speeds.tolist() == [1, 1, 1, 3, 3, 3]
    assert env.layout.max_speed == 3
    assert env.default_params.stamina.tolist() == [UNLIMITED_STAMINA] * 6
    assert int(env.default_params.capture_threshold) == 1
    assert int(env.default_params.max_steps) == 500
    assert env.layout.allow_cell_sharing and env.layout.block_agents_by_obstacles
    assert env.action_type == "discrete_5" and env.num_actions == 5
    assert env.reward_terms[:3] == ("base", "predator_distance", "survival")
    assert env.default_params.reward.weights.tolist()[:3] == [1.0, 0.5, 1.0]


def test_package_defaults_equal_the_shipped_default_dynamics():
    shipped, defaults = pj.load_config(CONFIGS / "default"), pj.load_config(None)
    for section in ("env", "agents", "actions"):
        assert shipped[section] == defaults[section], section


def test_shipped_1v1_config():
    env = pj.make(pj.load_config(CONFIGS / "1v1"))
    assert env.agent_names == ("predator_1", "prey_1")
    assert env.default_params.speeds.tolist() == [2, 1]
    assert env.layout.max_speed == 2
    assert env.layout.size == 10 and env.layout.num_obstacles == 20
    assert int(env.default_params.capture_threshold) == 1
    assert int(env.default_params.max_steps) == 500


def test_stamina_is_expressible(tmp_path):
    directory = write(
        tmp_path / "cfg",
        {"agents.yaml": "agents:\n  predators:\n    stamina: 10\n  preys:\n    stamina: 15\n"},
    )
    env = pj.make(pj.load_config(directory))
    assert env.default_params.stamina.tolist() == [10, 10, 10, 15, 15, 15]


def test_missing_files_and_keys_come_from_the_defaults(tmp_path):
    directory = write(tmp_path / "cfg", {"env.yaml": "env:\n  size: 6\n"})
    config = pj.load_config(directory)
    assert config.get("env.size") == 6
    assert config.get("env.termination.max_steps") == 500
    assert config.get("agents.preys.speed") == 3
    assert config.source_of("env.size") == str(directory / "env.yaml")
    assert config.source_of("agents.preys.speed") == "package defaults"


# ------------------------------------------------------------------------------ overrides


def test_overrides():
    config = pj.load_config(
        CONFIGS / "default",
        overrides={
            "env.size": 12,
            "agents.preys.speed": 2,
            "env.dynamics.allow_cell_sharing": False,
        },
    )
    env = pj.make(config)
    assert env.layout.size == 12
    assert env.layout.num_obstacles == 28  # int(0.2 * 144)
    assert env.default_params.speeds.tolist() == [1, 1, 1, 2, 2, 2]
    assert not env.layout.allow_cell_sharing
    assert "override" in config.source_of("env.size")
    # make() takes overrides too, on top of a Config.
    assert pj.make(config, overrides={"env.size": 5}).layout.size == 5


def test_bad_override_names_the_override():
    with pytest.raises(ConfigError) as info:
        pj.load_config(None, overrides={"env.size": 1})
    assert "override env.size=1" in str(info.value) and ">= 2" in str(info.value)
    with pytest.raises(ConfigError) as info:
        pj.load_config(None, overrides={"env.sise": 8})
    assert "env.sise" in str(info.value) and "unknown key" in str(info.value)


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("env.size=12", "env.size", 12),
        ("env.obstacle_percentage=12.5", "env.obstacle_percentage", 12.5),
        ("env.dynamics.allow_cell_sharing=false", "env.dynamics.allow_cell_sharing", False),
        ("env.termination.max_steps=null", "env.termination.max_steps", None),
        ("rewards.shaping=[]", "rewards.shaping", []),
        ("actions.type=cross", "actions.type", "cross"),
        ("experiment.output_dir=runs/a=b", "experiment.output_dir", "runs/a=b"),
    ],
)
def test_set_values_are_parsed_as_yaml(text, key, value):
    assert parse_override(text) == (key, value)


def test_set_without_equals_is_an_error():
    with pytest.raises(ConfigError) as info:
        parse_override("env.size")
    assert "--set" in str(info.value) and "dotted.key=value" in str(info.value)


def test_cli_set_reaches_the_config():
    parser = argparse.ArgumentParser()
    cli.add_config_arguments(parser)
    args = parser.parse_args(
        [str(CONFIGS / "1v1"), "--set", "env.size=7", "--set", "agents.preys.speed=3"]
    )
    config = cli.load_cli_config(args)
    assert config.get("env.size") == 7 and config.get("agents.preys.speed") == 3
    assert config.get("agents.predators.speed") == 2  # the rest still from configs/1v1


def test_cli_reports_a_config_error(capsys):
    code = cli.main(["run", str(CONFIGS / "default"), "--set", "env.size=1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "config error" in err and "env.size" in err and ">= 2" in err


# ------------------------------------------------------------------ what the layers above declare
def test_the_baseline_names_are_the_policies_tables():
    from ppage_jax.config.experiment.roles import BASELINES
    from ppage_jax.policies import PREDATOR_POLICIES, PREY_POLICIES

    assert BASELINES == {"predator": tuple(PREDATOR_POLICIES), "prey": tuple(PREY_POLICIES)}


def test_a_registered_reward_term_is_declared_to_the_config_until_unregistered():
    from ppage_jax.config.schema import REWARD_TERMS
    from ppage_jax.rewards import registry

    assert REWARD_TERMS["survival"].applies_to == "prey"
    assert REWARD_TERMS["base"].numeric_params == (
        "capture_reward",
        "captured_penalty",
        "step_cost",
        "obstacle_penalty",
    )  # credit is a Choice, not a number: it is never scheduled
    assert set(REWARD_TERMS) == set(registry.reward_terms())
    pj.register_reward(
        "test_declared",
        params={"reach": 2.0, "mode": registry.Choice(("a", "b"), "a")},
        applies_to="predator",
    )(lambda ctx: ctx.is_predator.astype(float))
    try:
        assert REWARD_TERMS["test_declared"].applies_to == "predator"
        assert REWARD_TERMS["test_declared"].numeric_params == ("reach",)
    finally:
        registry.unregister_reward("test_declared")
    assert "test_declared" not in REWARD_TERMS


def test_the_experiment_section_is_part_of_the_full_schema():
    from ppage_jax.config.schema import full_defaults, full_schema

    assert full_schema()["experiment"]["num_seeds"].describe() == "must be an integer >= 1"
    assert full_defaults()["experiment"]["algorithm"] == {"name": "random", "params": {}}
