"""A run directory's ``episode.gif``: one episode of a policy, played by
:func:`ppage_jax.episodes.play_episodes` and drawn frame by frame.

``ppage-jax run`` calls :func:`write_run_gif` after training with the greedy policy it
trained; any ``policy(key, obs, state) -> int32[A]`` will do.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from ppage_jax.env import GridWorld
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams
from ppage_jax.viz.frames import DEFAULT_CELL_PX, render_episode, write_gif

GIF_FILE = "episode.gif"


def write_run_gif(
    run_dir: str | os.PathLike,
    env: GridWorld,
    policy: Policy,
    params: EnvParams | None = None,
    seed: int = 0,
    max_steps: int = 100,
    cell_px: int = DEFAULT_CELL_PX,
    fps: float = 4.0,
) -> Path:
    """Write ``run_dir/episode.gif``: one episode of ``policy(key, obs, state) -> int32[A]``,
    episode 0 of the block starting at ``seed`` (the layout of ``fold_in(PRNGKey(seed), 0)``,
    as in evaluation), up to ``max_steps`` turns. Returns the path."""
    frames = render_episode(
        env, jax.random.PRNGKey(seed), policy, params, max_steps=max_steps, cell_px=cell_px
    )
    path = Path(run_dir) / GIF_FILE
    write_gif(path, frames, fps=fps)
    return path
