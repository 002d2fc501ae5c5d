"""What the output directories of sweeps and searches share: value cells written exactly and
read back, CSV text, the identity hash and the manifest a resume checks, and the writer base
(its description file and manifest, each written atomically)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ppage_jax.artifacts import OutputError, inside, remove_partial_files, write_json

MANIFEST = "manifest.json"


def cell(value: float) -> str:
    """A value as written: exact (``repr``), NaN as an empty cell (``float_value`` reads
    it back)."""
    value = float(value)
    return "" if math.isnan(value) else repr(value)


def float_value(text: str) -> float:
    """A value cell read back: an empty cell is NaN."""
    return float(text) if text != "" else math.nan


def csv_text(header: tuple[str, ...], rows: Iterable[tuple]) -> str:
    """A CSV table (``\\n`` line ends) of ``header`` and ``rows``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def identity_hash(identity: dict) -> str:
    """A short hash of what defines a directory's results (JSON-ready ``identity``)."""
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def read_manifest(directory: str | Path, kind: str, format_name: str) -> dict:
    """``directory``'s ``kind`` manifest (``format_name`` its format); :class:`OutputError`
    when missing or unreadable."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise OutputError(f"{directory} holds no {kind} to resume (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise OutputError(f"{path}: unreadable {kind} manifest ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != format_name:
        raise OutputError(f"{path}: not a ppage_jax {kind} manifest")
    return manifest


def resumed_manifest(
    directory: Path, identity: str, kind: str, format_name: str, sources: str
) -> dict:
    """The manifest of the ``kind`` to resume in ``directory``; :class:`OutputError` when it
    holds another one (its ``identity`` hash differs: one of ``sources`` changed)."""
    manifest = read_manifest(directory, kind, format_name)
    if manifest.get("identity") != identity:
        raise OutputError(
            f"{directory} holds another {kind} (identity {manifest.get('identity')}, this one "
            f"is {identity}: {sources} changed); rerun it with --overwrite or choose another "
            f"output directory"
        )
    return manifest


class OutputWriter:
    """The writer base of an output directory ``dir``: its ``description`` (a JSON file named
    ``description_file``) and its ``manifest`` (``manifest.json``, the commit)."""

    dir: Path
    description: dict
    manifest: dict
    description_file: str

    def write_description(self, **extra: Any) -> None:
        """The description with ``extra`` merged in, written."""
        self.description.update(extra)
        write_json(self.dir / self.description_file, self.description, indent=2)

    def _commit(self) -> None:
        write_json(self.dir / MANIFEST, self.manifest, indent=1)

    def _settle(self, folders: Sequence[str], what: str) -> None:
        """Make ``folders`` (one linked elsewhere is refused: ``what`` names it), drop the
        partial files a killed run left in the directory and in them, then commit the
        manifest and write the description."""
        for sub in folders:
            inside(self.dir, sub, what).mkdir(exist_ok=True)
        for folder in (self.dir, *(self.dir / sub for sub in folders)):
            remove_partial_files(folder)
        self._commit()
        self.write_description()
