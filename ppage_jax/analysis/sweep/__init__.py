"""Reward-ablation sweeps: every arm x seed trained and evaluated as one compiled program.

``run_sweep``, ``load_sweep`` and ``SweepSpec`` (:mod:`ppage_jax.analysis.batch.spec`) load on
first use, so that a module of ``ppage_jax.analysis`` reading a sweep directory's files
(``.baselines``, ``.writer``) does not load the sweep runner with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppage_jax.analysis.batch.spec import SweepSpec
    from ppage_jax.analysis.sweep.run import run_sweep
    from ppage_jax.analysis.sweep.spec import load_sweep

__all__ = ["SweepSpec", "load_sweep", "run_sweep"]


def __getattr__(name: str) -> Any:
    if name == "run_sweep":
        from ppage_jax.analysis.sweep.run import run_sweep

        return run_sweep
    if name == "load_sweep":
        from ppage_jax.analysis.sweep.spec import load_sweep

        return load_sweep
    if name == "SweepSpec":
        from ppage_jax.analysis.batch.spec import SweepSpec

        return SweepSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
