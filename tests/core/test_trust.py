"""Trust, round two (issue 26): names that become paths or table cells are refused unless
they follow the agent-name rule, duplicate YAML keys and two files for one section are
refused, YAML 1.1 base-60 numbers are not numbers, overrides must be a mapping, one writer
per output directory, and new run directories never collide."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppage_jax as pj
from ppage_jax.analysis.sweep.spec import load_sweep
from ppage_jax.artifacts import DirectoryLock, OutputError, inside
from ppage_jax.config import NAME_RULE, ConfigError, is_safe_name, load_config, load_yaml
from ppage_jax.tracking.base import check_run_name
from ppage_jax.tracking.loggers import open_logger
from ppage_jax.train.run import report

REPO = Path(__file__).resolve().parents[2]
BAD_NAMES = ["../../x", "/abs/path", "a\nb", "a|b", "x y", ".hidden", "1arm", "", "a" * 65]


def _sweep(path: Path, arms: dict) -> Path:
    body = {"config": str(REPO / "configs/ablation/both"), "arms": arms, "baseline": "ok"}
    path.write_text(yaml.safe_dump({"sweep": body}))
    return path


@pytest.mark.parametrize("name", BAD_NAMES)
def test_an_arm_name_that_is_not_a_safe_name_is_refused(tmp_path, name):
    file = _sweep(tmp_path / "s.yaml", {"ok": {}, name: {}})
    with pytest.raises(ConfigError) as err:
        load_sweep(file)
    assert str(err.value) == (
        f"{file}: sweep.arms = {name!r}: an arm name must be a string {NAME_RULE}"
    )
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["../x", "a\nb", "with space"])
def test_env_name_follows_the_name_rule(tmp_path, name):
    (tmp_path / "env.yaml").write_text(yaml.safe_dump({"env": {"name": name}}))
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'env.yaml'}: env.name = {name!r}: must be")
    assert NAME_RULE in str(err.value)
    assert load_config(None, {"env.name": "gridworld"})["env"]["name"] == "gridworld"


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "arm/../../x", "a\nb", "arm/"])
def test_a_logger_run_name_that_climbs_out_is_refused(tmp_path, name):
    with pytest.raises(OutputError, match="logger run name .* is refused"):
        open_logger(["tensorboard"], tmp_path / "out", name, "g", {})
    assert not (tmp_path / "x").exists() and not Path("/abs/path").exists()


def test_inside_refuses_absolute_and_climbing_names(tmp_path):
    assert inside(tmp_path, "a/b") == tmp_path / "a" / "b"
    for name in ("/etc", "../x", "a/../../x"):
        with pytest.raises(OutputError, match="would write outside"):
            inside(tmp_path, name)


_PIECES = ["a", "b1", "/", ".", "..", "_", "-", "\n", " ", "~", "/abs", "\\"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=6).map("".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(arm=_TEXT, seed=st.integers(0, 3))
def test_fuzz_no_logger_file_is_written_outside_the_output_directory(tmp_path, arm, seed):
    """Any arm name: either refused, or every TensorBoard event file lies under the output
    directory (an arm x seed run is logged as ``<arm>/seed_<seed>``, as sweeps do)."""
    root = tmp_path / f"case{abs(hash((arm, seed)))}"
    out = root / "out"
    name = f"{arm}/seed_{seed}"
    try:
        logger = open_logger(["tensorboard"], out, name, "g", {"a": 1})
    except OutputError:
        assert not all(is_safe_name(part) for part in arm.split("/"))
        return
    logger.log_scalars(1, {"x": 1.0})
    logger.close()
    assert all(is_safe_name(part) for part in arm.split("/"))  # each part of the run name
    written = [p for p in root.rglob("*") if p.is_file()]
    assert written and all(p.resolve().is_relative_to(out.resolve()) for p in written)


@settings(max_examples=60, deadline=None)
@given(name=st.text(max_size=70))
def test_fuzz_names_accepted_are_single_path_parts_and_table_cells(name):
    if is_safe_name(name):
        assert Path(name).name == name and name not in (".", "..")
        assert not re.search(r"[\s|/\\.]", name)
        assert check_run_name(f"{name}/seed_0") == f"{name}/seed_0"
    elif name.split("/") and all(is_safe_name(part) for part in name.split("/")):
        # A run name joins safe parts with '/' (arm/seed_0): accepted as it is.
        assert check_run_name(name) == name
    else:
        with pytest.raises(OutputError):
            check_run_name(name)


# ------------------------------------------------------------------ duplicate YAML keys


@pytest.mark.parametrize(
    "text, key, line, first",
    [
        ("env:\n  size: 5\nenv:\n  size: 6\n", "env", 3, 1),  # a section given twice
        ("env:\n  size: 5\n  size: 6\n", "env.size", 3, 2),  # depth 2
        (
            "env:\n  termination:\n    max_steps: 5\n    max_steps: 9\n",
            "env.termination.max_steps",
            4,
            3,
        ),
    ],
)
def test_duplicate_keys_are_refused_at_every_depth(tmp_path, text, key, line, first):
    file = tmp_path / "env.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    name = key.rsplit(".", 1)[-1]
    assert str(err.value) == (
        f"{file}: {key} = {name!r}: duplicate key at line {line} (first given at line "
        f"{first}); each key may appear once in a mapping"
    )


def test_a_duplicate_key_in_a_list_item_is_refused(tmp_path):
    file = tmp_path / "rewards.yaml"
    file.write_text(
        "rewards:\n  shaping:\n    - {name: survival, name: predator_distance, weight: 1}\n"
    )
    with pytest.raises(
        ConfigError, match=r"rewards\.shaping\[0\]\.name = 'name': duplicate key at line 3"
    ):
        load_config(tmp_path)


def test_two_files_for_one_section_are_refused(tmp_path):
    (tmp_path / "env.yaml").write_text("env:\n  size: 5\n")
    (tmp_path / "env.yml").write_text("env:\n  size: 6\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'env.yml'}: <file> = 'env.yml': section 'env' is already given by "
        f"env.yaml; keep one file per section"
    )


def test_duplicate_keys_in_a_sweep_file_and_in_set_values_are_refused(tmp_path):
    file = tmp_path / "s.yaml"
    file.write_text("sweep:\n  seeds: 2\n  seeds: 3\n")
    with pytest.raises(ConfigError, match=r"sweep\.seeds = 'seeds': duplicate key at line 3"):
        load_sweep(file)
    with pytest.raises(ConfigError, match="duplicate key"):
        load_yaml("{a: 1, a: 2}", "--set")


# ------------------------------------------------------------------ YAML 1.1 oddities


def test_base_60_numbers_are_strings_and_refused_where_a_number_is_expected(tmp_path):
    assert load_yaml("m: 1:30", "f") == {"m": "1:30"}
    assert load_yaml("b: 12\nc: 1e3", "f") == {"b": 12, "c": 1000.0}
    with pytest.raises(ConfigError, match=r"f: a = '0x10': numbers must be written plainly"):
        load_yaml("a: 0x10", "f")
    (tmp_path / "env.yaml").write_text("env:\n  termination:\n    max_steps: 1:30\n")
    with pytest.raises(
        ConfigError, match=r"env\.termination\.max_steps = '1:30': must be an integer"
    ):
        load_config(tmp_path)


def test_overrides_must_be_a_mapping():
    with pytest.raises(ConfigError) as err:
        load_config(None, [("env.size", 6)])
    assert str(err.value) == (
        "overrides: <overrides> = [('env.size', 6)]: must be a mapping of dotted keys to "
        "values, e.g. {'env.size': 12}"
    )


def test_with_term_params_names_a_bad_choice():
    env = pj.make(load_config(None))
    with pytest.raises(ValueError) as err:
        env.with_term_params(env.default_params, "base", credit="half")
    assert str(err.value) == (
        "param 'credit' of term 'base' = 'half': must be one of ['full', 'split', 'team']"
    )
    with pytest.raises(ValueError, match="must be one of"):
        env.with_term_params(env.default_params, "base", credit=1.5)


# ------------------------------------------------------------------ one writer per directory


def test_a_second_lock_names_the_holder_and_a_released_lock_is_free(tmp_path):
    with DirectoryLock(tmp_path, "run directory"):
        assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
        with pytest.raises(OutputError) as err:
            DirectoryLock(tmp_path, "run directory").acquire()
        assert str(err.value) == (
            f"run directory {tmp_path} is in use by another ppage-jax process (PID "
            f"{os.getpid()}, lock {tmp_path / '.lock'}); wait for it to finish or stop it"
        )
    assert not (tmp_path / ".lock").exists()
    (tmp_path / ".lock").write_text("12345\n")  # left by a crashed writer: not held
    DirectoryLock(tmp_path).acquire().release()


def test_two_new_runs_in_the_same_second_get_two_directories(tmp_path, monkeypatch):
    config = load_config(None, {"experiment.output_dir": str(tmp_path)})
    monkeypatch.setattr(report.time, "strftime", lambda *_: "20250101-000000")
    first, lock = report.prepare_run_dir(config)
    second = report.new_run_dir(config)
    third = report.new_run_dir(config)
    lock.release()
    assert first.name.endswith("-20250101-000000")
    assert second == first.with_name(first.name + "-2")
    assert third == first.with_name(first.name + "-3")
