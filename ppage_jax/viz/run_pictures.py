"""A run directory's ``episode.gif`` and ``episode.html`` from one recorded episode.

``ppage-jax run`` draws both pictures of the same episode (episode 0 of the evaluation block
starting at ``seed``). :func:`write_run_pictures` plays it once, in one compiled program that
records every turn and draws every frame: the GIF is the one
:func:`ppage_jax.viz.run_gif.write_run_gif` writes, the page the one
:func:`ppage_jax.viz.inspector.write_episode_html` writes for the same key.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp

from ppage_jax.defaults import DEFAULT_CELL_PX
from ppage_jax.env import GridWorld
from ppage_jax.episodes.play import record_one
from ppage_jax.policies import Policy, random_policy
from ppage_jax.state import EnvParams
from ppage_jax.viz.frames import render, write_gif
from ppage_jax.viz.inspector import HTML_FILE, episode_record, write_record_html
from ppage_jax.viz.run_gif import GIF_FILE, caption_frames


@functools.lru_cache(maxsize=16)
def _pictures_program(env: GridWorld, policy: Policy | None, max_steps: int, cell_px: int):
    """Jitted (key, params) -> the reset state, each turn's positions, captured flags,
    weighted terms and end flags, and the frame of every state (the reset state first)."""
    act = random_policy(env) if policy is None else policy

    @jax.jit
    def run(key, params):
        start, (after, terms, terminated, truncated) = record_one(
            env,
            act,
            key,
            params,
            max_steps,
            lambda t: (t.next_state, t.info["reward_terms"], t.terminated, t.truncated),
        )
        states = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), start, after)
        frames = jax.vmap(lambda s: render(env, s, cell_px))(states)
        return start, after.positions, after.captured, terms, terminated, truncated, frames

    return run


def write_run_pictures(
    run_dir: str | os.PathLike,
    env: GridWorld,
    policy: Policy,
    params: EnvParams | None = None,
    seed: int = 0,
    max_steps: int = 100,
    label: str = "trained policy",
) -> tuple[Path, Path]:
    """Write ``run_dir/episode.gif`` (captioned ``label``) and ``run_dir/episode.html``
    (titled ``"<run_dir name>: <label>, layout seed <seed>"``) of one episode of ``policy``:
    episode 0 of the block starting at ``seed``, up to ``max_steps`` turns. Returns both
    paths."""
    if max_steps < 1:
        raise ValueError(f"max_steps is {max_steps}; it must be at least 1")
    params = env.default_params if params is None else params
    run = _pictures_program(env, policy, max_steps, DEFAULT_CELL_PX)
    start, positions, captured, terms, term, trunc, frames = run(jax.random.PRNGKey(seed), params)
    record = episode_record(env, params, start, positions, captured, terms, term, trunc)
    gif = Path(run_dir) / GIF_FILE
    write_gif(gif, caption_frames(jax.device_get(frames)[: record.turns + 1], label))
    html = write_record_html(
        Path(run_dir) / HTML_FILE, record, f"{Path(run_dir).name}: {label}, layout seed {seed}"
    )
    return gif, html
