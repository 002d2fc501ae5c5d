"""The ``experiment`` section of a config: its schema, defaults and strict validator.

Registered with the config loader through :func:`ppage_jax.config.register_section`, so that
``load_config`` validates ``experiment.*`` strictly. Form (PPAGE's ``algorithm: {name,
params}`` plus the vectorised-run keys)::

    experiment:
      algorithm:
        name: ippo            # see ppage_jax.train.ALGORITHMS
        params: {...}         # the algorithm's hyperparameters; missing ones get defaults
      seed: 42                # training seed i of num_seeds uses PRNGKey(seed + i)
      num_seeds: 1
      num_envs: 256           # grids stepped together per seed
      total_timesteps: 2000000  # env steps (turns x grids) per seed ...
      episodes: null          # ... or a budget of finished episodes (exactly one of the two)
      roles: {predators: learn, preys: learn}   # or noop | random | chase (evade for preys)
      eval: {episodes: 1000, seed: 1000000, max_steps: null}
      output_dir: runs
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.config import Field, int_at_least, register_section
from ppage_jax.train.common import LEARN, ROLE_KEYS, ROLES, baseline_policies
from ppage_jax.train.experiment import ALGORITHMS, algorithm, hyperparams

EXPERIMENT_SCHEMA: dict = {
    "algorithm": {"name": Field(str), "params": Field(dict)},
    "seed": Field(int),
    "num_seeds": int_at_least(1),
    "num_envs": int_at_least(1),
    "total_timesteps": int_at_least(1, nullable=True, extra="; null when episodes is set"),
    "episodes": int_at_least(1, nullable=True, extra="; null when total_timesteps is set"),
    "roles": {"predators": Field(str), "preys": Field(str)},
    "eval": {
        "episodes": int_at_least(1),
        "seed": Field(int),
        "max_steps": int_at_least(1, nullable=True,
                                   extra="; null means env.termination.max_steps"),
    },
    "output_dir": Field(str),
}

EXPERIMENT_DEFAULTS: dict = {
    "algorithm": {"name": "random", "params": {}},
    "seed": 42,
    "num_seeds": 1,
    "num_envs": 1024,
    "total_timesteps": 1_000_000,
    "episodes": None,
    "roles": {"predators": "learn", "preys": "learn"},
    "eval": {"episodes": 1000, "seed": 1_000_000, "max_steps": None},
    "output_dir": "runs",
}

# PPAGE keys that live elsewhere here, with where to put them.
MOVED_KEYS = {
    "episodes": "set experiment.episodes (or experiment.total_timesteps)",
    "seed": "set experiment.seed",
    "device": "JAX chooses the device (set JAX_PLATFORMS=cpu to force the CPU)",
    "curves_path": "the learning curves go to metrics.csv in the run directory",
    "save_path": "the checkpoint goes to the run directory under experiment.output_dir",
    "verbose": "ppage-jax run always shows a progress bar",
    "log_interval": "every update is a row of metrics.csv",
    "cql_alpha": "PPAGE reads it nowhere; use alpha",
}
# Accepted by every algorithm, as in PPAGE: checked against the action table, then unused.
ACTION_DIM = Field(int, True, lambda v: v > 0, "> 0 (must equal the action table's size)")


def _defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        value = f.default
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def validate_experiment(data: dict, fail: Callable[..., None]) -> None:
    """Check ``experiment.*`` and fill the algorithm's default hyperparameters in place."""
    exp = data["experiment"]
    name = exp["algorithm"]["name"]
    if name not in ALGORITHMS:
        fail("experiment.algorithm.name", name, f"unknown algorithm; known: {sorted(ALGORITHMS)}")
    module = algorithm(name)
    given = exp["algorithm"]["params"]
    resolved = _defaults(module.Hyperparams)
    for key, value in given.items():
        dotted = f"experiment.algorithm.params.{key}"
        if key == "action_dim":
            try:
                value = ACTION_DIM.validate(value)
            except ValueError as err:
                fail(dotted, value, str(err))
            n_actions = len(ACTION_TABLES[data["actions"]["type"]])
            if value is not None and value != n_actions:
                fail(dotted, value, f"must equal the size of action table "
                                    f"{data['actions']['type']!r}, {n_actions} (or be omitted)")
        elif key not in module.CHECKS:
            hint = f"; {MOVED_KEYS[key]}" if key in MOVED_KEYS else ""
            owners = [a for a in ALGORITHMS if a != name and key in algorithm(a).CHECKS]
            if owners and not hint:
                hint = (f"; it belongs to {owners} (to switch algorithm, replace the whole "
                        f"block: experiment.algorithm={{name: {name}, params: {{}}}})")
            fail(dotted, value, f"unknown hyperparameter of {name!r}; its hyperparameters: "
                                f"{sorted(module.CHECKS)}{hint}")
        else:
            try:
                value = module.CHECKS[key].validate(value)
            except ValueError as err:
                fail(dotted, value, str(err))
        resolved[key] = value
    exp["algorithm"]["params"] = resolved
    hp = hyperparams(name, resolved)
    module.check(hp, data, fail)

    if (exp["total_timesteps"] is None) == (exp["episodes"] is None):
        fail("experiment.episodes", exp["episodes"],
             f"set exactly one of experiment.total_timesteps "
             f"(now {exp['total_timesteps']!r}) and experiment.episodes; write null for the "
             f"other")
    max_steps = data["env"]["termination"]["max_steps"]
    if exp["episodes"] is not None and max_steps is None:
        fail("experiment.episodes", exp["episodes"],
             "needs env.termination.max_steps (an episode budget is bounded by it)")
    if exp["eval"]["max_steps"] is None and max_steps is None:
        fail("experiment.eval.max_steps", None,
             "must be set when env.termination.max_steps is null (evaluation needs a step cap)")

    for key, role in zip(ROLE_KEYS, ROLES):
        value = exp["roles"][key]
        baselines = sorted(baseline_policies(role))
        if value != LEARN and value not in baselines:
            fail(f"experiment.roles.{key}", value,
                 f"must be {LEARN!r} or a baseline policy: {baselines}")

    train_seeds = range(exp["seed"], exp["seed"] + exp["num_seeds"])
    eval_seeds = range(exp["eval"]["seed"], exp["eval"]["seed"] + exp["eval"]["episodes"])
    if train_seeds.start < eval_seeds.stop and eval_seeds.start < train_seeds.stop:
        fail("experiment.eval.seed", exp["eval"]["seed"],
             f"the evaluation seed block [{eval_seeds.start}, {eval_seeds.stop}) must not "
             f"overlap the training seeds [{train_seeds.start}, {train_seeds.stop})")




register_section("experiment", EXPERIMENT_SCHEMA, EXPERIMENT_DEFAULTS, validate_experiment)
