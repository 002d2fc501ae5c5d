"""User terms on the command line: ``--import MODULE_OR_FILE`` (a file that registers a
reward term, used by ``run`` and ``sweep``), the ``ppage_jax.plugins`` entry points, and the
one-line refusals of a missing module or file, a module that raises, a plugin that raises and
a config naming a term nobody registered (with the hint how to register it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from cli_testing import main_cli, write_run_config
from sweep_testing import write_sweep

import ppage_jax as pj
from ppage_jax.cli.args import (
    PLUGIN_GROUP,
    USER_MODULE_PREFIX,
    UsageError,
    import_flags,
    import_user_modules,
    load_plugins,
    user_module_name,
)
from ppage_jax.cli.main import main
from ppage_jax.rewards.registry import UNREGISTERED_HINT, unregister_reward

TERM = "my_test_bonus"
PLUGIN_TERM = "my_plugin_bonus"
PLUGIN_MODULE = "ppage_jax_test_plugin"
HINT = "pass --import MODULE_OR_FILE, or install a package with a ppage_jax.plugins entry point"

TERM_FILE = f'''
import jax.numpy as jnp
import ppage_jax as pj


@pj.register_reward("{TERM}", params={{"scale": 1.0}}, applies_to="predator", bounds=(0.0, 1.0))
def my_test_bonus(ctx):
    """+scale to each predator while a prey is free."""
    return ctx.is_predator.astype(jnp.float32) * ctx.free_prey.any() * ctx.params["scale"]
'''
# The tiny run with the user term, 1 seed of the random learner: one update of 8 turns on
# 4 grids, 2 held-out episodes, the monitor off.
TINY_RUN_SETS = [
    f"rewards.shaping=[{{name: {TERM}, weight: 0.5}}]",
    "experiment.algorithm={name: random, params: {num_steps: 8}}",
    "experiment.num_seeds=1",
    "experiment.num_envs=4",
    "experiment.total_timesteps=32",
    "experiment.eval.episodes=2",
    "experiment.monitor.enabled=false",
]
# A base-only arm and one paying the user term (the tiny random scenario, one seed).
BONUS_ARMS = {
    "base_only": {"disable": ["predator_distance", "survival"]},
    "bonus": {"weights": {TERM: 0.5}},
}


def _sets(values: list[str]) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


def _one_line(capsys) -> str:
    """What the command wrote on stderr: one line, no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def forget():
    """Unregister the test terms and drop the test modules from ``sys.modules`` after the
    test (a later test imports them afresh)."""
    yield
    for name in (TERM, PLUGIN_TERM):
        unregister_reward(name)
    for name in [n for n in sys.modules if n.startswith(USER_MODULE_PREFIX)]:
        del sys.modules[name]
    sys.modules.pop(PLUGIN_MODULE, None)


@pytest.fixture
def term_file(tmp_path, forget) -> Path:
    path = tmp_path / "my_terms.py"
    path.write_text(TERM_FILE)
    return path


@pytest.fixture
def tiny(tmp_path) -> Path:
    return write_run_config(tmp_path / "tiny")


def _plugin(site: Path, body: str) -> None:
    """An installed distribution in ``site``: its module and a dist-info declaring it as a
    ``ppage_jax.plugins`` entry point."""
    site.mkdir()
    (site / f"{PLUGIN_MODULE}.py").write_text(body)
    info = site / "ppage_jax_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ppage-jax-test-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\ntest_plugin = {PLUGIN_MODULE}\n")


# ----------------------------------------------------------------------------- --import


def test_a_file_is_imported_once_under_a_stable_name(term_file):
    import_user_modules([str(term_file), str(term_file)])  # the second import is a no-op
    assert TERM in pj.reward_terms()
    name = user_module_name(term_file)
    assert name == user_module_name(term_file.parent / "." / term_file.name)
    assert name.startswith(f"{USER_MODULE_PREFIX}my_terms_")
    assert sys.modules[name].my_test_bonus is pj.rewards.get_term(TERM).fn
    # what a printed resume command repeats
    assert (
        import_flags(["my terms.py", "lab.rewards"])
        == " --import 'my terms.py' --import lab.rewards"
    )


def test_a_module_name_is_imported(tmp_path, forget, monkeypatch):
    (tmp_path / "my_terms_module.py").write_text(TERM_FILE)
    monkeypatch.syspath_prepend(tmp_path)
    try:
        import_user_modules(["my_terms_module"])
        assert TERM in pj.reward_terms()
    finally:
        sys.modules.pop("my_terms_module", None)


def test_run_and_sweep_read_the_term_of_an_imported_file(term_file, tiny, tmp_path, capsys):
    """Both commands load their configs with the term (the refusal is the output path's,
    given as a file so that nothing trains)."""
    taken = tmp_path / "taken"
    taken.write_text("")
    argv = [
        "run",
        str(tiny),
        "--import",
        str(term_file),
        "--out",
        str(taken),
        *_sets(TINY_RUN_SETS),
    ]
    assert main(argv) == 2
    assert "is an existing file" in _one_line(capsys)
    sweep = write_sweep(tmp_path / "s.yaml", arms=BONUS_ARMS, seeds=1, output_dir=str(taken))
    assert main(["sweep", str(sweep), "--import", str(term_file), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"'{TERM}'" in err.splitlines()[0] and "is an existing file" in err, err


@pytest.mark.slow  # a run through the CLI
def test_run_trains_with_the_imported_term(term_file, tiny, tmp_path):
    out = tmp_path / "run"
    argv = ["run", str(tiny), "--import", str(term_file), "--out", str(out), "--no-progress"]
    code, printed = main_cli([*argv, *_sets(TINY_RUN_SETS)])
    assert code == 0, printed
    assert f"terms ['base', '{TERM}']" in printed
    shaping = yaml.safe_load((out / "config.yaml").read_text())["rewards"]["shaping"]
    assert [entry["name"] for entry in shaping] == [TERM]
    summary = json.loads((out / "summary.json").read_text())
    assert f"return/predator/{TERM}" in json.dumps(summary)


@pytest.mark.slow  # trains a sweep
def test_sweep_trains_an_arm_with_the_imported_term(term_file, tmp_path):
    out = tmp_path / "abl"
    sweep = write_sweep(tmp_path / "s.yaml", arms=BONUS_ARMS, seeds=1, output_dir=str(out))
    code, printed = main_cli(["sweep", str(sweep), "--import", str(term_file), "--no-progress"])
    assert code == 0, printed
    assert TERM in json.loads((out / "sweep.json").read_text())["terms"]


def test_a_missing_module_or_file_is_one_line(tiny, capsys):
    assert main(["run", str(tiny), "--import", "no_such_module_here"]) == 2
    assert _one_line(capsys) == (
        "ppage-jax: --import no_such_module_here: ModuleNotFoundError: "
        "No module named 'no_such_module_here'"
    )
    assert main(["audit", str(tiny), "--import", "no/such/terms.py"]) == 2
    assert _one_line(capsys) == "ppage-jax: --import no/such/terms.py: no such file"


def test_a_module_name_naming_a_file_here_hints_at_its_path(term_file, tiny, capsys, monkeypatch):
    monkeypatch.chdir(term_file.parent)
    assert main(["render", str(tiny), "--import", "my_terms", "--out", "e.gif"]) == 2
    assert _one_line(capsys).endswith(
        "No module named 'my_terms' (to import the file, pass its path: --import my_terms.py)"
    )


def test_a_file_that_raises_is_one_line_naming_it(tmp_path, tiny, capsys):
    bad = tmp_path / "bad_terms.py"
    bad.write_text("raise RuntimeError('no grid for me\\nsecond line')\n")
    assert main(["run", str(tiny), "--import", str(bad)]) == 2
    assert _one_line(capsys) == f"ppage-jax: --import {bad}: RuntimeError: no grid for me"
    assert user_module_name(bad) not in sys.modules
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert main(["evaluate", str(tmp_path), "--import", str(broken)]) == 2
    assert _one_line(capsys).startswith(f"ppage-jax: --import {broken}: SyntaxError: ")


def test_an_unknown_term_says_how_to_register_one(tiny, tmp_path, capsys):
    argv = ["run", str(tiny), "--set", "rewards.shaping=[{name: nobody_registered_this}]"]
    assert main(argv) == 2
    err = _one_line(capsys)
    assert "'nobody_registered_this': unknown reward term; known terms: [" in err
    assert err.endswith(UNREGISTERED_HINT) and HINT in err
    sweep = write_sweep(tmp_path / "s.yaml", arms={"a": {"weights": {"nobody_registered_this": 1}}})
    assert main(["sweep", str(sweep), "--output", str(tmp_path / "out")]) == 2
    assert _one_line(capsys).endswith(UNREGISTERED_HINT)
    assert main(["audit", str(tiny), "--set", "observations.type=nobody_built_this"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the params notice
    assert "unknown observation builder; known: [" in err and err.endswith(f"{HINT})")


# ------------------------------------------------------------------------- entry points


def test_an_installed_plugin_registers_its_terms(tmp_path, forget, monkeypatch):
    body = TERM_FILE.replace(TERM, PLUGIN_TERM)
    _plugin(tmp_path / "site", body)
    monkeypatch.syspath_prepend(tmp_path / "site")
    assert PLUGIN_TERM not in pj.reward_terms()
    assert "test_plugin" in load_plugins()
    assert PLUGIN_TERM in pj.reward_terms()
    assert load_plugins() == load_plugins()  # once imported, a plugin is not run again


def test_a_plugin_that_raises_is_one_line_naming_it(tmp_path, tiny, forget, monkeypatch, capsys):
    _plugin(tmp_path / "site", "import ppage_jax\nraise ImportError('needs torch')\n")
    monkeypatch.syspath_prepend(tmp_path / "site")
    with pytest.raises(UsageError, match="plugin 'test_plugin'"):
        load_plugins()
    assert main(["run", str(tiny)]) == 2
    assert _one_line(capsys) == (
        f"ppage-jax: plugin 'test_plugin' ({PLUGIN_MODULE}, a {PLUGIN_GROUP} entry point): "
        "ImportError: needs torch"
    )
    with pytest.raises(SystemExit) as info:  # --version and --help never load plugins
        main(["--version"])
    assert info.value.code == 0
