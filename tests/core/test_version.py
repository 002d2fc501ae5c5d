"""One version, written once (ppage_jax/defaults.py): the package, the command line, the
wheel's metadata and every result file that names what made it."""

from __future__ import annotations

import tomllib

import pytest

import ppage_jax as pj
from ppage_jax.cli.main import main
from ppage_jax.defaults import VERSION


def test_one_version_everywhere(repo_root, capsys):
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "ppage_jax.defaults.VERSION"
    }
    assert pj.__version__ == VERSION
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"ppage-jax {VERSION}\n"
    assert f"## [{VERSION}]" in (repo_root / "CHANGELOG.md").read_text()
    assert f"version: {VERSION}\n" in (repo_root / "CITATION.cff").read_text()


def test_a_sweep_description_names_the_version():
    from ppage_jax.analysis.sweep.spec import load_sweep

    assert load_sweep(None).describe()["version"] == VERSION
