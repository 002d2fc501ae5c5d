"""Episode inspector: one self-contained HTML page that replays an episode in the browser.

:func:`write_episode_html` records an episode (:func:`ppage_jax.episodes.play_episodes`) and
writes the page; :func:`write_record_html` writes a page from arrays already recorded
(:class:`EpisodeRecord`). The page holds its data, script and style inline and fetches
nothing: play/pause, a step slider, the grid (obstacles, predators, prey, captured prey,
agent labels), captures marked on a timeline, and for every agent its weighted per-term
reward of the current turn and its cumulative per-term return over the episode.

Step ``t`` of the page is the state after ``t`` turns (0 = reset); the reward shown at step
``t`` is ``info["reward_terms"]`` of turn ``t``. The episode uses the keys of
:func:`ppage_jax.viz.frames.render_episode`, so the page and the GIF of the same key show the
same episode.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ppage_jax.artifacts import write_text
from ppage_jax.env import GridWorld
from ppage_jax.episodes.play import record_one
from ppage_jax.policies import Policy, random_policy
from ppage_jax.state import EnvParams, State
from ppage_jax.viz.frames import COLOURS
from ppage_jax.viz.inspector_page import inspector_page

HTML_FILE = "episode.html"


@dataclasses.dataclass(frozen=True)
class EpisodeRecord:
    """One episode of ``T`` turns as host arrays (``A`` agents, ``K`` reward terms).

    ``positions[t]``/``captured[t]`` are the state after ``t`` turns (``t = 0`` is the reset
    state) and ``reward_terms[t - 1]`` the weighted terms of turn ``t``. ``end`` says how the
    episode ended: ``"terminated"``, ``"truncated"`` or ``"cut"`` (the recording's step cap).
    """

    size: int
    agent_names: tuple[str, ...]
    is_predator: np.ndarray  # bool[A]
    term_names: tuple[str, ...]
    obstacle_map: np.ndarray  # bool[size, size], indexed [y, x]
    positions: np.ndarray  # int32[T+1, A, 2] as (x, y)
    captured: np.ndarray  # bool[T+1, A]
    reward_terms: np.ndarray  # float32[T, A, K]
    weights: np.ndarray | None = None  # float32[K], shown beside each term
    end: str = "cut"

    def __post_init__(self):
        n_agents, n_terms = len(self.agent_names), len(self.term_names)
        turns = np.shape(self.reward_terms)[0] if np.ndim(self.reward_terms) == 3 else -1
        expected = {
            "is_predator": (np.shape(self.is_predator), (n_agents,)),
            "obstacle_map": (np.shape(self.obstacle_map), (self.size, self.size)),
            "positions": (np.shape(self.positions), (turns + 1, n_agents, 2)),
            "captured": (np.shape(self.captured), (turns + 1, n_agents)),
            "reward_terms": (np.shape(self.reward_terms), (turns, n_agents, n_terms)),
        }
        if self.weights is not None:
            expected["weights"] = (np.shape(self.weights), (n_terms,))
        for name, (got, want) in expected.items():
            if got != want:
                raise ValueError(
                    f"EpisodeRecord.{name} has shape {got}; {want} fits "
                    f"{n_agents} agents, {n_terms} terms and T turns "
                    f"(reward_terms float[T, A, K])"
                )
        if self.end not in ("terminated", "truncated", "cut"):
            raise ValueError(
                f"EpisodeRecord.end is {self.end!r}; allowed: 'terminated', 'truncated', 'cut'"
            )

    @property
    def turns(self) -> int:
        return int(np.shape(self.reward_terms)[0])


@functools.lru_cache(maxsize=16)
def _recorder(env: GridWorld, policy: Policy | None, max_steps: int):
    """Jitted (key, params) -> reset state and per-turn positions, captured, reward terms and
    end flags: the episode :func:`ppage_jax.episodes.play_episodes` plays for ``key``."""
    act = random_policy(env) if policy is None else policy

    @jax.jit
    def run(key, params):
        return record_one(
            env,
            act,
            key,
            params,
            max_steps,
            lambda t: (
                t.next_state.positions,
                t.next_state.captured,
                t.info["reward_terms"],
                t.terminated,
                t.truncated,
            ),
        )

    return run


def record_episode(
    env: GridWorld,
    key: jax.Array,
    policy: Policy | None = None,
    params: EnvParams | None = None,
    max_steps: int = 100,
) -> EpisodeRecord:
    """Play one episode of up to ``max_steps`` turns (``policy(key, obs, state) -> int32[A]``,
    default uniformly random) and return it as an :class:`EpisodeRecord`."""
    if max_steps < 1:
        raise ValueError(f"max_steps is {max_steps}; it must be at least 1")
    params = env.default_params if params is None else params
    start, (positions, captured, terms, term, trunc) = _recorder(env, policy, max_steps)(
        key, params
    )
    return episode_record(env, params, start, positions, captured, terms, term, trunc)


def episode_record(
    env: GridWorld,
    params: EnvParams,
    start: State,
    positions: Any,
    captured: Any,
    terms: Any,
    terminated: Any,
    truncated: Any,
) -> EpisodeRecord:
    """The :class:`EpisodeRecord` of an episode recorded turn by turn from ``start`` (its
    reset state): each turn's ``positions`` and ``captured`` after it, its weighted
    ``terms`` and end flags, cut after the turn that ends the episode."""
    term, trunc = np.asarray(terminated), np.asarray(truncated)
    ended = np.flatnonzero(term | trunc)
    turns = int(ended[0]) + 1 if ended.size else len(term)
    end = "cut" if not ended.size else "terminated" if term[turns - 1] else "truncated"
    return EpisodeRecord(
        size=env.layout.size,
        agent_names=tuple(env.agent_names),
        is_predator=np.asarray(env.is_predator, bool),
        term_names=tuple(env.reward_terms),
        obstacle_map=np.asarray(start.obstacle_map, bool),
        positions=np.concatenate(
            [np.asarray(start.positions)[None], np.asarray(positions)[:turns]]
        ).astype(np.int32),
        captured=np.concatenate(
            [np.asarray(start.captured)[None], np.asarray(captured)[:turns]]
        ).astype(bool),
        reward_terms=np.asarray(terms, np.float32)[:turns],
        weights=np.asarray(params.reward.weights, np.float32),
        end=end,
    )


def _floats(values: np.ndarray):
    """Nested lists of the shortest decimal of each float32 (null for NaN and infinities)."""
    values = np.asarray(values, np.float32)
    flat = [float(str(v)) if np.isfinite(v) else None for v in values.reshape(-1)]
    return np.array(flat, dtype=object).reshape(values.shape).tolist()


def episode_html(record: EpisodeRecord, title: str = "Episode", fps: float = 4.0) -> str:
    """The inspector page of ``record`` as one self-contained HTML string."""
    if not (np.isfinite(fps) and fps > 0):
        raise ValueError(f"fps is {fps}; it must be a positive number")
    ys, xs = np.nonzero(record.obstacle_map)
    data = {
        "title": title,
        "size": int(record.size),
        "agents": list(record.agent_names),
        "isPredator": np.asarray(record.is_predator, bool).tolist(),
        "terms": list(record.term_names),
        "weights": None if record.weights is None else _floats(record.weights),
        "obstacles": np.stack([xs, ys], axis=1).tolist(),
        "positions": np.asarray(record.positions, int).tolist(),
        "captured": np.asarray(record.captured, bool).astype(int).tolist(),
        "rewards": _floats(record.reward_terms),
        "end": record.end,
        "fps": float(fps),
        "colours": {name: "rgb({},{},{})".format(*rgb) for name, rgb in COLOURS.items()},
    }
    return inspector_page(title, data)


def write_record_html(
    path: str | os.PathLike, record: EpisodeRecord, title: str = "Episode", fps: float = 4.0
) -> Path:
    """Write the inspector page of an already recorded episode to ``path``; returns it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, episode_html(record, title, fps))
    return path


def write_episode_html(
    path: str | os.PathLike,
    env: GridWorld,
    key: jax.Array,
    policy: Policy | None = None,
    params: EnvParams | None = None,
    max_steps: int = 100,
    title: str = "Episode",
    fps: float = 4.0,
) -> EpisodeRecord:
    """Record one episode (see :func:`record_episode`) and write its inspector page to
    ``path``. Returns the record (what the page shows)."""
    record = record_episode(env, key, policy, params, max_steps)
    write_record_html(path, record, title, fps)
    return record
