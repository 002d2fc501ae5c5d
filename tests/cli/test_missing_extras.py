"""A command whose optional extra is not installed says so in one line before it reads or
writes anything: ``ppage-jax search`` without evosax (the ``search`` extra)."""

from __future__ import annotations

import sys

from ppage_jax.cli.main import main


def test_search_without_evosax_names_the_extra_and_writes_nothing(tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "evosax" or m.startswith("evosax.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "evosax", None)  # `import evosax` now fails
    out = tmp_path / "search"
    code = main(["search", "configs/studies/reward_design/search.yaml", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "ppage-jax search needs evosax, the 'search' extra: pip install 'ppage_jax[search]'\n"
    )
    assert not out.exists()  # nothing half-made that would refuse the next try
