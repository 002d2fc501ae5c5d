"""The sweep's first stage: the reward audit (:func:`ppage_jax.analysis.audit.audit_rewards`,
what ``ppage-jax audit`` runs) of every arm before anything trains, into ``audit.csv``.

Every arm is audited in the sweep's shared term structure with its own ``EnvParams``; the
reward numbers are traced, so the audit's rollout program compiles once for all arms. The
budget is small (``EPISODES`` held-out episodes per baseline policy pair, the audit's
default pairs and seeds): the flags are structural (a shaping term that is not a potential,
a termination incentive, shaping carrying most of a role's pay) and need no more.

``audit.csv`` rows: ``arm, check, role, term, flagged, detail``: one row per flag the audit
raised (``flagged`` 1, its role and term where it has one, its message), and one row with
``flagged`` 0 for each check that raised nothing for the arm. ``check`` is the audit's own
flag name (:data:`CHECKS`). The ``stall_margin`` rows always hold the predators' analytic
stall margin as a number in ``detail``'s first word when the arm has predators
(:mod:`ppage_jax.analysis.audit.margin`).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import jax.numpy as jnp

from ppage_jax.analysis.batch.output import csv_text
from ppage_jax.artifacts import write_text
from ppage_jax.env import GridWorld
from ppage_jax.state import NO_TRUNCATION, EnvParams

AUDIT_FILE = "audit.csv"
HEADER = ("arm", "check", "role", "term", "flagged", "detail")
# The audit's flags (ppage_jax.analysis.audit.flags), in its report's order.
CHECKS = (
    "not_potential",
    "shaping_share",
    "early_termination",
    "stalling",
    "stall_margin",
    "ordering",
    "dominant_term",
    "dead_term",
)
# Episodes per policy pair (9 pairs per arm; ppage-jax audit plays 256): about 5 s per arm
# on 2 CPU cores for PPAGE's 10x10 ablation, after one ~20 s compile for every arm.
EPISODES = 32


def audit_rows(
    env: GridWorld,
    arm_params: Sequence[EnvParams],
    names: Sequence[str],
    horizon: int,
    episodes: int = EPISODES,
) -> list[tuple[str, str, str, str, int, str]]:
    """The audit.csv rows of every arm. Episodes run to the env's step limit (else to the
    evaluation's ``horizon`` when the env sets none)."""
    from ppage_jax.analysis.audit import AuditSettings, audit_rewards

    settings = AuditSettings(episodes=episodes)
    rows = []
    for name, params in zip(names, arm_params, strict=True):
        if int(params.max_steps) >= NO_TRUNCATION:
            params = params.replace(max_steps=jnp.asarray(horizon, params.max_steps.dtype))
        report = audit_rewards(env, params, settings)
        raised = {check: [] for check in CHECKS}
        for flag in report["flags"]:
            raised.setdefault(flag["kind"], []).append(flag)
        margin = report["stall_margin"].get("predator")
        for check, flags in raised.items():
            if check == "stall_margin" and margin is not None:
                rows.append((name, check, "predator", "", int(bool(flags)), margin_detail(margin)))
                continue
            if not flags:
                rows.append((name, check, "", "", 0, ""))
            for flag in flags:
                term = flag.get("term", "")
                if flag.get("component"):
                    term = f"{term}.{flag['component']}"
                rows.append((name, check, flag.get("role", ""), term, 1, flag["message"]))
    return rows


def margin_detail(margin: dict) -> str:
    """audit.csv's ``stall_margin`` detail: the margin as a number first, then in words."""
    from ppage_jax.analysis.audit.flags import describe_margin

    text = describe_margin(margin)
    return text if not margin["unbounded"] else f"nan {text}"


def stall_margin_of(rows: Sequence[dict], arm: str) -> float:
    """The predators' stall margin of ``arm`` from audit.csv rows (NaN when absent)."""
    for row in rows:
        if row["arm"] == arm and row["check"] == "stall_margin" and row["detail"]:
            try:
                return float(row["detail"].split()[0])
            except ValueError:
                return float("nan")
    return float("nan")


def write_audit(directory: str | Path, rows: Sequence[tuple]) -> Path:
    """``directory/audit.csv`` (atomically)."""
    path = Path(directory) / AUDIT_FILE
    write_text(path, csv_text(HEADER, rows))
    return path


def read_audit(path: str | Path) -> list[dict[str, str]]:
    """audit.csv's rows as dicts (``flagged`` kept as text)."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))
