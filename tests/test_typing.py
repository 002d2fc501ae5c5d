"""The public API's types as a type checker sees them: pyright (basic mode) on a small user
snippet reveals ``pj.make(...)``, ``GridWorld.step`` and ``pj.run_sweep`` (a lazy name) with
their real types, not ``Any``, and flags a wrong call. Skips when pyright is not installed
(it is in the dev extra)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SNIPPET = """\
import jax
import ppage_jax as pj

env = pj.make("default", {"env.size": 8})
reveal_type(env)
obs, state = env.reset(jax.random.PRNGKey(0))
reveal_type(env.step)
reveal_type(env.step(jax.random.PRNGKey(1), state, obs, env.default_params))
reveal_type(state.replace(turn=state.turn))
reveal_type(pj.run_sweep)
pj.run_sweep("not a spec")
"""

STEP_RESULT = "tuple[Array, State, Array, Array, Array, dict[str, Any]]"


def _pyright() -> str:
    found = shutil.which("pyright", path=str(Path(sys.executable).parent)) or shutil.which(
        "pyright"
    )
    if found is None:
        pytest.skip("pyright is not installed (pip install -e '.[dev]')")
    return found


def test_revealed_types_of_the_public_api(tmp_path):
    pyright = _pyright()
    (tmp_path / "snippet.py").write_text(SNIPPET)
    config = {"extraPaths": [str(ROOT)], "typeCheckingMode": "basic"}
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [pyright, "--pythonpath", sys.executable, "--outputjson", "snippet.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    report = json.loads(result.stdout)
    by_line: dict[int, list[str]] = {}
    for d in report["generalDiagnostics"]:
        by_line.setdefault(d["range"]["start"]["line"] + 1, []).append(
            f"{d['severity']}: {d['message']}"
        )
    assert by_line[5] == ['information: Type of "env" is "GridWorld"']
    assert by_line[7] == [
        'information: Type of "env.step" is "(key: Array, state: State, actions: Array, '
        f'params: EnvParams | None = None) -> {STEP_RESULT}"'
    ]
    assert by_line[8][0].endswith(f'is "{STEP_RESULT}"')
    assert by_line[9][0].endswith('is "State"')  # replace keeps the class
    sweep = by_line[10][0]
    assert sweep.startswith(
        'information: Type of "pj.run_sweep" is "(spec: SweepSpec | ScenarioSweep'
    )
    assert sweep.endswith('-> dict[str, Any]"')
    # a wrong argument is an error: the lazy name is typed, not Any
    assert any(m.startswith("error:") and '"spec"' in m for m in by_line[11])
    assert set(by_line) == {5, 7, 8, 9, 10, 11}, by_line
