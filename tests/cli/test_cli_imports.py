"""A command line that answers at once: ``ppage-jax --help``, every subcommand's ``--help`` and
usage errors import no JAX, no learner, plotting, checkpoint or progress-bar library and not
even NumPy; a config error is reported before the learners, the pictures and the checkpoints
load (the shipped reward terms it checks against load JAX's core). Modules are counted in a
fresh interpreter, never timed. Also: the constants the parsers spell out agree with the
modules they come from, the compile cache starts when JAX loads, and the status lines tick."""

from __future__ import annotations

import importlib
import io
import json
import os
import subprocess
import sys
import time

import pytest

from ppage_jax.cli.main import COMMANDS, _after_import
from ppage_jax.tracking.status import TICK_SECONDS, phase, refreshing

# Never loaded by --help or a usage error.
NOT_FOR_HELP = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "orbax",
    "matplotlib",
    "numpy",
    "scipy",
    "tqdm",
    "imageio",
    "yaml",
)
# Never loaded before a config error is reported.
NOT_FOR_CONFIG_ERRORS = ("flax", "optax", "orbax", "matplotlib", "tqdm", "imageio")
NOT_FOR_CONFIG_ERRORS_HERE = ("train", "viz", "analysis", "bench", "env", "policies")
# What of those the parsers may load: the Ctrl-C handling (no JAX).
LIGHT = {"ppage_jax.train", "ppage_jax.train.run", "ppage_jax.train.run.interrupt"}

PROBE = """
import contextlib, io, json, sys
from ppage_jax.cli.main import main

codes, errors = [], []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            codes.append(main(argv))
        except SystemExit as stop:
            codes.append(stop.code)
    errors.append(err.getvalue())
print(json.dumps({"codes": codes, "errors": errors, "modules": sorted(sys.modules)}))
"""


def _probe(cases: list[list[str]], **env: str) -> dict:
    """Run ``main(argv)`` for each case in one fresh interpreter: exit codes, stderr texts
    and every module loaded by then (the union over the cases)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(cases)],
        capture_output=True,
        text=True,
        env=dict(os.environ, JAX_PLATFORMS="cpu", **env),
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _loaded(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in packages]


def test_help_and_usage_errors_load_no_jax_learner_or_numpy():
    helps = [["--help"], ["--version"]] + [[name, "--help"] for name in COMMANDS]
    errors = [
        ["run", "--bogus"],  # an unknown flag
        ["evaluate"],  # a missing argument
        ["render", "configs/default", "--fps", "0"],  # a bad value
        ["sweep", "--layout", "nope"],  # not one of the choices
        ["nosuch"],  # no such subcommand
    ]
    loaded = _probe(helps + errors)
    assert loaded["codes"] == [0] * len(helps) + [2] * len(errors), loaded["errors"]
    for text in loaded["errors"][len(helps) :]:
        assert len(text.strip().splitlines()) == 1 and "error:" in text, text
    heavy = _loaded(loaded["modules"], NOT_FOR_HELP)
    assert heavy == [], f"{len(loaded['modules'])} modules, among them {heavy[:20]}"
    ours = [m for m in loaded["modules"] if m.startswith("ppage_jax.") and m not in LIGHT]
    assert not [m for m in ours if m.split(".")[1] in ("config", *NOT_FOR_CONFIG_ERRORS_HERE)]


def test_config_errors_are_reported_before_the_learners_load(tmp_path):
    unknown_key, bad_type = tmp_path / "unknown_key", tmp_path / "bad_type"
    unknown_key.mkdir()
    bad_type.mkdir()
    (unknown_key / "env.yaml").write_text("env:\n  bogus: 3\n")
    (bad_type / "env.yaml").write_text("env:\n  size: twelve\n")
    out = tmp_path / "run"
    cases = [
        ["run", str(unknown_key), "--out", str(out)],
        ["run", str(bad_type), "--out", str(out)],
        ["run", "configs/default", "--set", "rewards.shaping=[{name: nosuch}]", "--out", str(out)],
        # a weight that is no number: a config error, not a traceback
        ["run", "configs/default", "--set", "rewards.shaping=[{name: survival, weight: x}]"],
        ["audit", str(bad_type)],
        ["render", str(unknown_key)],
    ]
    loaded = _probe(cases, PPAGE_JAX_COMPILE_CACHE=str(tmp_path / "cache"))  # on, as for users
    assert loaded["codes"] == [2] * len(cases), loaded["errors"]
    for text in loaded["errors"]:
        assert text.startswith("config error: ") and len(text.strip().splitlines()) == 1, text
    assert "env.bogus = 3: unknown key" in loaded["errors"][0]
    assert "rewards.shaping[0].weight = 'x'" in loaded["errors"][3]
    assert _loaded(loaded["modules"], NOT_FOR_CONFIG_ERRORS) == []
    ours = [m for m in loaded["modules"] if m.startswith("ppage_jax.") and m not in LIGHT]
    assert [m for m in ours if m.split(".")[1] in NOT_FOR_CONFIG_ERRORS_HERE] == []
    assert not out.exists()


def test_the_constants_the_parsers_spell_out_agree_with_their_sources():
    from ppage_jax.analysis.batch.program import MEMORY_BUDGET_ENV
    from ppage_jax.analysis.sweep.plan import LAYOUTS
    from ppage_jax.cli import sweep

    assert (sweep.MEMORY_BUDGET_ENV, sweep.LAYOUTS) == (MEMORY_BUDGET_ENV, LAYOUTS)


def test_a_strategy_name_is_checked_against_the_registry_when_given():
    from ppage_jax.analysis.search.strategies import STRATEGIES
    from ppage_jax.cli.main import main

    for name in STRATEGIES:
        args = _parser().parse_args(["search", "s.yaml", "--strategy", name])
        assert args.strategy == name
    with pytest.raises(SystemExit) as stop:
        main(["search", "s.yaml", "--strategy", "nope"])
    assert stop.value.code == 2


def _parser():
    from ppage_jax.cli.main import build_parser

    return build_parser()


def test_a_callback_runs_once_the_module_is_imported(tmp_path, monkeypatch):
    (tmp_path / "ppage_probe_module.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    with _after_import(
        "ppage_probe_module", lambda: seen.append(sys.modules["ppage_probe_module"].VALUE)
    ):
        assert seen == []
        importlib.import_module("ppage_probe_module")
        assert seen == [7]
    with _after_import("ppage_probe_never_imported", lambda: seen.append("never")):
        pass
    assert seen == [7]
    assert not [f for f in sys.meta_path if type(f).__name__ == "_AfterImport"]
    with _after_import("ppage_probe_module", lambda: seen.append("again")):  # already loaded
        pass
    assert seen == [7, "again"]
    sys.modules.pop("ppage_probe_module")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_phase_counts_its_seconds_on_a_terminal_only(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stdout", pipe)
    with phase("compiling", every=0.01):
        time.sleep(0.05)
    assert pipe.getvalue() == "... compiling\n"
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    with phase("compiling", every=0.01):
        time.sleep(0.1)
    text = terminal.getvalue()
    assert text.startswith("... compiling\n\r    0 s")
    assert text.endswith("\r" + " " * len("    0 s") + "\r")  # cleared for what follows
    assert TICK_SECONDS <= 5


def test_a_bar_is_redrawn_while_it_waits():
    class Bar:
        disable = False
        refreshed = 0

        def refresh(self):
            self.refreshed += 1

    bar = Bar()
    with refreshing(bar, every=0.01):
        time.sleep(0.1)
    after = bar.refreshed
    time.sleep(0.05)
    assert after >= 2 and bar.refreshed == after  # the ticker stopped with the block
    bar.disable = True
    with refreshing(bar, every=0.01):
        time.sleep(0.05)
    assert bar.refreshed == after


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_keeps_its_interface(name):
    module = importlib.import_module(COMMANDS[name][0])
    assert callable(module.add_arguments) and callable(module.main)
