"""The metric table: the task metrics of held-out episodes, each named, labelled and given
its better direction once.

A :class:`Metric` is what every reader of a metric needs besides its value: the label the
reports print, whether a higher value is better, and whether it is survivor-biased (a mean
over the captured episodes only, which shortens as captures become rare: shown as a
diagnostic, never ranked on, no evidence of a gain). :data:`METRICS` holds them in the
sweep report's order; the sweep and search reports, the search's ranking and comparison, the
search file's ``eval.metric`` and the reward-hacking monitor's task directions all read it,
so adding a metric touches this file only.

Directions are the predators' (the task is the capture): a higher ``capture_rate`` is
better, a higher ``rmst`` worse. The prey's task is the opposite on those. A metric of one
role's own (``role`` set: ``base_return/<role>``, the base term's return at unit weight) is
better the same way whichever role reads it. :func:`better_sign` says which way is better for
a role.

The values come from :func:`ppage_jax.episodes.summary.summarize_episodes` (and, for
``base_return/<role>``, the sweep's per-run metrics).
"""

from __future__ import annotations

import dataclasses

from ppage_jax.defaults import ROLES


@dataclasses.dataclass(frozen=True)
class Metric:
    """One task metric: ``name`` (its column in results.csv), ``label`` (the reports' row
    label), ``higher_is_better`` (for the predators, or for ``role``), ``survivor_biased``.

    ``role``: the role whose own metric it is (None: a metric of the task, shared by the
    roles). ``prose``: the label in the search report's running text, when it differs from
    ``label`` (kept so that reports already written read the same)."""

    name: str
    label: str
    higher_is_better: bool
    survivor_biased: bool = False
    role: str | None = None
    prose: str | None = None

    @property
    def sign(self) -> int:
        """+1 when a higher value is better (for the predators, or for ``role``), else -1."""
        return 1 if self.higher_is_better else -1

    @property
    def text(self) -> str:
        """The label in running text (``prose``, else ``label``)."""
        return self.prose or self.label


def _table(*metrics: Metric) -> dict[str, Metric]:
    return {m.name: m for m in metrics}


METRICS: dict[str, Metric] = _table(
    Metric(
        "rmst",
        "RMST: mean turns to capture, censored",
        False,
        prose="RMST (turns to capture, censored)",
    ),
    Metric("km_median", "KM median turns to capture", False),
    Metric("capture_rate", "capture rate", True),
    Metric("truncated_share", "share hitting the step limit", False),
    Metric("episode_length", "episode length (turns)", False),
    *(Metric(f"base_return/{r}", f"base return, {r}", True, role=r) for r in ROLES),
    Metric(
        "steps_to_capture",
        "steps to capture, captured episodes only (survivor-biased)",
        False,
        survivor_biased=True,
    ),
)


def metric_of(name: str, role: str = "predator") -> Metric:
    """The table's entry for ``name``; a role's own metric may be named without its role
    (``base_return``: ``role``'s ``base_return/<role>``)."""
    return METRICS.get(f"{name}/{role}") or METRICS[name]


def better_sign(name: str, role: str = "predator") -> int:
    """+1 when a higher ``name`` (see :func:`metric_of`) is better for ``role``, -1 when a
    lower one is: the table's direction for the predators and for a role's own metric, the
    opposite for the prey on a metric of the task."""
    metric = metric_of(name, role)
    return metric.sign if metric.role is not None or role == "predator" else -metric.sign


def headline() -> dict[str, tuple[str, bool]]:
    """``{name: (label, higher is better)}`` of the metrics reported as headlines (every one
    not survivor-biased), in the table's order."""
    return {
        m.name: (m.label, m.higher_is_better) for m in METRICS.values() if not m.survivor_biased
    }


def diagnostics() -> dict[str, tuple[str, bool]]:
    """``{name: (label, higher is better)}`` of the survivor-biased metrics: shown after the
    headline, labelled, never ranked on."""
    return {m.name: (m.label, m.higher_is_better) for m in METRICS.values() if m.survivor_biased}


def rankable() -> tuple[str, ...]:
    """The metrics a design may be ranked by (``search.eval.metric``): those of the task
    (no role's own), not survivor-biased, in the table's order."""
    return tuple(m.name for m in METRICS.values() if m.role is None and not m.survivor_biased)
