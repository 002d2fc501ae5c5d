"""Config -> TrainConfig. The ``experiment`` section's schema and validator live in
:mod:`ppage_jax.train.schema`, the algorithms in :mod:`ppage_jax.train.registry`."""

from __future__ import annotations

import hashlib
import json

from ppage_jax.config import Config
from ppage_jax.defaults import SECTIONS
from ppage_jax.train.config import TrainConfig, num_updates_for
from ppage_jax.train.registry import make_hyperparams
from ppage_jax.train.roles import role_settings


def make_train_config(config: Config, env=None) -> TrainConfig:
    """The static TrainConfig of a validated Config (``env`` defaults to ``make(config)``)."""
    from ppage_jax.env import make

    exp = config["experiment"]
    name = exp["algorithm"]["name"]
    hp = make_hyperparams(name, exp["algorithm"]["params"])
    env = make(config) if env is None else env
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
