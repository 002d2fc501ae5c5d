"""A run directory's ``episode.gif``: one episode of a policy, played by
:func:`ppage_jax.episodes.play_episodes` and drawn frame by frame.

``ppage-jax run`` calls :func:`write_run_gif` after training with the policy its headline
evaluation row measures (sampled, for a stochastic learner), captioned with that policy and
the row's RMST; any ``policy(key, obs, state) -> int32[A]`` will do.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import numpy as np

from ppage_jax.defaults import DEFAULT_CELL_PX
from ppage_jax.env import GridWorld
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams
from ppage_jax.viz.frames import render_episode, write_gif

GIF_FILE = "episode.gif"


def caption_frames(frames: np.ndarray, caption: str) -> np.ndarray:
    """``frames`` (``uint8[T, H, W, 3]``) with a white band on top holding ``caption`` in
    black, wrapped at word breaks to the frame's width (Pillow's built-in bitmap font)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=11)
    width = frames.shape[2]
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    lines: list[str] = []
    for word in caption.split():
        wider = f"{lines[-1]} {word}" if lines else word
        if lines and measure.textlength(wider, font=font) <= width - 6:
            lines[-1] = wider
        else:
            lines.append(word)
    line_px = 13
    band = Image.new("RGB", (width, line_px * len(lines) + 4), (255, 255, 255))
    draw = ImageDraw.Draw(band)
    for i, line in enumerate(lines):
        draw.text((3, 2 + line_px * i), line, fill=(0, 0, 0), font=font)
    strip = np.broadcast_to(np.asarray(band), (len(frames), *np.asarray(band).shape))
    return np.concatenate([strip, frames], axis=1)


def write_run_gif(
    run_dir: str | os.PathLike,
    env: GridWorld,
    policy: Policy,
    params: EnvParams | None = None,
    seed: int = 0,
    max_steps: int = 100,
    cell_px: int = DEFAULT_CELL_PX,
    fps: float = 4.0,
    caption: str | None = None,
) -> Path:
    """Write ``run_dir/episode.gif``: one episode of ``policy(key, obs, state) -> int32[A]``,
    episode 0 of the block starting at ``seed`` (the layout of ``fold_in(PRNGKey(seed), 0)``,
    as in evaluation), up to ``max_steps`` turns, under a ``caption`` band when one is given
    (:func:`caption_frames`). Returns the path."""
    frames = render_episode(
        env, jax.random.PRNGKey(seed), policy, params, max_steps=max_steps, cell_px=cell_px
    )
    if caption:
        frames = caption_frames(frames, caption)
    path = Path(run_dir) / GIF_FILE
    write_gif(path, frames, fps=fps)
    return path
