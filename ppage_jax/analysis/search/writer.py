"""A search's output directory, written so that nothing finished is lost and a resumed search
ends byte-identical to an uninterrupted one.

- ``generations/NNNNN.json``: one finished generation: its candidates (unit coordinates as
  the strategy proposed them, the values, feasibility and why not, the loss and the rank
  given back to the strategy); ``generations/NNNNN.results.csv`` (``candidate, seed,
  metric, value``: every evaluation metric and monitor column of each run) and
  ``generations/NNNNN.audit.csv`` (the audit's rows per candidate);
- ``manifest.json``: the search's identity (a hash of its spec and config) and the finished
  generations; a generation is finished once the manifest lists it (its files are written
  first, each atomically, so a kill in between only repeats that generation), then whether
  the re-evaluation finished;
- ``search.csv`` (``generation, candidate, <one column per searched key>, seed, metric,
  flagged, feasible``) and ``audit.csv``: regenerated from the finished generations after
  each commit;
- ``reevaluation/``: ``results.csv`` (``arm, seed, metric, value``) and ``episodes.csv``
  (``arm, seed, episode, length, captured``) of the re-evaluation;
- ``search.json``: the resolved spec, the device and the timings;
- ``pick.json``: the selected design (or PBT's schedule) in one form for every strategy
  (:func:`write_pick`), and ``rewards.yaml``'s text (:func:`rewards_yaml`).

The finished generations' candidates are read back with :func:`load_candidates`.

A directory that already holds a search is refused unless resuming (same identity) or
overwriting (its search files are deleted first, nothing else).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppage_jax.analysis.batch.auditing import HEADER as AUDIT_HEADER
from ppage_jax.analysis.batch.output import (
    OutputWriter,
    cell,
    csv_text,
    float_value,
    identity_hash,
    resumed_manifest,
)
from ppage_jax.analysis.batch.output import read_manifest as read_any_manifest
from ppage_jax.artifacts import (
    OutputError,
    clear_output,
    fault,
    prepare_output_dir,
    write_bytes,
    write_json,
    write_text,
)
from ppage_jax.defaults import VERSION

if TYPE_CHECKING:
    from ppage_jax.analysis.search.spec import SearchSpec

MANIFEST_FORMAT = "ppage_jax search manifest 1"
MANIFEST = "manifest.json"
GENERATIONS = "generations"
REEVAL = "reevaluation"
SEARCH_CSV = "search.csv"
AUDIT_CSV = "audit.csv"
DESCRIPTION = "search.json"
REPORT = "report.md"
REWARDS = "rewards.yaml"
SELECTED = "selected"  # the re-evaluated pick's arm (and rewards.yaml's design)
PICK = "pick.json"  # the selected design or schedule, in one form for every strategy
SEARCH_FILES = (
    MANIFEST,
    GENERATIONS,
    REEVAL,
    SEARCH_CSV,
    AUDIT_CSV,
    DESCRIPTION,
    REPORT,
    REWARDS,
    "progress.png",
    "weights.png",
    PICK,
    "final.json",
    "config.yaml",
    "schedule.png",
)
RESULT_HEADER = ("candidate", "seed", "metric", "value")
REEVAL_HEADER = ("arm", "seed", "metric", "value")
EPISODE_HEADER = ("arm", "seed", "episode", "length", "captured")


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def read_manifest(directory: str | Path) -> dict:
    """``directory``'s search manifest; :class:`OutputError` when missing or unreadable."""
    return read_any_manifest(directory, "search", MANIFEST_FORMAT)


class SearchWriter(OutputWriter):
    """The files of one search directory (see the module docstring)."""

    description_file = DESCRIPTION

    def __init__(
        self,
        output_dir: str | Path,
        description: dict,
        identity: dict,
        resume: bool = False,
        overwrite: bool = False,
    ):
        self.dir = prepare_output_dir(output_dir, "search directory")
        self.description = {"version": VERSION, **description}
        # the seconds earlier runs of this search spent (kept across --resume)
        self.previous_seconds = 0.0
        self.identity = identity_hash(identity)
        if resume and (self.dir / MANIFEST).exists():
            self.manifest = resumed_manifest(
                self.dir, self.identity, "search", MANIFEST_FORMAT, "the search file or its configs"
            )
            try:
                before = json.loads((self.dir / DESCRIPTION).read_text())
                self.previous_seconds = float(before.get("search_seconds", 0.0))
            except (OSError, ValueError, TypeError):
                self.previous_seconds = 0.0
        else:
            clear_output(self.dir, SEARCH_FILES, "search", overwrite, "--resume")
            self.manifest = {
                "format": MANIFEST_FORMAT,
                "identity": self.identity,
                "generations": [],
                "reevaluated": False,
            }
        self._settle((GENERATIONS, REEVAL), "search folder")

    # ---------------------------------------------------------------- state
    def finished(self) -> list[int]:
        return sorted(int(g) for g in self.manifest["generations"])

    @property
    def reevaluated(self) -> bool:
        return bool(self.manifest["reevaluated"])

    def _gen_path(self, generation: int, kind: str) -> Path:
        return self.dir / GENERATIONS / f"{generation:05d}.{kind}"

    def generation_file(self, generation: int, kind: str) -> Path:
        """The path of a generation's file ``generations/NNNNN.<kind>``."""
        return self._gen_path(generation, kind)

    def read_generation(self, generation: int) -> dict:
        """A finished generation: its JSON record plus ``results`` ({(candidate, seed):
        {metric: value}}) and ``audit`` (rows)."""
        try:
            record = json.loads(self._gen_path(generation, "json").read_text())
            results: dict = {}
            for row in read_csv(self._gen_path(generation, "results.csv")):
                key = (row["candidate"], int(row["seed"]))
                results.setdefault(key, {})[row["metric"]] = float_value(row["value"])
            audit = [tuple(r.values()) for r in read_csv(self._gen_path(generation, "audit.csv"))]
        except (OSError, KeyError, ValueError) as err:
            raise OutputError(
                f"{self.dir}: generation {generation} is listed as finished but its files "
                f"cannot be read ({err}); rerun the search with --overwrite"
            ) from None
        record["results"] = results
        record["audit"] = audit
        return record

    # ---------------------------------------------------------------- writing
    def add_generation(
        self,
        generation: int,
        record: dict,
        results: dict[tuple[str, int], dict[str, float]],
        audit: list[tuple],
        extra: dict[str, str | bytes] | None = None,
    ) -> None:
        """Record a finished generation: its files (``extra``: more files of it, ``{kind:
        contents}`` written as ``generations/NNNNN.<kind>``), then the manifest (the commit),
        then the regenerated search.csv and audit.csv."""
        for kind, data in (extra or {}).items():
            path = self._gen_path(generation, kind)
            write_bytes(path, data) if isinstance(data, bytes) else write_text(path, data)
        rows = [
            (cand, seed, metric, cell(value))
            for (cand, seed), metrics in results.items()
            for metric, value in metrics.items()
        ]
        write_text(self._gen_path(generation, "results.csv"), csv_text(RESULT_HEADER, rows))
        write_text(self._gen_path(generation, "audit.csv"), csv_text(AUDIT_HEADER, audit))
        write_json(self._gen_path(generation, "json"), record, indent=1)
        fault(f"commit:{generation + 1}")  # testing hook: killed before the commit
        self.manifest["generations"].append(int(generation))
        self._commit()
        self.write_tables()

    def write_tables(self) -> None:
        """search.csv and audit.csv from the finished generations."""
        header: tuple[str, ...] | None = None
        rows: list[tuple] = []
        audit: list[tuple] = []
        for g in self.finished():
            record = self.read_generation(g)
            keys = record["keys"]
            header = ("generation", "candidate", *keys, "seed", "metric", "flagged", "feasible")
            for cand in record["candidates"]:
                if not cand.get("trained", True):  # refused by the constraint: one empty row
                    values = [cell(v) for v in cand["values"]]
                    rows.append((g, cand["name"], *values, "", "", 0, 0))
                for seed in cand["seeds"]:
                    values = [cell(v) for v in cand["values"]]
                    rows.append(
                        (
                            g,
                            cand["name"],
                            *values,
                            seed,
                            cell(record["results"][cand["name"], seed][record["metric"]]),
                            int(cand["flagged_seeds"].get(str(seed), 0)),
                            int(cand["feasible"]),
                        )
                    )
            audit.extend(record["audit"])
        if header is not None:
            write_text(self.dir / SEARCH_CSV, csv_text(header, rows))
        write_text(self.dir / AUDIT_CSV, csv_text(AUDIT_HEADER, audit))

    def write_reevaluation(
        self,
        results: dict[tuple[str, int], dict[str, float]],
        episodes: list[tuple[str, int, int, int, int]],
    ) -> None:
        """The re-evaluation's files, then the manifest's ``reevaluated`` (the commit)."""
        rows = [
            (arm, seed, metric, cell(value))
            for (arm, seed), metrics in results.items()
            for metric, value in metrics.items()
        ]
        write_text(self.dir / REEVAL / "results.csv", csv_text(REEVAL_HEADER, rows))
        write_text(self.dir / REEVAL / "episodes.csv", csv_text(EPISODE_HEADER, episodes))
        self.manifest["reevaluated"] = True
        self._commit()


def search_identity(spec: SearchSpec, env_steps_per_update: int, horizon: int) -> dict:
    """What defines a search's results (hashed into its manifest)."""
    described = {k: v for k, v in spec.describe().items() if k not in ("search", "config")}
    return dict(described, env_steps_per_update=env_steps_per_update, eval_step_limit=horizon)


def write_above_bar(message: str) -> None:
    """``message`` on stderr, above a running progress bar."""
    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stderr)  # above the progress bar


def open_search_writer(
    spec: SearchSpec, out_dir: Path, steps: int, horizon: int, *, resume: bool, overwrite: bool
) -> SearchWriter:
    """The :class:`SearchWriter` of a search (any strategy): its description with the devices,
    env steps per update and step limit, and the identity a resume must match."""
    import jax

    described = dict(
        spec.describe(),
        devices=jax.device_count(),
        platform=jax.devices()[0].platform,
        env_steps_per_update=steps,
        eval_step_limit=horizon,
    )
    identity = search_identity(spec, steps, horizon)
    return SearchWriter(out_dir, described, identity, resume=resume, overwrite=overwrite)


def load_candidates(out_dir: Path) -> list[dict]:
    """Every finished generation's candidate records, in order."""
    writer_dir = Path(out_dir)
    manifest = read_manifest(writer_dir)
    cands = []
    for g in sorted(manifest["generations"]):
        record = json.loads((writer_dir / "generations" / f"{g:05d}.json").read_text())
        cands.extend(record["candidates"])
    return cands


def load_means(out_dir: Path) -> list[list[float] | None]:
    """Every finished generation's strategy mean (None where the strategy has none)."""
    manifest = read_manifest(out_dir)
    out = []
    for g in sorted(manifest["generations"]):
        record = json.loads((Path(out_dir) / "generations" / f"{g:05d}.json").read_text())
        out.append(record.get("strategy_mean"))
    return out


def rewards_yaml(spec: SearchSpec, values: list[float]) -> str:
    """The selected design as a ``rewards.yaml`` (terms at weight 0 left out)."""
    from ppage_jax.analysis.search.space import candidate_arm

    arm = candidate_arm(spec.design, spec.dims, values, SELECTED)
    rewards = spec.config["rewards"]
    base = next((e for e in arm.entries if e.name == "base"), None)
    body: dict[str, Any] = {"gamma": float(arm.gamma)}
    if base is not None:
        body["base"] = {"enabled": True, "weight": float(base.weight), "params": dict(base.params)}
    else:
        body["base"] = {"enabled": False}
    body["shaping"] = [
        {
            "name": e.name,
            "weight": float(e.weight),
            "params": dict(e.params),
            "applies_to": e.applies_to,
        }
        for e in arm.entries
        if e.name != "base" and e.weight != 0.0
    ]
    body["normalization"] = dict(rewards["normalization"])
    lines = [
        "# The reward design selected by `ppage-jax search` "
        f"({Path(spec.path).name}); drop it into a config directory.",
    ]
    hyper = {d.name: v for d, v in zip(spec.dims, values, strict=True) if d.kind == "hyperparams"}
    if hyper:
        lines.append(
            "# Searched training hyperparameters (experiment.algorithm.params): "
            + ", ".join(f"{k}={v:.6g}" for k, v in hyper.items())
        )
    import yaml

    return "\n".join(lines) + "\n" + yaml.safe_dump({"rewards": body}, sort_keys=False)


def write_pick(
    out_dir: Path,
    spec: SearchSpec,
    name: str,
    values: Sequence[float],
    score: float,
    record: Mapping[str, Any],
    schedule: Sequence[Sequence[float]] | None = None,
) -> Path:
    """``pick.json``: the search's selected design (or schedule) in one form for every
    strategy: what the comparison of strategies reads."""
    return write_json(
        out_dir / PICK,
        {
            "strategy": spec.strategy,
            "name": name,
            "keys": [d.key for d in spec.dims],
            "values": [float(v) for v in values],
            "search_score": float(score),
            "metric": spec.metric,
            "feasible": bool(record.get("feasible", True)),
            "reason": str(record.get("reason", "")),
            "runs": spec.runs,
            "schedule": [list(map(float, row)) for row in schedule] if schedule else None,
        },
        indent=1,
    )
