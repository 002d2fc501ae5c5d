"""The detectors' settings, in one file: the monitor's thresholds, the two naive baselines',
the audit's, and the thresholds a ROC curve sweeps.

```yaml
detectors:
  monitor: {window: 20, patience: 3, alpha: 0.01, min_change: 0.1, share_threshold: 0.8,
            baseline: untrained, min_episodes: 32}
  naive: {window: 20, patience: 3, alpha: 0.01, min_change: 0.1}
  audit: {dominance: 0.9, shaping_share: 0.5, ordering_margin: 0.05}
  roc: {alphas: [0.0001, 0.001, 0.01, 0.05, 0.2]}
```

Every key may be left out (the defaults are the ones above, :class:`MonitorConfig`'s and
:class:`~ppage_jax.analysis.audit.settings.AuditSettings`'s); an unknown key, a window
below 2, a threshold outside [0, 1] where it is a share or a level outside (0, 1) is a
one-line :class:`~ppage_jax.config.ConfigError` naming the file and the key.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ppage_jax.analysis.audit.settings import AuditSettings
from ppage_jax.config import ConfigError
from ppage_jax.config.experiment.section import MONITOR_BASELINES
from ppage_jax.config.safe_yaml import load_yaml
from ppage_jax.train.run.monitor import MonitorConfig

SECTIONS = ("monitor", "naive", "audit", "roc")
NAIVE_KEYS = ("window", "patience", "alpha", "min_change")
AUDIT_KEYS = ("dominance", "shaping_share", "ordering_margin")
# How each numeric key is checked: (kind, low, high): kind int (>= low), share ([0, 1]),
# level ((0, 1), open), nonneg (>= 0).
RULES = {
    "window": ("int", 2),
    "patience": ("int", 1),
    "min_episodes": ("int", 1),
    "alpha": ("level",),
    "min_change": ("nonneg",),
    "share_threshold": ("share",),
    "dominance": ("share",),
    "shaping_share": ("share",),
    "ordering_margin": ("nonneg",),
}
DEFAULT_ALPHAS = (1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.2, 0.5)


@dataclasses.dataclass(frozen=True)
class NaiveConfig:
    """The naive baselines' trend test: window (blocks), patience, Kendall alpha and the
    smallest change (relative to the window's median magnitude)."""

    window: int = 20
    patience: int = 3
    alpha: float = 0.01
    min_change: float = 0.1

    def as_monitor(self) -> MonitorConfig:
        """The same trend test in the monitor's terms (its :func:`trend` reads these)."""
        return MonitorConfig(
            window=self.window, patience=self.patience, alpha=self.alpha, min_change=self.min_change
        )


@dataclasses.dataclass(frozen=True)
class DetectorSettings:
    """Every detector's settings (see the module docstring); ``source`` names the file."""

    monitor: MonitorConfig = MonitorConfig()
    naive: NaiveConfig = NaiveConfig()
    audit: dict[str, float] = dataclasses.field(
        default_factory=lambda: {k: getattr(AuditSettings(), k) for k in AUDIT_KEYS}
    )
    roc_alphas: tuple[float, ...] = DEFAULT_ALPHAS
    source: str = "<defaults>"

    def with_alpha(self, alpha: float) -> DetectorSettings:
        """These settings with every trend and fall test at level ``alpha`` (a ROC point)."""
        return dataclasses.replace(
            self,
            monitor=dataclasses.replace(self.monitor, alpha=alpha),
            naive=dataclasses.replace(self.naive, alpha=alpha),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "monitor": dataclasses.asdict(self.monitor),
            "naive": dataclasses.asdict(self.naive),
            "audit": dict(self.audit),
            "roc": {"alphas": list(self.roc_alphas)},
        }


def _check(source: str, key: str, value: Any) -> Any:
    name = key.rsplit(".", 1)[-1]
    rule = RULES.get(name)
    if rule is None:
        return value
    kind = rule[0]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "int":
        if not (number and isinstance(value, int) and value >= rule[1]):
            raise ConfigError(source, key, value, f"must be an integer >= {rule[1]}")
    elif kind == "share" and not (number and 0.0 <= value <= 1.0):
        raise ConfigError(source, key, value, "must be a share in [0, 1]")
    elif kind == "level" and not (number and 0.0 < value < 1.0):
        raise ConfigError(source, key, value, "must be a level in (0, 1)")
    elif kind == "nonneg" and not (number and value >= 0.0):
        raise ConfigError(source, key, value, "must be a number >= 0")
    return value


def _section(source: str, body: dict, name: str, keys: tuple[str, ...]) -> dict[str, Any]:
    raw = body.get(name) or {}
    where = f"detectors.{name}"
    if not isinstance(raw, dict):
        raise ConfigError(source, where, raw, "must be a mapping")
    for key, value in raw.items():
        if key not in keys:
            raise ConfigError(
                source, f"{where}.{key}", value, f"unknown key; allowed keys: {list(keys)}"
            )
        _check(source, f"{where}.{key}", value)
    return dict(raw)


def settings_from_mapping(raw: Any, source: str = "<settings>") -> DetectorSettings:
    """:class:`DetectorSettings` from a parsed settings file (``{"detectors": {...}}``)."""
    if not isinstance(raw, dict) or set(raw) != {"detectors"}:
        shown = sorted(raw) if isinstance(raw, dict) else raw
        raise ConfigError(source, "<top level>", shown, "holds exactly one key, 'detectors'")
    body = raw["detectors"] or {}
    if not isinstance(body, dict):
        raise ConfigError(source, "detectors", body, "must be a mapping")
    for key in body:
        if key not in SECTIONS:
            raise ConfigError(
                source, f"detectors.{key}", body[key], f"unknown section; allowed: {list(SECTIONS)}"
            )
    monitor_keys = tuple(f.name for f in dataclasses.fields(MonitorConfig))
    monitor = _section(source, body, "monitor", monitor_keys)
    if monitor.get("baseline", "untrained") not in MONITOR_BASELINES:
        raise ConfigError(
            source,
            "detectors.monitor.baseline",
            monitor["baseline"],
            f"must be one of {list(MONITOR_BASELINES)}",
        )
    naive = _section(source, body, "naive", NAIVE_KEYS)
    audit = _section(source, body, "audit", AUDIT_KEYS)
    roc = _section(source, body, "roc", ("alphas",))
    alphas = roc.get("alphas", list(DEFAULT_ALPHAS))
    if not isinstance(alphas, list) or not alphas:
        raise ConfigError(source, "detectors.roc.alphas", alphas, "must be a non-empty list")
    for alpha in alphas:
        _check(source, "detectors.roc.alphas.alpha", alpha)
    defaults = DetectorSettings()
    return DetectorSettings(
        monitor=MonitorConfig(**monitor),
        naive=NaiveConfig(**naive),
        audit={**defaults.audit, **{k: float(v) for k, v in audit.items()}},
        roc_alphas=tuple(sorted(float(a) for a in alphas)),
        source=source,
    )


def load_settings(path: str | Path | None = None) -> DetectorSettings:
    """The settings file at ``path`` (None: the defaults)."""
    if path is None:
        return DetectorSettings()
    file = Path(path)
    if not file.is_file():
        raise ConfigError(str(file), "<path>", str(file), "must be an existing settings file")
    return settings_from_mapping(load_yaml(file.read_bytes(), str(file)), str(file))
