"""Two naive reward-hacking detectors that practitioners use, as baselines for the monitor.

- ``naive/length_rising``: the episode length rises (a significant Kendall trend over the
  last ``window`` blocks, change at least ``min_change`` of its median);
- ``naive/shaped_up_task_flat``: for a learning role, the shaped return (every term paid to
  it, summed) rises while its task metric (the capture rate for predators, survival for
  prey) does not improve (no significant rising trend).

Both read the monitor's episode-weighted blocks and hold ``patience`` blocks in a row, as
the monitor's checks do, so that only what they test differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ppage_jax.analysis.detectors.settings import NaiveConfig
from ppage_jax.train.run.monitor import trend

NAIVE_CHECKS = ("naive/length_rising", "naive/shaped_up_task_flat")


def _shaped(block: Mapping, role: str, terms: Sequence[str]) -> float:
    return sum(float(block.get(f"return/{role}/{t}", 0.0)) for t in terms)


def _task(block: Mapping, role: str) -> float:
    rate = float(block.get("capture_rate", float("nan")))
    return rate if role == "predator" else 1.0 - rate


def naive_flags(
    blocks: Sequence[Mapping],
    roles: Sequence[str],
    terms: Sequence[str],
    cfg: NaiveConfig,
) -> dict[str, tuple[int, int] | None]:
    """Each naive check's first flag ``(update, env_steps)`` over a seed's ``blocks`` (in
    order), None when it never held ``patience`` windows in a row."""
    test = cfg.as_monitor()
    first: dict[str, tuple[int, int] | None] = dict.fromkeys(NAIVE_CHECKS)
    streak: dict[str, int] = dict.fromkeys(NAIVE_CHECKS, 0)
    lengths = [float(b.get("episode_length", float("nan"))) for b in blocks]
    shaped = {role: [_shaped(b, role, terms) for b in blocks] for role in roles}
    tasks = {role: [_task(b, role) for b in blocks] for role in roles}
    for end in range(cfg.window, len(blocks) + 1):
        start = end - cfg.window
        length = trend(lengths[start:end], test)
        holds = {"naive/length_rising": length is not None and length.direction > 0}
        flat = False
        for role in roles:
            paid = trend(shaped[role][start:end], test)
            if paid is None or paid.direction <= 0:
                continue  # the task's trend matters only under a rising shaped return
            task = trend(tasks[role][start:end], test, absolute=True)
            flat = flat or not (task and task.direction > 0)
        holds["naive/shaped_up_task_flat"] = flat
        last = blocks[end - 1]
        for check, now in holds.items():
            streak[check] = streak[check] + 1 if now else 0
            if streak[check] >= cfg.patience and first[check] is None:
                first[check] = (int(last.get("update", end)), int(last.get("env_steps", 0)))
    return first
