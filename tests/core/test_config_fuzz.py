"""Fuzzing the config loader: random mutations of the shipped configs (keys dropped, renamed,
retyped, nested, aliased) give a ConfigError or a valid environment, never another
exception."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppage_jax as pj
from ppage_jax.config import ConfigError, ConfigNotice

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = sorted(path.parent for path in CONFIGS.rglob("env.yaml"))
EXAMPLES = int(os.environ.get("PPAGE_FUZZ_EXAMPLES", "50"))


def _read(directory: Path) -> dict[str, dict]:
    return {
        file.name: yaml.safe_load(file.read_text()) for file in sorted(directory.glob("*.yaml"))
    }


def _paths(node, prefix=(), seen=None):
    """Every (container path, key) below a parsed YAML document (shared objects once)."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in list(items):
        yield prefix, key
        yield from _paths(value, prefix + (key,), seen)


def _at(node, path):
    for key in path:
        node = node[key]
    return node


def _bomb():
    """Nested aliases: 6 levels of 9 references each (531441 leaves once expanded)."""
    level = ["x"] * 9
    for _ in range(5):
        level = [level] * 9
    return level


ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=12),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(-3, 3), max_size=2),
    st.sampled_from(
        [
            1e39,
            -1e39,
            2**31,
            2**32,
            -1,
            0,
            1,
            0.5,
            "3e-4",
            "",
            "local_radius",
            "survival",
            "base",
            [[0, 0]],
            {"name": "survival"},
            5000,
            1025,
        ]
    ),
)


@st.composite
def mutated_configs(draw) -> dict[str, dict]:
    files = _read(draw(st.sampled_from(SHIPPED)))
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(files)))
        doc = files[name]
        paths = list(_paths(doc))
        if not paths:
            continue
        path, key = draw(st.sampled_from(paths))
        parent = _at(doc, path)
        op = draw(st.sampled_from(["drop", "rename", "retype", "nest", "alias", "bomb"]))
        if op == "drop":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = parent.pop(key)
        elif op == "retype":
            parent[key] = draw(ODD_VALUES)
        elif op == "nest":
            parent[key] = draw(
                st.sampled_from(
                    [{key if isinstance(key, str) else "k": parent[key]}, [parent[key]]]
                )
            )
        elif op == "alias":  # the same object twice: yaml writes an anchor and an alias
            other_path, other_key = draw(st.sampled_from(paths))
            parent[key] = _at(doc, other_path + (other_key,))
        elif op == "bomb":
            parent[key] = _bomb()
    return files


def _write(directory: Path, files: dict[str, dict]) -> None:
    for name, doc in files.items():
        (directory / name).write_text(yaml.safe_dump(doc, sort_keys=False))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_configs())
def test_mutated_shipped_configs_give_a_config_error_or_an_env(files):
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigNotice)
        _write(Path(tmp), files)
        try:
            config = pj.load_config(tmp)
            env = pj.make(config)
        except ConfigError as err:
            assert len(str(err)) < 3000, str(err)[:200]
            return
        counts = (config["agents"]["predators"]["count"], config["agents"]["preys"]["count"])
        assert (env.layout.n_predators, env.layout.n_prey) == counts
        assert env.num_agents == sum(counts) and env.observation_size >= 1
