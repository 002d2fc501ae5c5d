"""Reward-ablation sweeps: every arm x seed trained and evaluated as one compiled program."""

from ppage_jax.analysis.sweep.run import run_sweep
from ppage_jax.analysis.sweep.spec import SweepSpec, load_sweep

__all__ = ["SweepSpec", "load_sweep", "run_sweep"]
