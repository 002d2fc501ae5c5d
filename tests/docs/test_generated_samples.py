"""The sample outputs in docs/ are what their commands print now (docs/generate.py).

Each sample sits between ``<!-- generated: NAME -->`` and ``<!-- /generated -->``; a
failure prints the difference and the command that refreshes the page
(``python docs/generate.py NAME``). The samples that train or audit (tens of seconds each)
run under ``-m slow``; the others, and the markers, are checked in the default set.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_generate():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


generate = _load_generate()
SLOW = [n for n, s in generate.SAMPLES.items() if s.slow]
FAST = [n for n in generate.names() if n not in SLOW]


def test_every_marked_block_has_a_sample_and_every_sample_its_block():
    found: dict[str, list[str]] = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        for name in re.findall(r"<!-- generated: (\S+) -->", text):
            found.setdefault(name, []).append(page.relative_to(ROOT / "docs").as_posix())
        assert text.count("<!-- /generated -->") == len(re.findall(r"<!-- generated: ", text))
    assert sorted(found) == sorted(generate.names())
    for name, pages in found.items():
        assert pages == [generate.page_of(name).relative_to(ROOT / "docs").as_posix()], name
        generate.block(generate.page_of(name).read_text(), name)  # well formed


def test_masks_hide_hashes_times_and_the_working_directory(tmp_path):
    text = f"config {tmp_path}/tiny (hash 620b749a959aff1d) trained in 12.5 s -> {tmp_path}"
    assert generate.mask(text, tmp_path) == "config tiny (hash <hash>) trained in <time> s -> ."


def _check(name: str) -> None:
    changes = generate.diff(name, generate.generate(name))
    assert not changes, (
        f"docs sample {name!r} is out of date: python docs/generate.py {name}\n{changes}"
    )


@pytest.mark.parametrize("name", FAST)
def test_sample_is_current(name):
    _check(name)


@pytest.mark.slow  # trains or audits: tens of seconds each
@pytest.mark.parametrize("name", SLOW)
def test_slow_sample_is_current(name):
    _check(name)
