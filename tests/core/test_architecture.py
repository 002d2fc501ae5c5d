"""The package's import graph against the layers drawn in docs/architecture.md: no circle, no
import (module level, in a function, under TYPE_CHECKING, or a string naming a module) from a
lower layer to a higher one, none from a lower rung of train/ to a higher one, viz never
importing train; and the size limits of the tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ppage_jax"
MAX_TOP_LEVEL_MODULES = 14
MAX_MODULES_PER_FOLDER = 15
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 120


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The package module a dotted name refers to: itself, or its closest parent module."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set[str]:
    """Every package module ``module`` refers to, wherever the import or the name stands."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    named: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                named.append(full if full in MODULES else base)
        # a string naming a module (not a name such as the entry-point group
        # ppage_jax.plugins, which names none)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(r"ppage_jax(\.\w+)+", node.value)
            and ".".join(node.value.split(".")[:2]) in MODULES
        ):
            named.append(node.value)
    owners = {_owner(n) for n in named if n.split(".")[0] == "ppage_jax"}
    return {o for o in owners if o and o != module}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _ladder(header: str) -> dict[str, int]:
    """Entry -> level, from the ```text block of docs/architecture.md whose header line starts
    with ``header``: ``layer`` for the top-level entries (``env``, ``train``, ``__init__``),
    ``rung`` for the entries of train/ (``kit``, ``config``, ``__init__``)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(rf"```text\n{header}[^\n]*\n(.*?)```", page, re.S)
    assert block, f"docs/architecture.md has no ```text {header} block"
    layers: dict[str, int] = {}
    for line in block.group(1).splitlines():
        match = re.match(r"(\d+)\s+(.*?)(?:\s{2,}.*)?$", line)
        assert match, f"unreadable layer line: {line!r}"
        for token in match.group(2).split():
            entry = token.removesuffix("/").removesuffix(".py")
            assert entry not in layers, f"{token} is listed in two layers"
            layers[entry] = int(match.group(1))
    return layers


LAYERS = _ladder("layer")
RUNGS = _ladder("rung")


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS["__init__" if len(parts) == 1 else parts[1]]


def _rung(module: str) -> int | None:
    """The rung of a module of train/ (None for a module outside it)."""
    parts = module.split(".")
    if parts[:2] != ["ppage_jax", "train"]:
        return None
    return RUNGS["__init__" if len(parts) == 2 else parts[2]]


def _up_train(graph: dict[str, set[str]]) -> list[str]:
    """The edges of ``graph`` from a module of train/ to one of a higher rung of train/."""
    return sorted(
        f"{src} (rung {_rung(src)}) -> {dst} (rung {_rung(dst)})"
        for src, targets in graph.items()
        for dst in targets
        if (low := _rung(src)) is not None and (high := _rung(dst)) is not None and high > low
    )


def _entries(folder: Path) -> set[str]:
    """The modules (by stem) and packages directly in ``folder``."""
    return {
        p.stem if p.is_file() else p.name
        for p in folder.iterdir()
        if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").is_file())
    }


def test_the_page_lists_every_top_level_entry_once_and_nothing_else():
    assert set(LAYERS) == _entries(PACKAGE)


def test_the_page_lists_every_entry_of_train_once_and_nothing_else():
    assert set(RUNGS) == _entries(PACKAGE / "train")


def test_no_import_goes_up_a_layer():
    upward = sorted(
        f"{src} (layer {_layer(src)}) -> {dst} (layer {_layer(dst)})"
        for src, targets in GRAPH.items()
        for dst in targets
        if _layer(dst) > _layer(src)
    )
    assert upward == []


def test_no_import_goes_up_a_rung_of_train():
    """config.py protocol.py < kit/ < algorithms/ < registry.py < run/ < __init__.py."""
    assert _up_train(GRAPH) == []


def test_an_import_up_a_rung_of_train_fails(tmp_path):
    """The check itself: a kit module importing run/ (here in a function) and an algorithm
    naming the registry are caught; imports down the rungs and within one are not."""
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from ppage_jax.train.run.runner import run_training\n")
    graph = {
        "ppage_jax.train.kit.probe": _imports("ppage_jax.train.kit.probe", path),
        "ppage_jax.train.algorithms.ippo": {"ppage_jax.train.registry", "ppage_jax.train.kit.pg"},
        "ppage_jax.train.run.runner": {"ppage_jax.train.kit.loop", "ppage_jax.train.config"},
        "ppage_jax.train.kit.pg": {"ppage_jax.train.kit.rollout", "ppage_jax.env"},
        "ppage_jax.train": {"ppage_jax.train.run.experiment"},
    }
    assert _up_train(graph) == [
        "ppage_jax.train.algorithms.ippo (rung 3) -> ppage_jax.train.registry (rung 4)",
        "ppage_jax.train.kit.probe (rung 2) -> ppage_jax.train.run.runner (rung 5)",
    ]


@pytest.mark.parametrize(("lower", "higher"), [("viz", "train"), ("config", "train")])
def test_forbidden_pairs(lower, higher):
    crossing = sorted(
        f"{src} -> {dst}"
        for src, targets in GRAPH.items()
        for dst in targets
        if src.startswith(f"ppage_jax.{lower}") and dst.startswith(f"ppage_jax.{higher}")
    )
    assert crossing == []


@pytest.mark.parametrize(
    ("folder", "avoided"),
    [("search", ("sweep",)), ("batch", ("sweep", "search"))],
)
def test_sweeps_and_searches_meet_only_in_batch(folder, avoided):
    """analysis/search/ imports nothing of analysis/sweep/, and analysis/batch/, the ground
    both stand on, imports neither."""
    inside = f"ppage_jax.analysis.{folder}"
    assert any(m.startswith(inside + ".") for m in GRAPH), inside
    crossing = sorted(
        f"{src} -> {dst}"
        for src, targets in GRAPH.items()
        if src == inside or src.startswith(inside + ".")
        for dst in targets
        for other in avoided
        if dst == f"ppage_jax.analysis.{other}" or dst.startswith(f"ppage_jax.analysis.{other}.")
    )
    assert crossing == []


def test_the_import_graph_has_no_circle():
    """Tarjan's strongly connected components: every component is one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert circles == []


def test_the_graph_sees_function_level_and_string_imports(tmp_path):
    """The checker itself: an import inside a function and a module named in a string count."""
    path = tmp_path / "probe.py"
    path.write_text(
        "def f():\n    from ppage_jax.train.registry import ALGORITHMS\n"
        "LAZY = {'x': 'ppage_jax.viz.frames'}\n"
    )
    assert _imports("ppage_jax.probe", path) == {"ppage_jax.train.registry", "ppage_jax.viz.frames"}


def test_size_limits():
    top_level = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top_level) <= MAX_TOP_LEVEL_MODULES, sorted(top_level)
    crowded = {
        str(folder.relative_to(ROOT)): n
        for folder in [PACKAGE, *[p for p in PACKAGE.rglob("*") if p.is_dir()]]
        if (n := len(list(folder.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_no_long_module_or_function():
    """A module holds at most MAX_MODULE_LINES lines and a function at most
    MAX_FUNCTION_LINES: past that a piece has more than one job."""
    long_modules, long_functions = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        name = str(path.relative_to(ROOT))
        if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
            long_modules[name] = lines
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long_functions[f"{name}:{node.name}"] = size
    assert long_modules == {}
    assert long_functions == {}


def test_readme_layout_block_matches_the_tree():
    """Every path named in the README's package layout exists, and every top-level module and
    every folder of the package is named there."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Package layout\n\n```\nppage_jax/\n(.*?)```", readme, re.S)
    assert block, "README.md has no package layout block"
    named = set(re.findall(r"(?<![\w/.])([\w/]+(?:\.py|/))", block.group(1)))
    for token in sorted(named):
        assert (PACKAGE / token).exists() or (ROOT / token).exists(), token
    folders = {
        str(p.relative_to(PACKAGE)) + "/"
        for p in PACKAGE.rglob("*")
        if p.is_dir() and (p / "__init__.py").is_file()
    }
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert folders | modules <= named, sorted((folders | modules) - named)
