"""GIFs of trained policies: turn a run's checkpoint into a ``policy(key, obs, state)`` and
write ``episode.gif`` into a run directory.

``ppage-jax run`` calls :func:`write_run_gif` after training; ``ppage-jax render --run`` calls
:func:`load_run_policy`.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from ppage_jax.config import Config
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams
from ppage_jax.viz.frames import DEFAULT_CELL_PX, render_episode, write_gif

GIF_FILE = "episode.gif"


def trained_policy(tc, policies, params: EnvParams | None = None, seed_index: int = 0) -> Policy:
    """The greedy policy of one training seed as ``policy(key, obs[A, F], state) -> int32[A]``.

    ``tc`` is the run's TrainConfig and ``policies`` its ``policy_state`` stacked over seeds
    (as in a checkpoint); roles that did not learn play their configured baseline.
    """
    from ppage_jax.train.run.evaluate import matchup_policy

    params = tc.env.default_params if params is None else params
    one_seed = jax.tree.map(lambda x: x[seed_index], policies)
    return matchup_policy(tc, one_seed, params, "greedy", "greedy")


def load_run_policy(
    config: Config, run_dir: str | os.PathLike, seed_index: int = 0, env=None
) -> Policy:
    """The greedy policy saved in ``run_dir``'s checkpoint, loaded into ``config``.

    The checkpoint must fit ``config``'s shapes (grid, agents, observation, network); a
    different config hash with equal shapes loads with a warning (see
    :func:`ppage_jax.train.run.checkpoint.load_checkpoint`). ``env`` defaults to
    ``make(config)``.
    """
    from ppage_jax.train import make_train_config
    from ppage_jax.train.run.checkpoint import load_checkpoint
    from ppage_jax.train.run.report import CHECKPOINT_FILE

    path = Path(run_dir) / CHECKPOINT_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no checkpoint; is {run_dir} a run directory written by `ppage-jax run`?"
        )
    tc = make_train_config(config, env)
    policies = load_checkpoint(path, tc)
    num_seeds = jax.tree.leaves(policies)[0].shape[0] if jax.tree.leaves(policies) else 1
    if not 0 <= seed_index < num_seeds:
        raise ValueError(f"seed index {seed_index} is outside the run's {num_seeds} seeds")
    return trained_policy(tc, policies, seed_index=seed_index)


def write_run_gif(
    run_dir: str | os.PathLike,
    tc,
    policies,
    params: EnvParams | None = None,
    seed: int = 0,
    max_steps: int = 100,
    seed_index: int = 0,
    cell_px: int = DEFAULT_CELL_PX,
    fps: float = 4.0,
) -> Path:
    """Write ``run_dir/episode.gif``: one greedy episode of the trained policy (seed
    ``seed_index`` of the run), episode 0 of the block starting at ``seed`` (the layout of
    ``fold_in(PRNGKey(seed), 0)``, as in evaluation). Returns the path."""
    policy = trained_policy(tc, policies, params, seed_index)
    frames = render_episode(
        tc.env, jax.random.PRNGKey(seed), policy, params, max_steps=max_steps, cell_px=cell_px
    )
    path = Path(run_dir) / GIF_FILE
    write_gif(path, frames, fps=fps)
    return path
