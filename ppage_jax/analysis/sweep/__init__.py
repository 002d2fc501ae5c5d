"""Reward-ablation sweeps: every arm x seed trained and evaluated as one compiled program.

``run_sweep``, ``load_sweep`` and ``SweepSpec`` load on first use, so that a module of
``ppage_jax.analysis`` reading a sweep directory's files (``.baselines``, ``.writer``) does not
load the sweep runner with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppage_jax.analysis.sweep.run import run_sweep
    from ppage_jax.analysis.sweep.spec import SweepSpec, load_sweep

__all__ = ["SweepSpec", "load_sweep", "run_sweep"]


def __getattr__(name: str) -> Any:
    if name == "run_sweep":
        from ppage_jax.analysis.sweep.run import run_sweep

        return run_sweep
    if name in ("SweepSpec", "load_sweep"):
        from ppage_jax.analysis.sweep import spec

        return getattr(spec, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
