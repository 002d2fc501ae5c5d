"""Config oddities that used to pass silently: each is refused in one line or announced
with a notice (docs/configuration.md, "Refused or announced")."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import yaml

import ppage_jax as pj
from ppage_jax.config import ConfigError, ConfigNotice, load_yaml, parse_override
from ppage_jax.wrappers import BatchedAutoResetEnv


def notices_of(path, overrides=None) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pj.load_config(path, overrides)
    return [str(w.message) for w in caught if w.category is ConfigNotice]


def test_a_capture_threshold_above_three_prey_is_announced():
    (message,) = notices_of("configs/default", {"env.termination.capture_threshold": 10})
    assert message == (
        "env.termination.capture_threshold = 10 can never be reached: it counts captured prey, "
        "each prey is captured at most once, and there are 3 (agents.preys.count); episodes "
        "end only at the step limit"
    )
    assert notices_of("configs/default", {"env.termination.capture_threshold": 3}) == []


def test_a_shaping_entry_without_a_weight_is_announced_as_weighted_one():
    shaping = {"rewards.shaping": [{"name": "survival"}, {"name": "prey_distance", "weight": 2}]}
    assert notices_of("configs/default", shaping) == [
        "rewards.shaping[0] (survival) gives no weight: it is weighted 1.0 (write weight: 1.0 "
        "to say so)"
    ]
    env = pj.make(None, shaping)
    assert [t.weight for t in env.spec.rewards][-2:] == [1.0, 2.0]


def test_a_budget_below_one_update_is_announced_with_the_plan():
    (message,) = notices_of("configs/default", {"experiment.total_timesteps": 1})
    assert message == (
        "experiment.total_timesteps = 1 is less than one update: the run plans 1 update of 256 "
        "grids (experiment.num_envs) x 32 turns (num_steps) = 8,192 env steps per seed, "
        "8.19e+03x what was asked"
    )


@pytest.mark.parametrize("name", ["ENV.YAML", "Env.yaml", "REWARDS.yml", "Experiment.yaml"])
def test_an_uppercase_config_file_is_refused_naming_the_lowercase_name(tmp_path, name):
    section = name.split(".")[0].lower()
    body = {section: {"size": 6} if section == "env" else {}}
    (tmp_path / name).write_text(yaml.safe_dump(body))
    (tmp_path / "agents.yaml").write_text("agents: {}\n")
    lower = name.lower()
    with pytest.raises(ConfigError) as err:
        pj.load_config(tmp_path)
    assert str(err.value) == (
        f"{tmp_path / name}: <file> = {name!r}: config file names are lowercase: this file is "
        f"not read as {lower}; rename it to {lower}"
    )


@pytest.mark.parametrize("text", ["1_0", "0x10", "010", "0b11", "+0x1", "1_0.5"])
def test_numbers_not_written_plainly_are_refused_in_files_and_in_set(tmp_path, text):
    with pytest.raises(ConfigError) as err:
        parse_override(f"env.size={text}")
    assert str(err.value) == (
        f"--set: env.size = {text!r}: numbers must be written plainly (line 1): an integer in "
        f"decimal digits (no 0x, 0b or leading 0) and no '_' in any number"
    )
    (tmp_path / "env.yaml").write_text(f"env:\n  size: {text}\n")
    with pytest.raises(
        ConfigError, match=rf"env\.yaml: env\.size = '{re.escape(text)}'.*\(line 2\)"
    ):
        pj.load_config(tmp_path)
    assert load_yaml("a: 10\nb: -3\nc: 0\nd: '0x10'\ne: 3e-4", "f") == {
        "a": 10,
        "b": -3,
        "c": 0,
        "d": "0x10",
        "e": 3e-4,
    }


def test_a_section_overridden_with_null_is_refused():
    with pytest.raises(ConfigError) as err:
        pj.load_config(None, {"env.dynamics": None})
    assert str(err.value) == (
        "override env.dynamics=None: env.dynamics = None: a section cannot be set to null; set "
        "its keys instead (env.dynamics.KEY, keys: ['allow_cell_sharing', "
        "'block_agents_by_obstacles'])"
    )
    with pytest.raises(ConfigError, match="env = None: a section cannot be set to null"):
        pj.load_config(None, {"env": None})


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"rewards.shaping": [{"name": "survival", "weight": 1e-50}]}, "rewards.shaping[0].weight"),
        (
            {"rewards.shaping": [{"name": "survival", "weight": -1e-40}]},
            "rewards.shaping[0].weight",
        ),
        ({"rewards.base.weight": 1e-50}, "rewards.base.weight"),
        ({"rewards.base.params.step_cost": 1e-45}, "rewards.base.params.step_cost"),
        ({"experiment.algorithm.params.learning_rate": 1e-39}, "learning_rate"),
    ],
)
def test_a_number_float32_turns_into_zero_is_refused(overrides, key):
    with pytest.raises(ConfigError) as err:
        pj.load_config("configs/default", overrides)
    message = str(err.value)
    assert f"{key} = " in message and "\n" not in message
    assert message.endswith(
        "a non-zero number must be at least 1.175e-38 in magnitude (float32 turns smaller ones "
        "into 0); write 0 or a larger number"
    )
    if "learning_rate" not in key:  # 0 itself is fine
        ((name, value),) = overrides.items()
        zero = [{"name": "survival", "weight": 0.0}] if isinstance(value, list) else 0.0
        assert pj.load_config("configs/default", {name: zero}).get(name) == zero


def test_a_weight_that_overflows_float32_is_refused():
    with pytest.raises(ConfigError, match=r"rewards\.shaping\[0\]\.weight = 1e\+39: must be"):
        pj.load_config(None, {"rewards.shaping": [{"name": "survival", "weight": 1e39}]})


@pytest.mark.parametrize(
    "value, error, message",
    [
        (2.5, TypeError, "num_envs must be an integer, got 2.5"),
        (True, TypeError, "num_envs must be an integer, got True"),
        ("4", TypeError, "num_envs must be an integer, got '4'"),
        (0, ValueError, "num_envs must be >= 1, got 0"),
        (-3, ValueError, "num_envs must be >= 1, got -3"),
    ],
)
def test_batched_auto_reset_refuses_a_num_envs_that_is_not_a_positive_integer(
    value, error, message
):
    env = pj.make(None, {"env.size": 5, "agents.predators.count": 1, "agents.preys.count": 1})
    with pytest.raises(error) as err:
        BatchedAutoResetEnv(env, value)
    assert str(err.value) == message
    with pytest.raises(TypeError, match="resets_per_step must be an integer, got 1.5"):
        BatchedAutoResetEnv(env, 4, resets_per_step=1.5)
    assert BatchedAutoResetEnv(env, np.int64(3)).num_envs == 3
