"""Every ```python and ```bash block of README.md and docs/ is run by a test, or says why not.

A block is run here unless the last non-blank line before its opening fence is one of (in
a list item, write it as the last line of the paragraph above the block, so that the list
goes on):

- ``<!-- not run: REASON -->``: not run, for the reason given (a placeholder path, an
  install, a benchmark that needs minutes or a quiet machine, an excerpt of source);
- ``<!-- run by: tests/PATH.py::test_name -->``: another test runs it and checks what it
  prints (that test must exist and name the page);
- ``<!-- run with: ARGS -->`` (bash): run here with ``ARGS`` appended to each of its
  ``ppage-jax`` commands (a budget reduced through ``--set``).

The default set checks the marks and that every block parses (fast). ``-m slow`` runs the
blocks: each page's unmarked Python blocks in order as one script, each bash block as one
script, both in a fresh directory holding ``configs/`` (linked), this environment as
``.venv``, an empty ``docs/``, and PPAGE's shipped configs where
``path/to/plug-and-play/configs`` points (the test fixtures). A bash block that installs
packages is never run: it must be marked.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "README.md",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")),
]
LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
MARK = re.compile(r"^\s*<!--\s*(not run|run by|run with):\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+)(\S*)")


@dataclasses.dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    language: str  # python or bash
    code: str
    mark: str | None  # "not run", "run by", "run with" or None (run here)
    value: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def code_blocks(page: str) -> list[Block]:
    """The python and bash blocks of one page (fenced, also indented inside a list)."""
    lines = (ROOT / page).read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, language = opening.groups()
        end = next(
            j
            for j in range(i + 1, len(lines))
            if lines[j].strip().startswith(fence) and not lines[j].strip().strip("`")
        )
        if language in LANGUAGES:
            above = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            mark = MARK.match(above)
            code = textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n"
            found.append(
                Block(
                    page,
                    i + 1,
                    LANGUAGES[language],
                    code,
                    mark.group(1) if mark else None,
                    mark.group(2) if mark else "",
                )
            )
        i = end + 1
    return found


BLOCKS = [b for page in PAGES for b in code_blocks(page)]


def test_the_pages_hold_code_blocks():
    languages = {b.language for b in BLOCKS}
    assert languages == {"python", "bash"} and len(BLOCKS) > 50
    assert {"README.md", "docs/training.md", "docs/rewards.md"} <= {b.page for b in BLOCKS}


def test_every_mark_is_well_formed():
    """A reason of a few words, an existing test that names the page, run-with arguments
    on a bash block only; and no stray mark that belongs to no block."""
    problems = []
    for b in BLOCKS:
        if b.mark == "not run" and len(b.value.split()) < 3:
            problems.append(f"{b.id}: 'not run' needs a reason of a few words: {b.value!r}")
        if b.mark == "run with" and (b.language != "bash" or not b.value.startswith("--")):
            problems.append(f"{b.id}: 'run with' takes --arguments, on a bash block")
        if b.mark == "run by":
            path, _, name = b.value.partition("::")
            test_file = ROOT / path
            if not (path.startswith("tests/") and test_file.is_file()):
                problems.append(f"{b.id}: 'run by' names no test file: {b.value!r}")
                continue
            source = test_file.read_text()
            if f"def {name}(" not in source:
                problems.append(f"{b.id}: {path} has no test {name}")
            elif Path(b.page).name not in source:
                problems.append(f"{b.id}: {path} does not read {b.page}")
    for page in PAGES:
        lines = (ROOT / page).read_text().splitlines()
        for n, line in enumerate(lines):
            below = next((x for x in lines[n + 1 :] if x.strip()), "")
            if MARK.match(line) and not (FENCE.match(below) and below.strip() != "```"):
                problems.append(f"{page}:{n + 1}: a mark must come right before a block's fence")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "python"], ids=lambda b: b.id)
def test_every_python_block_parses(block):
    compile(block.code, block.id, "exec")


def test_every_bash_block_parses():
    bad = []
    for b in (b for b in BLOCKS if b.language == "bash"):
        done = subprocess.run(["bash", "-n"], input=b.code, capture_output=True, text=True)
        if done.returncode:
            bad.append(f"{b.id}: {done.stderr.strip()}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------ running them
def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "configs").symlink_to(ROOT / "configs", target_is_directory=True)
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)  # this environment
    (tmp_path / "docs").mkdir()
    # PPAGE's plug-and-play/configs/: its top-level files (the fixtures' top/) and its
    # config directories
    fixtures = ROOT / "tests" / "fixtures" / "ppage_configs"
    ppage = tmp_path / "path" / "to" / "plug-and-play" / "configs"
    ppage.mkdir(parents=True)
    for item in [*(fixtures / "top").iterdir(), *fixtures.iterdir()]:
        if item.name not in ("top", "README.md"):
            (ppage / item.name).symlink_to(item)
    return tmp_path


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # ppage-jax and python of this environment
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
        "MPLBACKEND": "Agg",
        "WANDB_SILENT": "true",
    }


def _check(done: subprocess.CompletedProcess, what: str) -> None:
    assert done.returncode == 0, (
        f"{what} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n"
        f"--- stderr\n{done.stderr[-6000:]}"
    )


PYTHON_PAGES = sorted({b.page for b in BLOCKS if b.language == "python" and b.mark is None})
BASH_BLOCKS = [b for b in BLOCKS if b.language == "bash" and b.mark in (None, "run with")]


@pytest.mark.slow  # imports JAX, compiles, some train
@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_blocks_run(page, tmp_path):
    """The page's unmarked Python blocks, in order, as one script (a later block may use
    what an earlier one defined)."""
    parts = [
        f"# --- {b.id}\n{b.code}"
        for b in BLOCKS
        if b.page == page and b.language == "python" and b.mark is None
    ]
    script = _workspace(tmp_path) / "blocks.py"
    script.write_text("\n".join(parts))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    _check(done, f"the Python blocks of {page}")


@pytest.mark.slow  # the commands train, sweep and audit at reduced budgets
@pytest.mark.parametrize("block", BASH_BLOCKS, ids=lambda b: b.id)
def test_bash_blocks_run(block, tmp_path):
    if re.search(r"\bpip install\b|-m venv\b", block.code):
        pytest.fail(f"{block.id} installs packages: mark it <!-- not run: reason -->")
    script = "\n".join(
        [
            "set -euo pipefail",
            f"extra=({block.value})",
            'ppage-jax() { command ppage-jax "$@" "${extra[@]}"; }',
            block.code,
        ]
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=_workspace(tmp_path),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    _check(done, f"the bash block {block.id}")
