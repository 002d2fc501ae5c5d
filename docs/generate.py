"""Write the sample outputs shown in the documentation from the commands that print them.

Each sample sits in its page between marker comments (invisible on the site)::

    <!-- generated: audit -->
    ```text
    $ ppage-jax audit configs/default
    ... what the command printed, volatile fields masked ...
    ```
    <!-- /generated -->

Usage, from the repository root::

    python docs/generate.py                  # every sample, written into its page
    python docs/generate.py audit convert    # only these
    python docs/generate.py --check          # exit 1 where a page differs; writes nothing
    python docs/generate.py --list           # the samples, their pages, and which are slow

Every command runs in a fresh temporary directory (``configs`` linked in, outputs left
there), as a new ``ppage-jax`` process. Hashes, times and temporary paths are masked.
``tests/docs/test_generated_samples.py`` fails when a page's sample differs from what its
command prints now (the slow samples, which train or audit, under ``-m slow``).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
START = "<!-- generated: {name} -->"
END = "<!-- /generated -->"
MASKS = (
    (re.compile(r"\bhash [0-9a-f]{16}\b"), "hash <hash>"),
    (re.compile(r"\b\d+(?:\.\d+)? s\b"), "<time> s"),
)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One generated block: its page (under docs/), the command shown, how the working
    directory is prepared, and which part of the output the page shows."""

    name: str
    page: str
    argv: tuple[str, ...]  # ppage-jax's arguments, shown as `$ ppage-jax ...`
    prepare: Callable[[Path], None] = lambda cwd: None
    excerpt: Callable[[str], str] | None = None  # the whole output when None
    slow: bool = False  # trains or audits: tens of seconds


def _link_configs(cwd: Path) -> None:
    (cwd / "configs").symlink_to(ROOT / "configs", target_is_directory=True)


def _ppage_checkout(cwd: Path) -> None:
    """PPAGE's shipped configs where a PPAGE checkout keeps them: the files of its
    ``plug-and-play/configs/`` and its config directories inside it, linked from the test
    fixtures (which hold the top level as ``top/``, beside the directories)."""
    ppage_checkout(cwd / "path" / "to" / "plug-and-play" / "configs")


def ppage_checkout(configs: Path) -> None:
    """Lay PPAGE's ``plug-and-play/configs/`` out at ``configs`` from the fixtures."""
    fixtures = ROOT / "tests" / "fixtures" / "ppage_configs"
    configs.mkdir(parents=True)
    for item in [*(fixtures / "top").iterdir(), *fixtures.iterdir()]:
        if item.name not in ("top", "README.md"):
            (configs / item.name).symlink_to(item)


def _tiny_run(name: str, hacked: bool) -> Callable[[Path], None]:
    """The tiny run config of the command-line tests (tests/cli_testing.py), written to
    ``cwd/name``: two IQL seeds on a 5x5 grid, or its variant built to be hacked."""

    def prepare(cwd: Path) -> None:
        sys.path.insert(0, str(ROOT / "tests"))
        try:
            import cli_testing as kit
        finally:
            sys.path.remove(str(ROOT / "tests"))
        if hacked:
            kit.write_run_config(cwd / name, kit.HACKED, **kit.HACKED_EXPERIMENT)
        else:
            kit.write_run_config(cwd / name)

    return prepare


def _section(start: str, stop: Callable[[str], bool]) -> Callable[[str], str]:
    """The lines from the first one starting with ``start`` up to (not including) the first
    later line for which ``stop`` holds, behind a ``...`` line for what came before."""

    def excerpt(text: str) -> str:
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith(start))
        end = next((i for i in range(first + 1, len(lines)) if stop(lines[i])), len(lines))
        return "\n".join(["...", *lines[first:end]]) + "\n"

    return excerpt


SAMPLES = {
    s.name: s
    for s in (
        Sample("audit", "audit.md", ("audit", "configs/default"), _link_configs, slow=True),
        Sample(
            "convert",
            "ppage.md",
            (
                "convert",
                "path/to/plug-and-play/configs/dqn_1v1",
                "my_1v1",
                "--experiment",
                "experiment_dqn.yaml",
            ),
            _ppage_checkout,
        ),
        Sample(
            "evaluation",
            "evaluation.md",
            ("run", "tiny", "--set", "experiment.eval.episodes=8", "--no-progress"),
            _tiny_run("tiny", hacked=False),
            _section("PREDATORS,", lambda line: not line.strip()),
            slow=True,
        ),
        Sample(
            "monitor",
            "research_loop.md",
            ("run", "tiny_hacked", "--no-progress"),
            _tiny_run("tiny_hacked", hacked=True),
            _section("REWARD-HACKING MONITOR", lambda line: line.startswith("tracking:")),
            slow=True,
        ),
    )
}
# Not a command's output but the Markdown `ppage-jax bench --markdown` writes, drawn again
# from the saved report (docs/bench.json) so that a change of the format shows here.
BENCHMARK = "benchmark"
BENCHMARK_PAGE = "benchmark.md"


def mask(text: str, cwd: Path | None = None) -> str:
    """``text`` with hashes, times and the temporary directory masked."""
    if cwd is not None:
        text = text.replace(str(cwd) + os.sep, "").replace(str(cwd), ".")
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def run_sample(sample: Sample) -> str:
    """The block's text: ``$ ppage-jax ARGS``, then what the command printed (or its
    excerpt), masked."""
    with tempfile.TemporaryDirectory(prefix=f"ppage_doc_{sample.name}_") as tmp:
        cwd = Path(tmp).resolve()
        sample.prepare(cwd)
        code = "import sys; from ppage_jax.cli import main; sys.exit(main())"
        done = subprocess.run(
            [sys.executable, "-c", code, *sample.argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")},
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"sample {sample.name}: `ppage-jax {' '.join(sample.argv)}` exited "
                f"{done.returncode}:\n{done.stderr[-4000:]}"
            )
        out = done.stdout if sample.excerpt is None else sample.excerpt(done.stdout)
        body = mask(out, cwd)
    return f"$ ppage-jax {' '.join(sample.argv)}\n{body}"


def benchmark_markdown() -> str:
    from ppage_jax.bench.report import format_report

    report = json.loads((DOCS / "bench.json").read_text())
    return format_report(report) + "\n"


def names() -> list[str]:
    return [*SAMPLES, BENCHMARK]


def page_of(name: str) -> Path:
    return DOCS / (BENCHMARK_PAGE if name == BENCHMARK else SAMPLES[name].page)


def generate(name: str) -> str:
    """What the block ``name`` should hold, between its markers."""
    if name == BENCHMARK:
        return "\n" + benchmark_markdown()
    return "\n```text\n" + run_sample(SAMPLES[name]) + "```\n"


def block(text: str, name: str) -> tuple[int, int]:
    """``(start, end)`` offsets of the text between ``name``'s markers in a page."""
    start = START.format(name=name)
    if text.count(start) != 1:
        raise ValueError(f"{start} appears {text.count(start)} times, not once")
    i = text.index(start) + len(start)
    j = text.find(END, i)
    if j < 0:
        raise ValueError(f"{start} has no {END} after it")
    return i, j


def current(name: str) -> str:
    text = page_of(name).read_text()
    i, j = block(text, name)
    return text[i:j]


def write(name: str, inner: str) -> bool:
    """Put ``inner`` between ``name``'s markers; True when the page changed."""
    page = page_of(name)
    text = page.read_text()
    i, j = block(text, name)
    if text[i:j] == inner:
        return False
    page.write_text(text[:i] + inner + text[j:])
    return True


def diff(name: str, inner: str) -> str:
    """A unified diff of the page's block against ``inner`` ('' when they agree)."""
    return "".join(
        difflib.unified_diff(
            current(name).splitlines(keepends=True),
            inner.splitlines(keepends=True),
            f"docs/{page_of(name).relative_to(DOCS)} ({name}, in the page)",
            f"{name}, printed now",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"samples to generate (default all: {names()})")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a change")
    parser.add_argument("--list", action="store_true", help="list the samples and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name in names():
            slow = name != BENCHMARK and SAMPLES[name].slow
            print(f"{name:<12} docs/{page_of(name).relative_to(DOCS)}{'  (slow)' if slow else ''}")
        return 0
    unknown = sorted(set(args.names) - set(names()))
    if unknown:
        parser.error(f"unknown samples {unknown}; known: {names()}")
    stale = []
    for name in args.names or names():
        inner = generate(name)
        if args.check:
            changes = diff(name, inner)
            if changes:
                stale.append(name)
                print(changes)
        elif write(name, inner):
            print(f"{name}: wrote docs/{page_of(name).relative_to(DOCS)}")
        else:
            print(f"{name}: docs/{page_of(name).relative_to(DOCS)} already current")
    if stale:
        print(f"out of date: {stale} (python docs/generate.py {' '.join(stale)})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
