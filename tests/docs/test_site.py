"""The documentation site (mkdocs.yml): every page is in the nav, the site builds with
``mkdocs build --strict`` (offline), and a broken link fails that build.

The builds run in a temporary copy of mkdocs.yml, docs/ and ppage_jax/ (what the API pages
are generated from), so the checkout is never written to. Each build takes about 8-15 s on
two CPU cores; without the docs tools (``pip install -e ".[docs]"``) they skip.
"""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS_TOOLS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = set(_nav_pages(config["nav"]))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"
    assert "index.md" in pages and "api/index.md" in pages


def test_readme_links_the_docs_index():
    assert "](docs/index.md)" in (ROOT / "README.md").read_text()


def _missing_tools() -> list[str]:
    return [
        m
        for m in DOCS_TOOLS
        if importlib.util.find_spec(m.split(".")[0]) is None
        or ("." in m and importlib.util.find_spec(m) is None)
    ]


@pytest.fixture
def site_copy(tmp_path: Path) -> Path:
    missing = _missing_tools()
    if missing:
        pytest.skip(
            f"the docs tools are not installed ({', '.join(missing)}): pip install -e '.[docs]'"
        )
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=ignore)
    shutil.copytree(ROOT / "ppage_jax", tmp_path / "ppage_jax", ignore=ignore, symlinks=True)
    return tmp_path


def _build(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", "site"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(root)},
    )


def test_site_builds_strictly(site_copy):
    result = _build(site_copy)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (site_copy / "site" / "index.html").is_file()
    api = (site_copy / "site" / "api" / "env" / "index.html").read_text()
    assert "ppage_jax.env.GridWorld.step" in api  # generated from the docstrings
    assert "fonts.googleapis.com" not in (site_copy / "site" / "index.html").read_text()


def test_a_broken_link_fails_the_build(site_copy):
    page = site_copy / "docs" / "semantics.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no_such_page.md).\n")
    result = _build(site_copy)
    assert result.returncode != 0
    assert "no_such_page.md" in result.stderr
