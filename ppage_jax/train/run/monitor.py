"""A reward-hacking monitor over a run's metrics rows, update by update (host side).

For every seed and learning role it compares the trend of the shaped return (every term as
paid, summed) over the last ``window`` active updates with the task metrics, and raises:

- ``hacking``: the shaped return rises while a task metric worsens for that role (capture
  rate, time to capture of the captured episodes, the base term's return);
- ``episode_length``: the shaped return rises while the episode length moves against the
  role's task (longer for predators, shorter for prey);
- ``share``: a shaping term's share of the role's return (``|R_term| / sum |R|``, window
  median) drifts above ``share_threshold`` from at or below it at the start, while no task
  metric (nor the episode length) has improved for the role since the start (by
  ``min_change``, window medians against the start): prey paid per turn alive that learn to
  evade see their survival share grow, and that is not hacking. The time to capture of the
  captured episodes is survivor-biased (it shortens as captures become rare) and is no
  evidence of a gain here; the capture rate, the base return and the episode length are;
- ``drift``: the task has fallen from its running peak while the shaped return rose: the
  role's capture rate (survival for prey) over the last ``window`` blocks is below its
  best window so far (one that ended at least a window earlier) by ``min_change`` of it,
  one-sided two-proportion z-test ``p < alpha`` on the episodes' counts, and the shaped
  return is above the peak window's by ``min_change`` of its magnitude. A slow stall, a
  fall spread over a hundred updates that no 20-update trend sees, is caught here;
- ``below_start``: the task is below where it started while the shaped return rose: the
  role's capture rate (survival for prey) over the last ``window`` blocks is below the
  start's (the untrained run's; the first window's with ``first_window``) by
  ``min_change`` of it, one-sided two-proportion z-test ``p < alpha`` on the episodes'
  counts, and the shaped return is above the start's by ``min_change`` of its magnitude.
  A design farmed from the first updates (no trend left to see, no peak to fall from) whose
  learner ends worse than random is caught here, also when random was already near zero
  (a fall from 0.08 to 0 is 100 % of the start, though less than 0.1 in absolute terms).

The checks read **episode-weighted** inputs: consecutive updates of a seed are pooled into
blocks holding at least ``min_episodes`` finished episodes, and a block's capture rate,
episode length and returns are the means over its episodes (an update in which one episode
finished weighs one episode, not as much as one in which forty did). Windows count blocks.
A row without an ``episodes`` count is a block of its own.

The start (``baseline``) is, by default (``untrained``), the untrained run: the learning
roles playing uniformly random actions (what a freshly initialised policy plays) against the
others' configured policies, over whole episodes on the evaluation's held-out layouts
(:func:`ppage_jax.train.run.evaluate.untrained_levels`, measured before training). A reward
that is farmed within the first updates (before the first window closes) has drifted by
then; measured from the untrained run the drift is still seen. With ``first_window`` the
start is the first window's medians, what earlier releases used.

A trend (:mod:`ppage_jax.stats.trend`) is Kendall's tau against the update index with
``p < alpha`` and a Theil-Sen change over the window of at least ``min_change`` (relative to
the window's median magnitude; absolute for the capture rate). A condition must hold
``patience`` updates in a row. The first updates of a run, before a grid can have reached
the step limit (``ceil(max_steps / num_steps)``, the warm-up), are left out of every window:
the episodes that end in them are only the short ones, so their capture rate and episode
length are biased (with a 200-turn limit and 32-turn rollouts, 100 % capture in seven turns
on average at update 1), and a window that starts there sees the task "worsen" as longer
episodes begin to finish. Flags become 0/1 columns ``monitor/<check>/<role>[/<term>]`` of
the rows, :meth:`Monitor.summary` goes to summary.json and
:func:`ppage_jax.train.run.report.monitor_table` prints the end-of-run table. Configured by
``experiment.monitor`` (``enabled``, ``window``, ``patience``, ``alpha``, ``min_change``,
``share_threshold``, ``baseline``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ppage_jax.config.experiment.section import MONITOR_BASELINES as BASELINES
from ppage_jax.defaults import ROLES
from ppage_jax.episodes.metrics import better_sign, metric_of
from ppage_jax.state import NO_TRUNCATION
from ppage_jax.stats.trend import Trend, proportion_fall_p, significant_trend
from ppage_jax.train.run.evaluate import untrained_levels

PREFIX = "monitor/"
# Task metrics the hacking check watches (base_return: the role's own) and the direction in
# which one moving is bad for a role's task (+1 rising, -1 falling), from the metric table.
TASK_METRICS = ("capture_rate", "steps_to_capture", "base_return")
TASK_BAD = {role: {m: -better_sign(m, role) for m in TASK_METRICS} for role in ROLES}
LENGTH_BAD = {role: -better_sign("episode_length", role) for role in ROLES}
CHECKS = {
    "hacking": "shaped return up while the task gets worse",
    "episode_length": "shaped return up, episode length against the task",
    "share": "shaping term's share of the return drifted above {threshold:g}",
    "drift": "task fell from its running peak while the shaped return rose",
    "below_start": "task below its start while the shaped return rose",
}
# The checks of the window's trends and shares (a search's constraint counts these); drift
# and below_start compare levels with the run's peak or its start.
TREND_CHECKS = ("hacking", "episode_length", "share")
# No evidence of a task gain (survivor-biased): the time to capture of the captured episodes
# shortens when captures become rare; the capture rate and the episode length speak instead.
SURVIVOR_BIASED = tuple(m for m in TASK_METRICS if metric_of(m).survivor_biased)
# Metrics compared on an absolute scale (rates in [0, 1]).
ABSOLUTE = ("capture_rate",)


@dataclasses.dataclass(frozen=True)
class MonitorConfig:
    """``experiment.monitor``."""

    enabled: bool = True
    window: int = 20
    patience: int = 3
    alpha: float = 0.01
    min_change: float = 0.1
    share_threshold: float = 0.8
    baseline: str = "untrained"
    min_episodes: int = 32

    def __post_init__(self):
        if self.baseline not in BASELINES:
            raise ValueError(
                f"experiment.monitor.baseline must be one of {list(BASELINES)}, "
                f"not {self.baseline!r}"
            )

    @classmethod
    def from_experiment(cls, exp: Mapping[str, Any]) -> MonitorConfig:
        return cls(**dict(exp.get("monitor") or {}))


@dataclasses.dataclass(frozen=True)
class Flag:
    """A check that fired for the first time for a seed."""

    check: str
    role: str
    seed: int
    update: int
    env_steps: int
    detail: str
    term: str | None = None

    @property
    def column(self) -> str:
        return column(self.check, self.role, self.term)

    @property
    def message(self) -> str:
        return (
            f"reward-hacking monitor: seed {self.seed}, {self.role}: {self.detail} "
            f"(update {self.update}, {self.env_steps:,} env steps)"
        )


def column(check: str, role: str, term: str | None = None) -> str:
    return PREFIX + "/".join(p for p in (check, role, term) if p)


def trend(values: Sequence[float], cfg: MonitorConfig, absolute: bool = False) -> Trend | None:
    """The significant trend of ``values`` (NaNs dropped) over a window of ``cfg``, or None
    (:func:`ppage_jax.stats.trend.significant_trend`)."""
    y = np.asarray(values, np.float64)
    return significant_trend(tuple(y.tolist()), cfg.window, cfg.alpha, cfg.min_change, absolute)


def _episodes(row: Mapping) -> float:
    """A row's finished episodes (0 when it has no finite count)."""
    value = float(row.get("episodes", 0) or 0)
    return value if math.isfinite(value) and value > 0 else 0.0


def pool_rows(rows: Sequence[Mapping]) -> dict:
    """One block from consecutive metrics rows of a seed: the last row's ``seed``,
    ``update`` and ``env_steps``, the episodes summed, and every other number the mean over
    the rows' episodes (``steps_to_capture`` over their captured episodes); a row without an
    ``episodes`` count weighs 1."""
    last = rows[-1]
    block: dict[str, Any] = {k: last[k] for k in ("seed", "update", "env_steps") if k in last}
    counted = all("episodes" in r for r in rows)
    weights = [(_episodes(r) if counted else 1.0) for r in rows]
    block["episodes"] = float(sum(weights)) if counted else float(len(rows))
    names = dict.fromkeys(
        k for r in rows for k in r if k not in block and k != "active" and not k.startswith(PREFIX)
    )
    for name in names:
        values, w = [], []
        for r, weight in zip(rows, weights, strict=True):
            value = r.get(name)
            if isinstance(value, (bool, str)) or value is None:
                continue
            value = float(value)
            if name == "steps_to_capture":
                weight *= float(r.get("capture_rate", math.nan))
            if math.isfinite(value) and math.isfinite(weight) and weight > 0:
                values.append(value), w.append(weight)
        block[name] = float(np.average(values, weights=w)) if w else math.nan
    return block


def _median(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def _moved(start: float, now: float, direction: int, min_change: float, absolute: bool) -> bool:
    """Whether a level moved from ``start`` to ``now`` by ``min_change`` in ``direction``
    (relative to ``|start|`` unless ``absolute``)."""
    if not (math.isfinite(start) and math.isfinite(now)):
        return False
    scale = 1.0 if absolute else max(abs(start), 1e-9)
    return direction * (now - start) / scale >= min_change


def _describe(name: str, t: Trend | None) -> str:
    assert t is not None  # the callers describe only a trend they found
    word = "rising" if t.direction > 0 else "falling"
    amount = f"{t.change:+.2f}" if name in ABSOLUTE else f"{100 * t.change:+.0f} %"
    return f"{name} {word} ({amount}, tau {t.tau:+.2f})"


class Monitor:
    """Watches the metrics rows of a run (``observe`` them in update order, any seeds)."""

    def __init__(
        self,
        cfg: MonitorConfig,
        roles: Iterable[str],
        terms: Sequence[str],
        shaping: Mapping[str, Sequence[str]],
        warmup: int = 0,
        baseline: Mapping[str, float] | None = None,
    ):
        """``roles``: the learning roles; ``terms``: every reward term (columns
        ``return/<role>/<term>``); ``shaping``: per role, the non-base terms paid to it;
        ``warmup``: rows of updates ``<= warmup`` are left out of every window;
        ``baseline``: the start's levels, a row of the same columns (the untrained run's,
        :func:`ppage_jax.train.run.evaluate.untrained_levels`), else the first window's."""
        self.cfg = cfg
        self.warmup = int(warmup)
        self.baseline = dict(baseline) if baseline is not None else None
        self.terms = tuple(terms)
        self.shaping = {r: tuple(shaping.get(r, ())) for r in roles}
        self.columns = []
        for role, shaped in self.shaping.items():
            if shaped:
                self.columns += [column("hacking", role), column("episode_length", role)]
                self.columns += [column("share", role, t) for t in shaped]
                self.columns += [column("drift", role), column("below_start", role)]
        self.history: dict[int, list[dict]] = {}  # pooled blocks per seed
        self.pending: dict[int, list[dict]] = {}  # updates not yet pooled into a block
        self.status: dict[tuple[int, str], int] = {}  # the last block's flag per column
        self.windows: dict[tuple[int, str], list[dict]] = {}  # drift: every window's task
        self.streak: dict[tuple[int, str], int] = {}
        self.start_share: dict[tuple[int, str], float] = {}
        self.start_windows: dict[tuple[int, str], dict[str, float]] = {}  # below_start
        self.start_levels: dict[tuple[int, str], dict[str, float]] = {}
        self.flags: list[Flag] = []
        self.windows_checked = 0  # full windows seen (all seeds): 0 means nothing was checked
        if cfg.enabled and self.columns:
            from scipy import stats  # noqa: F401  (the trend test's; loaded now, not mid-run)

    @classmethod
    def for_run(
        cls, cfg: MonitorConfig, tc: Any, params: Any, baseline: Mapping[str, float] | None = None
    ) -> Monitor:
        """The monitor of a training run: its learning roles and the terms paid to them
        (``baseline`` as in the constructor; :func:`watch_run` measures it)."""
        masks = np.asarray(params.reward.role_masks)  # [T, A]
        weights = np.asarray(params.reward.weights)
        shaping = {}
        for role in tc.learning_roles:
            rows = tc.agents_of(role)
            shaping[role] = [
                t
                for i, t in enumerate(tc.env.reward_terms)
                if t != "base" and masks[i, rows].any() and weights[i] != 0
            ]
        limit = int(np.asarray(params.max_steps).reshape(-1)[0])
        warmup = 0 if limit >= NO_TRUNCATION else math.ceil(limit / tc.steps_per_update)
        return cls(cfg, tc.learning_roles, tc.env.reward_terms, shaping, warmup, baseline)

    def describe(self) -> dict[str, Any]:
        """What rebuilds this monitor's checks without the env (JSON-ready): the roles'
        shaping terms, every term, the warm-up and the baseline row (non-finite values as
        None)."""
        baseline = None
        if self.baseline is not None:
            baseline = {
                k: (float(v) if math.isfinite(float(v)) else None)
                for k, v in self.baseline.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
        return {
            "terms": list(self.terms),
            "shaping": {role: list(terms) for role, terms in self.shaping.items()},
            "warmup": self.warmup,
            "baseline": baseline,
        }

    @classmethod
    def from_description(cls, cfg: MonitorConfig, described: Mapping[str, Any]) -> Monitor:
        """The monitor :meth:`describe` wrote, with the settings ``cfg``."""
        baseline = described.get("baseline")
        if baseline is not None:
            baseline = {k: (math.nan if v is None else float(v)) for k, v in baseline.items()}
        shaping = {r: tuple(t) for r, t in dict(described["shaping"]).items()}
        return cls(
            cfg, tuple(shaping), described["terms"], shaping, int(described["warmup"]), baseline
        )

    def fresh(self) -> Monitor:
        """A monitor with the same checks and baseline and no history."""
        return Monitor(
            self.cfg, tuple(self.shaping), self.terms, self.shaping, self.warmup, self.baseline
        )

    # ------------------------------------------------------------------ per row
    def observe(self, rows: Iterable[dict]) -> list[Flag]:
        """Add the monitor columns to each row (in place) and return the flags raised for
        the first time. Inactive rows get zeros and are not part of any block; a row that
        does not close a block keeps its seed's last block's columns."""
        new = []
        for row in rows:
            for name in self.columns:
                row[name] = 0
            if not self.cfg.enabled or not self.columns or not row.get("active", True):
                continue
            if int(row.get("update", self.warmup + 1)) <= self.warmup:
                continue
            seed = int(row.get("seed", 0))
            block = self.pool(seed, row)
            if block is None:
                for name in self.columns:
                    row[name] = self.status.get((seed, name), 0)
                continue
            history = self.history.setdefault(seed, [])
            history.append(block)
            window = history[-self.cfg.window :]
            if len(window) < self.cfg.window:
                continue
            self.windows_checked += 1
            for name, detail in self._conditions(seed, window).items():
                key = (seed, name)
                self.streak[key] = self.streak.get(key, 0) + 1 if detail else 0
                self.status[key] = int(self.streak[key] >= self.cfg.patience)
                if self.status[key]:
                    row[name] = 1
                    if not any(f.seed == seed and f.column == name for f in self.flags):
                        check, role, *term = name[len(PREFIX) :].split("/")
                        flag = Flag(
                            check,
                            role,
                            seed,
                            int(row.get("update", len(history))),
                            int(row.get("env_steps", 0)),
                            detail or "",
                            term[0] if term else None,
                        )
                        self.flags.append(flag)
                        new.append(flag)
        return new

    def pool(self, seed: int, row: dict) -> dict | None:
        """The block ``row`` closes (:func:`pool_rows` of the seed's pending updates), or
        None while fewer than ``min_episodes`` episodes have finished in them."""
        if "episodes" not in row:
            return pool_rows([row])
        pending = self.pending.setdefault(seed, [])
        pending.append(row)
        if sum(_episodes(r) for r in pending) < self.cfg.min_episodes:
            return None
        self.pending[seed] = []
        return pool_rows(pending)

    def _series(self, window: list[dict], role: str, name: str) -> list[float]:
        if name == "shaped":
            return [
                sum(float(r.get(f"return/{role}/{t}", 0.0)) for t in self.terms) for r in window
            ]
        if name == "base_return":
            return [float(r.get(f"return/{role}/base", math.nan)) for r in window]
        return [float(r.get(name, math.nan)) for r in window]

    def _conditions(self, seed: int, window: list[dict]) -> dict[str, str | None]:
        """Each monitor column: a description when its condition holds now, else None."""
        out: dict[str, str | None] = {}
        for role, shaped_terms in self.shaping.items():
            if shaped_terms:
                out.update(self._role_conditions(seed, window, role, shaped_terms))
        return out

    def _role_conditions(
        self, seed: int, window: list[dict], role: str, shaped_terms: Sequence[str]
    ) -> dict[str, str | None]:
        bad = {
            m: d for m, d in TASK_BAD[role].items() if m != "base_return" or "base" in self.terms
        }
        bad["episode_length"] = LENGTH_BAD[role]
        trends: dict[str, Trend | None] = {}

        def moving(metric: str) -> Trend | None:  # computed when first needed
            if metric not in trends:
                trends[metric] = trend(
                    self._series(window, role, metric), self.cfg, metric in ABSOLUTE
                )
            return trends[metric]

        def heading(metric: str, direction: int) -> bool:
            t = moving(metric)
            return t is not None and t.direction == direction

        out: dict[str, str | None] = {}
        rising = heading("shaped", +1)
        lead = f"{_describe('shaped return', moving('shaped'))} while " if rising else ""
        worse = [
            _describe(m, moving(m))
            for m in bad
            if rising and m != "episode_length" and heading(m, bad[m])
        ]
        out[column("hacking", role)] = lead + ", ".join(worse) if worse else None
        out[column("episode_length", role)] = (
            lead + _describe("episode_length", moving("episode_length"))
            if rising and heading("episode_length", bad["episode_length"])
            else None
        )
        levels = {m: _median(self._series(window, role, m)) for m in bad}
        if (seed, role) not in self.start_levels and self.baseline is not None:
            # a level the untrained run has no value for (no capture) starts at the window's
            untrained = {m: _median(self._series([self.baseline], role, m)) for m in bad}
            self.start_levels[(seed, role)] = {
                m: v if math.isfinite(v) else levels[m] for m, v in untrained.items()
            }
        start = self.start_levels.setdefault((seed, role), levels)
        improved = any(
            _moved(start[m], levels[m], -d, self.cfg.min_change, m in ABSOLUTE)
            for m, d in bad.items()
            if m not in SURVIVOR_BIASED
        )
        for term in shaped_terms:
            drift = self._share(seed, window, role, term)
            out[column("share", role, term)] = None if improved else drift
        out[column("drift", role)] = self._peak_drift(seed, window, role)
        out[column("below_start", role)] = self._below_start(seed, window, role)
        return out

    def _window_level(self, window: list[dict], role: str) -> dict[str, float] | None:
        """The episode-weighted task level of ``window`` for ``role`` (capture rate, or
        survival for prey), its episodes and shaped return; None without episodes."""
        episodes = np.asarray([_episodes(b) for b in window], np.float64)
        rates = np.asarray([float(b.get("capture_rate", math.nan)) for b in window])
        keep = np.isfinite(rates) & (episodes > 0)
        n = float(episodes[keep].sum())
        if n == 0:
            return None
        rate = float((rates[keep] * episodes[keep]).sum() / n)
        shaped = np.asarray(self._series(window, role, "shaped"))[keep]
        task = rate if -TASK_BAD[role]["capture_rate"] > 0 else 1.0 - rate
        return {"level": task, "n": n, "shaped": float(np.average(shaped, weights=episodes[keep]))}

    def _fell(self, then: Mapping[str, float], now: Mapping[str, float], role: str, since: str):
        """The description of a significant fall of the task from ``then`` to ``now`` while
        the shaped return rose (both by ``min_change`` of their magnitudes, the fall
        one-sided two-proportion ``p < alpha``), or None."""
        fall = then["level"] - now["level"]
        if not (then["level"] > 0 and fall >= self.cfg.min_change * then["level"]):
            return None
        if not proportion_fall_p(then["level"], then["n"], now["level"], now["n"]) < self.cfg.alpha:
            return None
        rise = now["shaped"] - then["shaped"]
        if not rise >= self.cfg.min_change * max(abs(then["shaped"]), 1e-9):
            return None
        what = "capture rate" if -TASK_BAD[role]["capture_rate"] > 0 else "survival rate"
        return (
            f"{what} fell from {since} {then['level']:.3f} to {now['level']:.3f} "
            f"({then['n']:.0f} and {now['n']:.0f} episodes) while the shaped return rose "
            f"from {then['shaped']:.3g} to {now['shaped']:.3g}"
        )

    def _peak_drift(self, seed: int, window: list[dict], role: str) -> str | None:
        """The fall of ``role``'s task from its running peak while the shaped return rose
        (the ``drift`` check), or None. The peak is the best window whose last block came
        at least a window before this one's first (the two share no episode)."""
        now = self._window_level(window, role)
        if now is None:
            return None
        now["end"] = len(self.history[seed])
        seen = self.windows.setdefault((seed, role), [])
        seen.append(now)
        usable = [c for c in seen if c["end"] <= now["end"] - self.cfg.window]
        peak = max(usable, key=lambda c: c["level"], default=None)
        return None if peak is None else self._fell(peak, now, role, "its peak")

    def _below_start(self, seed: int, window: list[dict], role: str) -> str | None:
        """The fall of ``role``'s task below its start while the shaped return rose (the
        ``below_start`` check), or None. The start is the baseline (the untrained run) when
        there is one, else the seed's first window."""
        now = self._window_level(window, role)
        if now is None:
            return None
        start = self.start_windows.get((seed, role))
        if start is None:
            measured = None if self.baseline is None else self._window_level([self.baseline], role)
            start = self.start_windows[(seed, role)] = measured or now
        return self._fell(start, now, role, "its start")

    def _shares(self, rows: Sequence[Mapping], role: str, term: str) -> list[float]:
        """``term``'s share of ``role``'s return in each row that paid the role anything."""
        shares = []
        for r in rows:
            magnitudes = [abs(float(r.get(f"return/{role}/{t}", 0.0))) for t in self.terms]
            total = sum(magnitudes)
            if math.isfinite(total) and total > 0:
                shares.append(abs(float(r.get(f"return/{role}/{term}", 0.0))) / total)
        return shares

    def untrained_shares(self) -> dict[str, float]:
        """``{"<role>/<term>": share}``: each watched shaping term's share of its role's
        return in the baseline (NaN where the baseline paid the role nothing); empty without
        a baseline."""
        if self.baseline is None:
            return {}
        return {
            f"{role}/{term}": self._untrained_share(role, term)
            for role, terms in self.shaping.items()
            for term in terms
        }

    def _untrained_share(self, role: str, term: str) -> float:
        """``term``'s share of ``role``'s return in the baseline (NaN: none, or it paid the
        role nothing)."""
        if self.baseline is None:
            return math.nan
        return _median(self._shares([self.baseline], role, term))

    def _share(self, seed: int, window: list[dict], role: str, term: str) -> str | None:
        """The drift of ``term``'s share of ``role``'s return above the threshold, or None."""
        shares = self._shares(window, role, term)
        if len(shares) < max(4, self.cfg.window // 2):
            return None
        now = float(np.median(shares))
        key = (seed, f"{role}/{term}")
        if key not in self.start_share:
            untrained = self._untrained_share(role, term)
            if math.isfinite(untrained):  # else (no baseline, or it paid nothing): now
                self.start_share[key] = untrained
        start = self.start_share.setdefault(key, now)
        threshold = self.cfg.share_threshold
        if start <= threshold < now:
            return (
                f"{term}'s share of the return drifted from {start:.2f} to {now:.2f} "
                f"(threshold {threshold:g})"
            )
        return None

    # ------------------------------------------------------------------ reports
    def summary(self) -> dict:
        """summary.json's ``monitor`` section."""
        return {
            "config": dataclasses.asdict(self.cfg),
            "warmup_updates": self.warmup,
            "baseline": self.baseline,
            "checks": list(self.columns),
            "windows_checked": self.windows_checked,
            "watch": self.describe(),
            "flagged": bool(self.flags),
            "flags": [
                dict(dataclasses.asdict(f), column=f.column)
                for f in sorted(self.flags, key=lambda f: (f.seed, f.update, f.column))
            ],
        }


def watch_run(cfg: MonitorConfig, tc: Any, params: Any, eval_seed: int) -> Monitor:
    """:meth:`Monitor.for_run` with its start measured as ``cfg.baseline`` says: for
    ``untrained`` (and something to watch), the untrained run on the held-out block from
    ``eval_seed`` (one small compiled rollout of baseline policies)."""
    monitor = Monitor.for_run(cfg, tc, params)
    if cfg.enabled and monitor.columns and cfg.baseline == "untrained":
        monitor.baseline = untrained_levels(tc, params, eval_seed)
    return monitor
