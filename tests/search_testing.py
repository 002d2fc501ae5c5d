"""Shared setup of the command-line search tests: a tiny search file (one generation of four
candidates over the tiny sweep's config)."""

from __future__ import annotations

from pathlib import Path

import yaml
from cli_testing import REPO, TINY_SWEEP


def write_search_file(path: Path) -> Path:
    """A search of one generation of four candidates x one seed over one weight of the
    tiny sweep's config, one reference, no audit."""
    body = {
        "config": str(REPO / "configs/ablation/both"),
        "set": TINY_SWEEP["set"],
        "space": {"weights.predator_distance": {"low": 0.0, "high": 1.0}},
        "population": 4,
        "seeds": 1,
        "generations": 1,
        "eval": {"episodes": 2},
        "audit": False,
        "references": {"base_only": {"disable": ["predator_distance", "survival"]}},
        "reevaluate": {"seeds": 1, "train_seed": 50, "eval_seed": 3000, "episodes": 2},
    }
    path.write_text(yaml.safe_dump({"search": body}, sort_keys=False))
    return path
