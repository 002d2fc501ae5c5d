"""Training's algorithm registry and Config -> TrainConfig. The ``experiment`` section's
schema and validator live in :mod:`ppage_jax.train.schema`.

"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from types import ModuleType
from typing import Any

from ppage_jax.config import Config
from ppage_jax.defaults import SECTIONS
from ppage_jax.train.common import (
    ROLE_KEYS, TrainConfig, num_updates_for)

# algorithm name -> module in ppage_jax.train. Each module exposes Hyperparams, CHECKS,
# check(hp, data, fail), init, update, train, policy_state and greedy_actions.
ALGORITHMS: dict[str, str] = {
    "random": "ppage_jax.train.baseline",
    "ippo": "ppage_jax.train.ippo",
    "dqn": "ppage_jax.train.dqn",
    "iql": "ppage_jax.train.iql",
    "cql": "ppage_jax.train.cql",
    "mixed": "ppage_jax.train.mixed",
}

def algorithm(name: str) -> ModuleType:
    """The module implementing algorithm ``name``."""
    if name not in ALGORITHMS:
        raise KeyError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return importlib.import_module(ALGORITHMS[name])


def hyperparams(name: str, params: dict) -> Any:
    """The algorithm's frozen Hyperparams from validated params (lists become tuples)."""
    cls = algorithm(name).Hyperparams
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: tuple(v) if isinstance(v, list) else v
                  for k, v in params.items() if k in names})


def make_train_config(config: Config, env=None) -> TrainConfig:
    """The static TrainConfig of a validated Config (``env`` defaults to ``make(config)``)."""
    from ppage_jax.env import make

    exp = config["experiment"]
    name = exp["algorithm"]["name"]
    hp = hyperparams(name, exp["algorithm"]["params"])
    env = make(config) if env is None else env
    return TrainConfig(
        env=env, algorithm=name, hp=hp, num_envs=exp["num_envs"],
        num_updates=num_updates_for(exp["total_timesteps"], exp["episodes"], exp["num_envs"],
                                    hp.num_steps, config["env"]["termination"]["max_steps"]),
        episodes=exp["episodes"],
        roles=tuple(exp["roles"][k] for k in ROLE_KEYS),
        config_hash=config.hash(),
        policy_hash=policy_hash(config),
    )


def policy_hash(config: Config) -> str:
    """Hash of what a trained policy depends on: every section but ``experiment``, plus the
    algorithm and its hyperparameters (not seeds, budgets, roles or the eval block)."""
    exp = config["experiment"]
    blob = json.dumps({"config": {s: config[s] for s in SECTIONS if s != "experiment"},
                       "algorithm": exp["algorithm"]},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
