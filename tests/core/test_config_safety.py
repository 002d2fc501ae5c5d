"""Configs that cannot go silently wrong: numbers fit their device types, YAML is safe to
load, error messages stay short, and overrides do what users mean."""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pytest

import ppage_jax as pj
from ppage_jax import cli
from ppage_jax.config import ConfigError, ConfigNotice, parse_override, safe_yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def refused(overrides: dict, path=None) -> str:
    with pytest.raises(ConfigError) as info:
        pj.make(path, overrides)
    return str(info.value)


# ------------------------------------------------------------------- numbers fit their types
@pytest.mark.parametrize(
    "overrides, key, words",
    [
        ({"rewards.base.weight": 1e39}, "rewards.base.weight", "finite in float32"),
        (
            {"rewards.shaping": [{"name": "survival", "weight": 1e39}]},
            "rewards.shaping[0].weight",
            "finite number in float32 range",
        ),
        (
            {"rewards.shaping": [{"name": "survival", "weight": -(10**400)}]},
            "rewards.shaping[0].weight",
            "finite number in float32 range",
        ),
        (
            {"rewards.base.params": {"capture_reward": 1e39}},
            "rewards.base.params.capture_reward",
            "finite number in float32 range",
        ),
        (
            {"rewards.base.params": {"step_cost": 10**400}},
            "rewards.base.params.step_cost",
            "finite number in float32 range",
        ),
        ({"env.obstacle_percentage": 10**400}, "env.obstacle_percentage", "finite in float32"),
        ({"env.termination.max_steps": 2**31}, "env.termination.max_steps", "must fit int32"),
        (
            {"env.termination.capture_threshold": 2**40},
            "env.termination.capture_threshold",
            "must fit int32",
        ),
        ({"agents.preys.stamina": 2**31}, "agents.preys.stamina", "must fit int32"),
        ({"env.seed": -(2**31) - 1}, "env.seed", "must fit int32"),
        ({"env.size": 4097}, "env.size", ">= 2 and <= 4096"),
        ({"observations.params.radius": 1025}, "observations.params.radius", "in [0, 1024]"),
        (
            {"observations.per_agent": {"prey": {"radius": 2000}}},
            "observations.per_agent.prey.radius",
            "in [0, 1024]",
        ),
    ],
)
def test_numbers_must_fit_their_types_and_bounds(overrides, key, words):
    message = refused(overrides)
    assert f"{key} = " in message and words in message, message


def test_a_weight_of_1e38_is_still_a_number():
    env = pj.make(None, {"rewards.base.weight": 1e38})
    assert float(env.default_params.reward.weights[0]) == pytest.approx(1e38)


def test_memory_limit_refuses_with_the_estimate():
    # 4000x4000 at 50 %: 8e6 obstacles (64 MB of coordinates) and a 16 MB map.
    message = refused({"env.size": 4000, "env.obstacle_percentage": 50.0})
    assert "env.size = 4000" in message
    assert (
        "the state (6 agents, 8000000 obstacles, 4000x4000 cells) would take 76.3 MiB" in message
        and "limit of 64 MiB" in message
    )
    # local_radius on 2000x2000 at 20 %: 6 agents x (4 + 36 + 4 * 800000) float32 features.
    message = refused({"env.size": 2000})
    assert "observations.type = 'local_radius'" in message
    assert "6 agents x 3200040 float32 features) would take 73.2 MiB" in message
    assert pj.make(None, {"env.size": 2000, "observations.type": "grid"}).observation_size == 245


def test_scientific_notation_without_a_dot_is_a_float(tmp_path):
    directory = write(
        tmp_path / "cfg",
        {
            "rewards.yaml": "rewards:\n  base:\n    weight: 3e-4\n"
            "  shaping:\n  - name: survival\n"
            "    weight: 1E3\n"
        },
    )
    loaded = pj.load_config(directory)
    assert loaded.get("rewards.base.weight") == 3e-4
    assert loaded.get("rewards.shaping")[0]["weight"] == 1000.0
    assert parse_override("rewards.base.weight=3e-4") == ("rewards.base.weight", 3e-4)
    assert parse_override("env.size=12") == ("env.size", 12)  # integers stay integers
    assert parse_override("env.name=e5") == ("env.name", "e5")


# ------------------------------------------------------------------------- YAML is safe
def _alias_bomb(levels: int) -> str:
    names = "abcdefghij"
    lines = [f"    a: &a [{', '.join(['x'] * 9)}]"]
    for i in range(1, levels):
        refs = ", ".join([f"*{names[i - 1]}"] * 9)
        lines.append(f"    {names[i]}: &{names[i]} [{refs}]")
    return "env:\n  map:\n" + "\n".join(lines) + "\n"


def test_nested_aliases_are_refused_quickly_with_a_short_message(tmp_path):
    text = _alias_bomb(9)  # 9**9 leaves once expanded, from ~500 bytes
    assert len(text) < 500
    directory = write(tmp_path / "cfg", {"env.yaml": text})
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        pj.load_config(directory)
    assert time.perf_counter() - start < 2.0
    message = str(info.value)
    assert len(message) < 300, len(message)
    assert "YAML aliases expand to too much" in message and "at most 1000" in message


def test_a_few_aliases_are_fine_and_recursive_ones_are_refused(tmp_path):
    ok = write(
        tmp_path / "ok",
        {
            "rewards.yaml": (
                "rewards:\n  base:\n    params: &p {}\n  shaping:\n"
                "  - {name: survival, weight: 1.0, params: *p}\n"
            )
        },
    )
    assert pj.load_config(ok).get("rewards.shaping")[0]["params"] == {}
    loop = write(tmp_path / "loop", {"env.yaml": "env:\n  map: &m [*m]\n"})
    with pytest.raises(ConfigError, match="recursive aliases never are|not valid YAML"):
        pj.load_config(loop)


def test_large_files_and_deep_nesting_are_refused(tmp_path, monkeypatch):
    big = write(tmp_path / "big", {"env.yaml": "env:\n  size: 10\n" + "# pad\n" * 50})
    monkeypatch.setattr(safe_yaml, "MAX_FILE_BYTES", 200)
    with pytest.raises(ConfigError) as info:
        pj.load_config(big)
    assert "at most 200 bytes" in str(info.value) and "env.yaml" in str(info.value)
    monkeypatch.undo()
    deep = write(tmp_path / "deep", {"env.yaml": "env:\n  map: " + "[" * 5000 + "]" * 5000})
    with pytest.raises(ConfigError, match="nested too deeply|not valid YAML"):
        pj.load_config(deep)
    binary = write(tmp_path / "binary", {})
    (binary / "env.yaml").write_bytes(b"env:\n  name: \xff\xfe\x00\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        pj.load_config(binary)


def test_error_messages_show_values_in_short_form(tmp_path):
    rows = "".join(f"  - '{'.' * 60}'\n" for _ in range(3000))
    directory = write(tmp_path / "cfg", {"env.yaml": "env:\n  map:\n" + rows})
    with pytest.raises(ConfigError) as info:
        pj.load_config(directory)
    message = str(info.value)
    assert len(message) < 400 and "env.map = [" in message and "..." in message, message
    assert len(info.value.value) == 3000  # the error keeps the whole value
    huge = ConfigError("somewhere", "key", list(range(10**6)), "is wrong")
    assert str(huge) == "somewhere: key = [0, 1, 2, 3, 4, 5, ...]: is wrong"
    with pytest.raises(ConfigError) as info:
        pj.load_config(None, {"env.name": ["x" * 10**6]})
    assert len(str(info.value)) < 400


# ------------------------------------------------------------------ overrides mean it
def test_switching_observation_type_alone_takes_that_builders_defaults():
    with pytest.warns(ConfigNotice) as notices:
        loaded = pj.load_config(CONFIGS / "default", {"observations.type": "absolute"})
    assert loaded["observations"] == {"type": "absolute", "params": {}, "per_agent": None}
    message = str(notices[0].message)
    for dropped in (
        "observations.params.radius",
        "observations.params.include_agents",
        "observations.params.include_obstacles",
    ):
        assert dropped in message, message
    assert pj.make(loaded).observation.name == "absolute"


def test_switching_observation_type_keeps_the_params_set_beside_it():
    with pytest.warns(ConfigNotice) as notices:
        loaded = pj.load_config(
            CONFIGS / "default", {"observations.type": "grid", "observations.params.radius": 2}
        )
    assert loaded["observations"]["params"] == {"radius": 2}
    message = str(notices[0].message)
    assert "observations.params.include_agents" in message and "params.radius" not in message
    assert pj.make(loaded).observation_shape == (5, 5, 5)


def test_observation_overrides_that_drop_nothing_are_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigNotice)
        same = pj.load_config(CONFIGS / "default", {"observations.type": "local_radius"})
        assert same["observations"]["params"]["radius"] == 3
        assert pj.load_config(None, {"observations.type": "grid"})["observations"]["params"] == {}
        whole = pj.load_config(
            CONFIGS / "default", {"observations.type": "grid", "observations.params": {"radius": 2}}
        )
        assert pj.make(whole).observation_shape == (5, 5, 5)


def cli_config(*sets: str):
    parser = argparse.ArgumentParser()
    cli.add_config_arguments(parser)
    return cli.load_cli_config(
        parser.parse_args(["configs/default", *sum((["--set", s] for s in sets), [])])
    )


def test_set_a_param_inside_an_open_mapping():
    loaded = cli_config(
        "observations.params.radius=2",
        "rewards.base.params.step_cost=0.5",
        "experiment.algorithm.params.learning_rate=3e-4",
        "observations.per_agent.prey.radius=1",
    )
    assert loaded.get("observations.params") == {
        "radius": 2,
        "include_obstacles": True,
        "include_agents": True,
    }
    assert loaded.get("rewards.base.params.step_cost") == 0.5
    assert loaded.get("experiment.algorithm.params.learning_rate") == 3e-4
    assert loaded.get("observations.per_agent") == {"prey": {"radius": 1}}
    assert (
        pj.make(loaded).observation_size
        == pj.make(None, {"observations.params.radius": 2}).observation_size
    )
    with pytest.raises(ConfigError) as info:
        cli_config("observations.params.sight=2")
    assert "observations.params.sight" in str(info.value) and "unknown param" in str(info.value)
    with pytest.raises(ConfigError, match="observations.params.radius is not a mapping"):
        cli_config("observations.params.radius.x=2")


MAP = [
    "..........",
    "...#......",
    "..........",
    "......#...",
    "..........",
    "..........",
    "..#.......",
    "..........",
    "........#.",
    "..........",
]


def test_set_env_map_on_a_shipped_config_replaces_the_percentage(tmp_path):
    with pytest.warns(ConfigNotice, match="env.map .* replaces env.obstacle_percentage=20.0"):
        loaded = cli_config(f"env.map={MAP}")
    env = pj.make(loaded)
    assert env.layout.num_obstacles == 4
    assert loaded.get("env.obstacle_percentage") == 4.0  # the map's density
    # The saved config (both keys, as a run directory keeps it) loads again as it was.
    (tmp_path / "config.yaml").write_text(loaded.to_yaml())
    assert pj.load_config(tmp_path / "config.yaml").get("env.map") == MAP
    # A percentage set beside the map, other than the map's own, is still an error.
    with pytest.raises(ConfigError, match="must not be set together with env.map"):
        pj.load_config(None, {"env.map": MAP, "env.obstacle_percentage": 20.0})


def test_obstacle_count_is_ppages_left_to_right_expression():
    # int((29/100.0)*10*10) == 29, where int(29/100*(10*10)) == 28.
    assert pj.make(None, {"env.obstacle_percentage": 29.0}).layout.num_obstacles == 29
    assert pj.make(None, {"env.obstacle_percentage": 12.0, "env.size": 5}).layout.num_obstacles == 3
