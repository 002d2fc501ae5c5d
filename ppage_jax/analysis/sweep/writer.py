"""A sweep's output directory, written so that nothing finished is lost and nothing unfinished
looks finished.

- ``chunks/NNNNN.results.csv`` and ``chunks/NNNNN.curves.csv``: the rows of one finished
  chunk of runs;
- ``manifest.json``: the sweep's identity (a hash of its arms, seeds, config and runs), how
  to rebuild it (``source``, for ``ppage-jax sweep --resume``), the chunk size and the
  finished chunks. A chunk is finished once the manifest lists it: its files are written
  first, then the manifest (each atomically), so a kill in between only repeats that chunk;
- ``results.csv`` (``arm, seed, metric, value``) and ``curves.csv`` (``arm, seed, update,
  env_steps, metric, value``): regenerated from the listed chunks after each commit, so
  they only ever hold rows of finished chunks, in run order; values are exact (``repr``),
  NaN an empty cell;
- ``sweep.json``: the resolved arms, seeds and timings.

A directory that already holds a sweep is refused unless resuming (same identity) or
overwriting (its sweep files are deleted first, nothing else).

With several processes (:mod:`ppage_jax.distributed`) only process 0 touches the directory
(:func:`open_sweep_writer`); the others follow what it read (:class:`FollowerWriter`).
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from ppage_jax import distributed
from ppage_jax.analysis.batch.output import (
    MANIFEST,
    OutputWriter,
    cell,
    csv_text,
    float_value,
    identity_hash,
)
from ppage_jax.analysis.batch.output import read_manifest as read_any_manifest
from ppage_jax.analysis.batch.output import resumed_manifest as resumed_any_manifest
from ppage_jax.artifacts import (
    OutputError,
    clear_output,
    fault,
    prepare_output_dir,
    write_text,
)

MANIFEST_FORMAT = "ppage_jax sweep manifest 1"
CHUNKS = "chunks"
RESULTS = "results.csv"
CURVES = "curves.csv"
DESCRIPTION = "sweep.json"
# What makes a directory a sweep's: refused as output unless resuming or overwriting.
SWEEP_FILES = (
    MANIFEST,
    RESULTS,
    CURVES,
    DESCRIPTION,
    CHUNKS,
    "report.md",
    "headline.png",
    "curves.png",
    "audit.csv",
    "baselines.csv",
)

# What a resumed sweep's identity covers (named when it differs).
SOURCES = "the sweep file, its configs, the arms or the ppage_jax version"

Curve = tuple[int, int, str, float]


def read_manifest(directory: str | Path) -> dict:
    """``directory``'s sweep manifest; :class:`OutputError` when missing or unreadable."""
    return read_any_manifest(directory, "sweep", MANIFEST_FORMAT)


def resumed_manifest(directory: Path, identity: str) -> dict:
    """The manifest of the sweep to resume in ``directory``; :class:`OutputError` when it
    holds another sweep (one of :data:`SOURCES` changed)."""
    return resumed_any_manifest(directory, identity, "sweep", MANIFEST_FORMAT, SOURCES)


def read_results(path: Path) -> dict[str, dict[str, dict[int, float]]]:
    """results.csv -> {metric: {arm: {seed: value}}}."""
    table: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            table[row["metric"]][row["arm"]][int(row["seed"])] = float_value(row["value"])
    return table


def curves_path(directory: str | Path) -> Path:
    """A sweep directory's curves: ``curves.csv``, else the gzipped ``curves.csv.gz`` that
    shipped studies keep (the plain path when neither exists)."""
    plain = Path(directory) / CURVES
    packed = plain.with_name(CURVES + ".gz")
    return packed if not plain.exists() and packed.exists() else plain


def read_curves(path: Path) -> dict[str, dict[str, dict[int, dict[int, float]]]]:
    """curves.csv (or a gzipped ``curves.csv.gz``) -> {metric: {arm: {seed: {env_steps:
    value}}}}."""
    table: dict[str, dict[str, dict[int, dict[int, float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as fh:
        for row in csv.DictReader(fh):
            table[row["metric"]][row["arm"]][int(row["seed"])][int(row["env_steps"])] = float_value(
                row["value"]
            )
    return table


class SweepWriter(OutputWriter):
    """The files of one sweep directory (see the module docstring)."""

    description_file = DESCRIPTION
    RESULT_HEADER = ("arm", "seed", "metric", "value")
    CURVE_HEADER = ("arm", "seed", "update", "env_steps", "metric", "value")

    def __init__(
        self,
        output_dir: str | Path,
        description: dict,
        identity: dict,
        source: dict | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ):
        self.dir = prepare_output_dir(output_dir, "sweep directory")
        self.description = dict(description)
        self.identity = identity_hash(identity)
        # wall seconds of earlier calls on this sweep (a resume adds its own to them)
        self.seconds_before = 0.0
        if resume:
            self.manifest = resumed_manifest(self.dir, self.identity)
            earlier = self._earlier_description()
            self.description = {**earlier, **self.description}
            self.seconds_before = float(earlier.get("seconds") or 0.0)
        else:
            clear_output(self.dir, SWEEP_FILES, "sweep", overwrite, f"--resume {self.dir}")
            self.manifest = {
                "format": MANIFEST_FORMAT,
                "identity": self.identity,
                "source": source,
                "runs": len(identity.get("runs", [])),
                "chunk_size": None,
                "layout": None,
                "chunks": {},
            }
        self._settle((CHUNKS,), "chunk folder")

    def _earlier_description(self) -> dict:
        """The sweep.json an earlier call wrote (its compile time, chunk size and the
        stages' records, kept by a resume that does not redo them); empty when unreadable."""
        try:
            earlier = json.loads((self.dir / DESCRIPTION).read_text())
        except (OSError, ValueError):
            return {}
        return earlier if isinstance(earlier, dict) else {}

    # ---------------------------------------------------------------- state
    @property
    def chunk_size(self) -> int | None:
        """The chunk size the finished chunks were run with (None before the first)."""
        return self.manifest["chunk_size"]

    def set_chunk_size(self, chunk: int) -> None:
        if self.manifest["chunk_size"] not in (None, chunk):
            raise ValueError(
                f"chunk size {chunk} differs from the sweep's {self.manifest['chunk_size']}"
            )
        self.manifest["chunk_size"] = int(chunk)
        self._commit()

    @property
    def layout(self) -> str | None:
        """The layout the finished chunks were run with (None before the first; a sweep
        begun before layouts existed ran ``vmap``)."""
        if "layout" not in self.manifest and self.manifest["chunk_size"] is not None:
            return "vmap"
        return self.manifest.get("layout")

    def set_layout(self, layout: str) -> None:
        """Record the layout (``run_sweep`` keeps a resumed sweep's own)."""
        self.manifest["layout"] = layout
        self._commit()

    def finished(self) -> list[int]:
        """Indices of the finished chunks."""
        return sorted(int(i) for i in self.manifest["chunks"])

    def _chunk_path(self, index: int, kind: str) -> Path:
        return self.dir / CHUNKS / f"{index:05d}.{kind}.csv"

    def read_chunk(
        self, index: int
    ) -> tuple[dict[tuple[str, int], dict[str, float]], dict[tuple[str, int], list[Curve]]]:
        """A finished chunk's results ``{(arm, seed): {metric: value}}`` and curves."""
        results: dict = {}
        curves: dict = {}
        try:
            with open(self._chunk_path(index, "results"), newline="") as fh:
                for row in csv.DictReader(fh):
                    results.setdefault((row["arm"], int(row["seed"])), {})[row["metric"]] = (
                        float_value(row["value"])
                    )
            with open(self._chunk_path(index, "curves"), newline="") as fh:
                for row in csv.DictReader(fh):
                    curves.setdefault((row["arm"], int(row["seed"])), []).append(
                        (
                            int(row["update"]),
                            int(row["env_steps"]),
                            row["metric"],
                            float_value(row["value"]),
                        )
                    )
        except (OSError, KeyError, ValueError) as err:
            raise OutputError(
                f"{self.dir}: chunk {index} is listed as finished but its files "
                f"cannot be read ({err}); rerun the sweep with --overwrite"
            ) from None
        return results, curves

    # ---------------------------------------------------------------- writing
    def add_chunk(
        self, index: int, first: int, runs: list[tuple[str, int, dict[str, float], list[Curve]]]
    ) -> None:
        """Record finished chunk ``index`` (runs ``first ...``): its files, then the manifest
        (the commit), then the regenerated results.csv and curves.csv."""
        results = [
            (arm, seed, metric, cell(value))
            for arm, seed, metrics, _ in runs
            for metric, value in metrics.items()
        ]
        curves = [
            (arm, seed, update, steps, metric, cell(value))
            for arm, seed, _, rows in runs
            for update, steps, metric, value in rows
        ]
        write_text(self._chunk_path(index, "results"), csv_text(self.RESULT_HEADER, results))
        write_text(self._chunk_path(index, "curves"), csv_text(self.CURVE_HEADER, curves))
        fault(f"commit:{len(self.manifest['chunks']) + 1}")  # testing hook: before the commit
        self.manifest["chunks"][str(index)] = [int(first), len(runs)]
        self._commit()
        self.write_tables()

    def write_tables(self) -> None:
        """results.csv and curves.csv from the finished chunks, in run order."""
        for name, kind, header in (
            (RESULTS, "results", self.RESULT_HEADER),
            (CURVES, "curves", self.CURVE_HEADER),
        ):
            parts = [csv_text(header, [])]
            for index in self.finished():
                text = self._chunk_path(index, kind).read_text()
                parts.append(text.split("\n", 1)[1])  # drop the chunk's header
            write_text(self.dir / name, "".join(parts))


class FollowerWriter:
    """What a process other than 0 keeps of the sweep directory: the chunk size and the
    finished chunks process 0 read from it; it writes and reads nothing."""

    def __init__(self, chunk_size: int | None, layout: str | None, finished: list[int]):
        self.manifest = {
            "chunk_size": chunk_size,
            "layout": layout,
            "chunks": {str(i): None for i in finished},
        }

    seconds_before = 0.0
    chunk_size = SweepWriter.chunk_size
    layout = SweepWriter.layout
    finished = SweepWriter.finished

    def set_chunk_size(self, chunk: int) -> None:
        self.manifest["chunk_size"] = int(chunk)

    def set_layout(self, layout: str) -> None:
        self.manifest["layout"] = layout

    def read_chunk(self, index: int) -> tuple[dict, dict]:
        return {}, {}

    def write_description(self, **extra: Any) -> None:
        pass

    def add_chunk(self, index: int, first: int, runs: list) -> None:
        self.manifest["chunks"][str(index)] = None

    def write_tables(self) -> None:
        pass


def open_sweep_writer(*args: Any, **kwargs: Any) -> SweepWriter | FollowerWriter:
    """:class:`SweepWriter` (same arguments) on process 0; on the others a
    :class:`FollowerWriter` with the chunk size, layout and finished chunks process 0 found. A
    refused directory raises the same :class:`OutputError` on every process."""
    writer, state = None, None
    if distributed.is_writer():
        try:
            writer = SweepWriter(*args, **kwargs)
            state = {
                "chunk_size": writer.chunk_size,
                "layout": writer.layout,
                "finished": writer.finished(),
            }
        except OutputError as err:
            state = {"error": str(err)}
    state = distributed.share(state)
    if "error" in state:
        raise OutputError(state["error"])
    if writer is not None:
        return writer
    return FollowerWriter(state["chunk_size"], state["layout"], state["finished"])
