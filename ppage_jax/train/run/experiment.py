"""Config -> TrainConfig. The ``experiment`` section's schema and validator live in
:mod:`ppage_jax.config.experiment`, the algorithms in :mod:`ppage_jax.train.registry`."""

from __future__ import annotations

import hashlib
import json

from ppage_jax.config import Config, notice
from ppage_jax.defaults import SECTIONS
from ppage_jax.train.config import TrainConfig, num_updates_for
from ppage_jax.train.registry import make_hyperparams
from ppage_jax.train.run.roles import role_settings


def make_train_config(config: Config, env=None) -> TrainConfig:
    """The static TrainConfig of a validated Config (``env`` defaults to ``make(config)``)."""
    from ppage_jax.env import make

    exp = config["experiment"]
    name = exp["algorithm"]["name"]
    hp = make_hyperparams(name, exp["algorithm"]["params"])
    env = make(config) if env is None else env
    _notice_budget(exp, hp.num_steps)
    return TrainConfig(
        env=env,
        algorithm=name,
        hp=hp,
        num_envs=exp["num_envs"],
        num_updates=num_updates_for(
            exp["total_timesteps"],
            exp["episodes"],
            exp["num_envs"],
            hp.num_steps,
            config["env"]["termination"]["max_steps"],
        ),
        episodes=exp["episodes"],
        roles=role_settings(config, env),
        config_hash=config.hash(),
        policy_hash=policy_hash(config),
    )


def policy_hash(config: Config) -> str:
    """Hash of what a trained policy depends on: every section but ``experiment``, plus the
    algorithm and its hyperparameters (not seeds, budgets, roles or the eval block)."""
    exp = config["experiment"]
    blob = json.dumps(
        {
            "config": {s: config[s] for s in SECTIONS if s != "experiment"},
            "algorithm": exp["algorithm"],
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _notice_budget(exp: dict, num_steps: int) -> None:
    """Announce (:func:`ppage_jax.config.notice`) a budget that plans more env steps than
    ``experiment.total_timesteps``: one update (``num_envs x num_steps`` env steps per seed)
    is the least a run trains."""
    total, num_envs = exp["total_timesteps"], exp["num_envs"]
    per_update = num_envs * num_steps
    if total is None or per_update <= total:
        return
    notice(
        f"experiment.num_envs = {num_envs}: one update is {num_envs} grids x {num_steps} turns "
        f"= {per_update:,} env steps per seed, more than experiment.total_timesteps = "
        f"{total:,}; the run plans 1 update ({per_update:,} env steps per seed, "
        f"{per_update / total:.3g}x the budget); for the budget, set experiment.num_envs "
        f"<= {max(1, total // num_steps)} or raise experiment.total_timesteps"
    )
