"""The shipped reward-search comparisons (docs/studies/reward_search.md) are recomputed from
their shipped files: every pick's re-evaluation, the declared family with Holm, and the
landscape from the random searches' samples come out byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ppage_jax.analysis.search.compare import compare_strategies
from ppage_jax.analysis.search.spec import load_search

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "docs/studies/reward_search"
RUNS = {
    "run1": "configs/studies/reward_design/search.yaml",
    "run2": "configs/studies/reward_design/search_widened.yaml",
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_shipped_comparison_is_recomputed_from_its_files(tmp_path, run):
    shipped = STUDY / run
    if not shipped.is_dir():
        pytest.skip(f"{run} is not shipped")
    spec = load_search(ROOT / RUNS[run], None, "small")
    copy = tmp_path / run
    shutil.copytree(shipped, copy)
    (copy / "comparison.md").unlink()
    (copy / "comparison.csv").unlink()
    text = compare_strategies(copy, spec, list(spec.compare.strategies))
    assert text == (shipped / "comparison.md").read_text()
    assert (copy / "comparison.csv").read_text() == (shipped / "comparison.csv").read_text()
