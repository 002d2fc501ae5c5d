"""Every notebook under notebooks/ is committed without outputs and runs top to bottom
(small-size switch PPAGE_SMALL=1); running them is in the slow set."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_custom_reward.ipynb",
        "03_reward_ablation.ipynb",
        "04_train_ippo.ipynb",
        "05_reward_design_study.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stripped(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:  # committed without outputs
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    monkeypatch.setenv("PPAGE_SMALL", "1")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [
        o
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert not errors
