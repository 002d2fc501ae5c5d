"""A run's trained policy as ``policy(key, obs, state) -> int32[A]``: from the policy state
of a finished training, or from the checkpoint in a run directory.

``ppage-jax run`` hands :func:`trained_policy` to the episode GIF and inspector page it writes;
``ppage-jax render --run`` uses :func:`load_run_policy`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax

from ppage_jax.config import Config
from ppage_jax.env import GridWorld
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.run.checkpoint import load_checkpoint
from ppage_jax.train.run.evaluate import matchup_policy
from ppage_jax.train.run.experiment import make_train_config
from ppage_jax.train.run.report import CHECKPOINT_FILE


def trained_policy(
    tc: TrainConfig,
    policies: Any,
    params: EnvParams | None = None,
    seed_index: int = 0,
    mode: str = "greedy",
) -> Policy:
    """One training seed's policy as ``policy(key, obs[A, F], state) -> int32[A]``: greedy
    (argmax), or with ``mode="sampled"`` as it acts in training (actions sampled from a
    stochastic learner's distribution; a deterministic learner stays greedy).

    ``tc`` is the run's TrainConfig and ``policies`` its ``policy_state`` stacked over seeds
    (as in a checkpoint); roles that did not learn play their configured baseline.
    """
    if mode not in ("greedy", "sampled"):
        raise ValueError(f"policy mode must be greedy or sampled, got {mode!r}")
    side = "greedy" if mode == "greedy" else "trained"
    params = tc.env.default_params if params is None else params
    one_seed = jax.tree.map(lambda x: x[seed_index], policies)
    return matchup_policy(tc, one_seed, params, side, side)


def load_run_policy(
    config: Config,
    run_dir: str | os.PathLike,
    seed_index: int = 0,
    env: GridWorld | None = None,
    mode: str = "greedy",
) -> Policy:
    """The policy saved in ``run_dir``'s checkpoint, loaded into ``config``: greedy, or
    sampled (``mode``, see :func:`trained_policy`).

    The checkpoint must fit ``config``'s shapes (grid, agents, observation, network); a
    different config hash with equal shapes loads with a warning (see
    :func:`ppage_jax.train.run.checkpoint.load_checkpoint`). ``env`` defaults to
    ``make(config)``.
    """
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
    return trained_policy(tc, policies, seed_index=seed_index, mode=mode)
