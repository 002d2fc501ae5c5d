"""Reward-hacking detectors measured: their settings in one file, rerun on saved curves
(``ppage-jax monitor``, :func:`monitor_curves`), and their error rates on a suite of reward
designs with ground truth (:mod:`.suite`)."""

from ppage_jax.analysis.detectors.replay import Detection, monitor_curves, read_directory
from ppage_jax.analysis.detectors.settings import DetectorSettings, load_settings

__all__ = ["Detection", "DetectorSettings", "load_settings", "monitor_curves", "read_directory"]
