"""The ``experiment`` section of a config: its schema, defaults and strict validator.

The config package registers it beside the core sections, so that ``load_config`` validates
``experiment.*`` strictly without importing a learner. Form (PPAGE's ``algorithm: {name,
params}`` plus the vectorised-run keys)::

    experiment:
      algorithm:
        name: ippo            # see ppage_jax.config.experiment.algorithms.ALGORITHM_PARAMS
        params: {...}         # the algorithm's hyperparameters (ppage_jax.config.experiment);
                              # missing ones get defaults
      seed: 42                # training seed i of num_seeds uses PRNGKey(seed + i)
      num_seeds: 1
      num_envs: 256           # grids stepped together per seed
      total_timesteps: 2000000  # env steps (turns x grids) per seed ...
      episodes: null          # ... or a budget of finished episodes (exactly one of the two)
      roles: {predators: learn, preys: learn}   # or noop | random | chase | intercept
                              # (evade for preys), or {policy: RUN_DIR, seed: 0,
                              # greedy: false}: that run's policy
      eval: {episodes: 1000, seed: 1000000, max_steps: null}
      output_dir: runs
      checkpoint_every: null  # updates between training checkpoints (null: 5 per run)
      curriculum: {}          # schedules over env steps (ppage_jax.config.experiment.curriculum)
      monitor: {enabled: true, window: 20, ...}   # reward-hacking monitor of a run
      start_from: null        # or {policy: RUN_DIR, seed: 0}: fine-tune that run's policy
      stagger_starts: false   # true: each grid's first episode starts at a random turn
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.config.env_spec import EnvSpec, env_spec
from ppage_jax.config.experiment.algorithms import ALGORITHM_PARAMS
from ppage_jax.config.experiment.base import checks, defaults, from_params
from ppage_jax.config.experiment.curriculum import validate_curriculum
from ppage_jax.config.experiment.roles import (
    BASELINES,
    FROZEN_DEFAULTS,
    LEARN,
    ROLE_KEYS,
    RUN_CHECKPOINT,
    RUN_CONFIG,
)
from ppage_jax.config.fields import NON_NEGATIVE, Field, int_at_least, notice
from ppage_jax.config.shipped import resolve_run_path
from ppage_jax.defaults import ROLES

# Where the reward-hacking monitor starts from (experiment.monitor.baseline).
MONITOR_BASELINES = ("untrained", "first_window")

# A role's setting: "learn", a baseline name, or {policy: RUN_DIR, seed: 0, greedy: false}.
ROLE_SETTING = Field(
    (str, dict),
    False,
    None,
    "(learn, a baseline policy, or {policy: RUN_DIR} to play the policy that run trained)",
)

EXPERIMENT_SCHEMA: dict = {
    "algorithm": {"name": Field(str), "params": Field(dict)},
    "seed": Field(int),
    "num_seeds": int_at_least(1),
    "num_envs": int_at_least(1),
    "total_timesteps": int_at_least(1, nullable=True, extra="; null when episodes is set"),
    "episodes": int_at_least(1, nullable=True, extra="; null when total_timesteps is set"),
    "roles": {"predators": ROLE_SETTING, "preys": ROLE_SETTING},
    "eval": {
        "episodes": int_at_least(1),
        "seed": Field(int),
        "max_steps": int_at_least(1, nullable=True, extra="; null means env.termination.max_steps"),
    },
    "output_dir": Field(str),
    "checkpoint_every": int_at_least(
        1, nullable=True, extra="; null writes about five checkpoints per run"
    ),
    "curriculum": Field(dict, nullable=True),  # checked by validate_curriculum
    "start_from": Field(dict, nullable=True),  # checked by _start_setting
    "stagger_starts": Field(bool),
    "monitor": {
        "enabled": Field(bool),
        "window": int_at_least(4),
        "patience": int_at_least(1),
        "alpha": Field(float, False, lambda v: 0 < v < 1, "in (0, 1)"),
        "min_change": NON_NEGATIVE,
        "share_threshold": Field(float, False, lambda v: 0 < v <= 1, "in (0, 1]"),
        "baseline": Field(
            str, False, lambda v: v in MONITOR_BASELINES, f"one of {list(MONITOR_BASELINES)}"
        ),
        "min_episodes": int_at_least(1),
    },
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
    "checkpoint_every": None,
    "curriculum": {},
    "start_from": None,
    "stagger_starts": False,
    "monitor": {
        "enabled": True,
        "window": 20,
        "patience": 3,
        "alpha": 0.01,
        "min_change": 0.1,
        "share_threshold": 0.8,
        "baseline": "untrained",
        "min_episodes": 32,
    },
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


def validate_experiment(data: dict, fail: Callable[..., None]) -> None:
    """Check ``experiment.*`` and fill the algorithm's default hyperparameters in place."""
    exp, spec = data["experiment"], env_spec(data)
    name = exp["algorithm"]["name"]
    if name not in ALGORITHM_PARAMS:
        fail(
            "experiment.algorithm.name",
            name,
            f"unknown algorithm; known: {sorted(ALGORITHM_PARAMS)}",
        )
    declared = ALGORITHM_PARAMS[name]
    rules = checks(declared)
    given = exp["algorithm"]["params"]
    resolved = defaults(declared)
    for key, value in given.items():
        dotted = f"experiment.algorithm.params.{key}"
        if key == "action_dim":
            try:
                value = ACTION_DIM.validate(value)
            except ValueError as err:
                fail(dotted, value, str(err))
            n_actions = len(ACTION_TABLES[spec.action_type])
            if value is not None and value != n_actions:
                fail(
                    dotted,
                    value,
                    f"must equal the size of action table "
                    f"{spec.action_type!r}, {n_actions} (or be omitted)",
                )
        elif key not in rules:
            hint = f"; {MOVED_KEYS[key]}" if key in MOVED_KEYS else ""
            owners = [a for a, cls in ALGORITHM_PARAMS.items() if a != name and key in checks(cls)]
            if owners and not hint:
                hint = (
                    f"; it belongs to {owners} (to switch algorithm, replace the whole "
                    f"block: experiment.algorithm={{name: {name}, params: {{}}}})"
                )
            fail(
                dotted,
                value,
                f"unknown hyperparameter of {name!r}; its hyperparameters: {sorted(rules)}{hint}",
            )
        else:
            try:
                value = rules[key].validate(value)
            except ValueError as err:
                fail(dotted, value, str(err))
        resolved[key] = value
    exp["algorithm"]["params"] = resolved
    from_params(declared, resolved).check(data, fail)

    if (exp["total_timesteps"] is None) == (exp["episodes"] is None):
        fail(
            "experiment.episodes",
            exp["episodes"],
            f"set exactly one of experiment.total_timesteps "
            f"(now {exp['total_timesteps']!r}) and experiment.episodes; write null for the "
            f"other",
        )
    max_steps = spec.max_steps
    if exp["episodes"] is not None and max_steps is None:
        fail(
            "experiment.episodes",
            exp["episodes"],
            "needs env.termination.max_steps (an episode budget is bounded by it)",
        )
    if exp["eval"]["max_steps"] is None and max_steps is None:
        fail(
            "experiment.eval.max_steps",
            None,
            "must be set when env.termination.max_steps is null (evaluation needs a step cap)",
        )

    for key, role in zip(ROLE_KEYS, ROLES, strict=True):
        value = exp["roles"][key]
        if isinstance(value, dict):
            exp["roles"][key] = _frozen_setting(value, f"experiment.roles.{key}", fail)
            continue
        baselines = sorted(BASELINES[role])
        if value != LEARN and value not in baselines:
            fail(
                f"experiment.roles.{key}",
                value,
                f"must be {LEARN!r} or a baseline policy: {baselines}",
            )

    if exp["start_from"] is not None:
        exp["start_from"] = _start_setting(exp["start_from"], name, fail)

    validate_curriculum(data, fail)
    _check_sizes(data, spec, resolved["num_steps"], fail)

    train_seeds = range(exp["seed"], exp["seed"] + exp["num_seeds"])
    eval_seeds = range(exp["eval"]["seed"], exp["eval"]["seed"] + exp["eval"]["episodes"])
    if train_seeds.start < eval_seeds.stop and eval_seeds.start < train_seeds.stop:
        fail(
            "experiment.eval.seed",
            exp["eval"]["seed"],
            f"the evaluation seed block [{eval_seeds.start}, {eval_seeds.stop}) must not "
            f"overlap the training seeds [{train_seeds.start}, {train_seeds.stop})",
        )


# ----------------------------------------------------------------------------- sizes
# What is refused or announced before anything compiles (docs/configuration.md, "Sizes"):
# - memory: the grids held at once x EnvSpec.state_bytes, a lower bound (rollouts, networks
#   and observations add to it); refused above this machine's physical memory, announced
#   from LARGE_BATCH_BYTES;
# - the budget: one update (num_envs x num_steps env steps per seed) is the least a run
#   trains; a plan above total_timesteps is announced, and refused when it is more than
#   OVERSHOOT_REFUSED times the budget and more than OVERSHOOT_REFUSED_STEPS env steps;
# - time: the planned env steps at FAST_ENV_STEPS_PER_S (faster than training runs on any
#   device measured; a 2-core CPU trains 4 k - 14 k env steps/s), a lower bound; announced
#   from LONG_PLAN_STEPS env steps, refused above REFUSED_PLAN_SECONDS.
LARGE_BATCH_BYTES = 2**30
# One grid's state above this is refused by make() with its own estimate (it equals
# ppage_jax.env.checks.MEMORY_LIMIT_BYTES); the batch checks leave such a config to it.
GRID_STATE_LIMIT = 64 * 2**20
OVERSHOOT_REFUSED = 10
OVERSHOOT_REFUSED_STEPS = 10**7
FAST_ENV_STEPS_PER_S = 10**7
LONG_PLAN_STEPS = 10**9
REFUSED_PLAN_SECONDS = 30 * 86400


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.2g} s"


def check_batch(
    grids: int, state_bytes: int, key: str, value: Any, what: str, fail: Callable[..., None]
) -> None:
    """Refuse (``fail(key, value, why)``) ``grids`` held at once whose states alone
    (``state_bytes`` each) exceed the physical memory; announce them from
    :data:`LARGE_BATCH_BYTES`. ``what`` says which grids they are."""
    need, memory = grids * state_bytes, physical_memory()
    estimate = (
        f"{grids:,} grids at once ({what}) hold at least {_gib(need)} of state "
        f"({state_bytes} bytes each; rollouts and networks need more)"
    )
    if memory is not None and need > memory:
        fail(key, value, f"{estimate}, more than this machine's {_gib(memory)} of memory")
    if need >= LARGE_BATCH_BYTES:
        have = f" of this machine's {_gib(memory)}" if memory is not None else ""
        notice(f"{key} = {value}: {estimate}{have}")


def check_plan(env_steps: int, key: str, value: Any, what: str, fail: Callable[..., None]) -> None:
    """Refuse a plan of ``env_steps`` env steps (``what`` says whose) that would take more
    than :data:`REFUSED_PLAN_SECONDS` even at :data:`FAST_ENV_STEPS_PER_S`; announce it from
    :data:`LONG_PLAN_STEPS`."""
    if env_steps < LONG_PLAN_STEPS:
        return
    seconds = env_steps / FAST_ENV_STEPS_PER_S
    estimate = (
        f"{what} plans {env_steps:.3g} env steps: at least {_duration(seconds)} even at "
        f"{FAST_ENV_STEPS_PER_S:.0e} env steps/s (a 2-core CPU trains 4e+03 - 1.4e+04)"
    )
    if seconds > REFUSED_PLAN_SECONDS:
        fail(key, value, f"{estimate}; at most {_duration(REFUSED_PLAN_SECONDS)} is allowed")
    notice(f"{key} = {value}: {estimate}")


def planned_updates(
    total_timesteps: int | None,
    episodes: int | None,
    num_envs: int,
    num_steps: int,
    max_steps: int | None,
) -> int:
    """Static update count: ``total_timesteps // (num_envs * num_steps)`` (at least 1), or,
    with an episode budget, enough updates for ``episodes`` episodes of ``max_steps`` turns
    (the loop stops early once the budget is reached)."""
    per_update = num_envs * num_steps
    if total_timesteps is not None:
        return max(1, total_timesteps // per_update)
    assert episodes is not None and max_steps is not None
    return max(1, math.ceil(episodes * max_steps / per_update))


def _check_sizes(data: dict, spec: EnvSpec, num_steps: int, fail: Callable[..., None]) -> None:
    """The run's budget, plan and batches against the thresholds above."""
    exp = data["experiment"]
    total, num_envs, seeds = exp["total_timesteps"], exp["num_envs"], exp["num_seeds"]
    per_update = num_envs * num_steps
    if total is not None and per_update > total:
        plan = (
            f"is less than one update: the run plans 1 update of {num_envs} grids "
            f"(experiment.num_envs) x {num_steps} turns (num_steps) = {per_update:,} env steps "
            f"per seed, {per_update / total:.3g}x what was asked"
        )
        if per_update > OVERSHOOT_REFUSED * total and per_update > OVERSHOOT_REFUSED_STEPS:
            fail(
                "experiment.total_timesteps",
                total,
                f"{plan}; set experiment.num_envs <= {max(1, total // num_steps)} or raise "
                f"experiment.total_timesteps",
            )
        notice(f"experiment.total_timesteps = {total:,} {plan}")
    updates = planned_updates(total, exp["episodes"], num_envs, num_steps, spec.max_steps)
    budget = "total_timesteps" if total is not None else "episodes"
    what = f"the run ({seeds} seed(s) x {updates:,} updates x {per_update:,} env steps)"
    check_plan(seeds * updates * per_update, f"experiment.{budget}", exp[budget], what, fail)
    state_bytes = spec.state_bytes
    if state_bytes > GRID_STATE_LIMIT:
        return
    check_batch(
        seeds * num_envs,
        state_bytes,
        "experiment.num_envs",
        num_envs,
        f"experiment.num_seeds = {seeds} x experiment.num_envs",
        fail,
    )
    check_batch(
        seeds * exp["eval"]["episodes"],
        state_bytes,
        "experiment.eval.episodes",
        exp["eval"]["episodes"],
        f"experiment.num_seeds = {seeds} x experiment.eval.episodes, played together",
        fail,
    )


# Algorithms whose learners can start from another run's trained policy (experiment.start_from).
WARM_START_ALGORITHMS = ("ippo", "mappo")


def _start_setting(value: dict, algorithm: str, fail: Callable[..., None]) -> dict:
    """Check ``experiment.start_from``'s ``{policy: RUN_DIR, seed}`` (the checkpoint is
    loaded, and matched to this config, by make_train_config)."""
    dotted = "experiment.start_from"
    if algorithm not in WARM_START_ALGORITHMS:
        fail(
            dotted,
            value,
            f"fine-tuning from a trained policy is supported by {list(WARM_START_ALGORITHMS)}, "
            f"not {algorithm!r}",
        )
    if "greedy" in value:
        fail(f"{dotted}.greedy", value["greedy"], "unknown key; allowed keys: ['policy', 'seed']")
    setting = _frozen_setting(value, dotted, fail)
    setting.pop("greedy")
    return setting


def _frozen_setting(value: dict, dotted: str, fail: Callable[..., None]) -> dict:
    """Check a frozen role's ``{policy: RUN_DIR, seed, greedy}`` and fill its defaults (the
    checkpoint itself is loaded, and matched to this config, by make_train_config)."""
    for k, v in value.items():
        if k not in FROZEN_DEFAULTS:
            fail(f"{dotted}.{k}", v, f"unknown key; allowed keys: {sorted(FROZEN_DEFAULTS)}")
    if "policy" not in value:
        fail(
            dotted,
            value,
            "a mapping must name policy: RUN_DIR (a directory written by "
            "ppage-jax run whose policy for this role is played, not trained)",
        )
    rules = {
        "policy": Field(str, False, lambda v: len(v) > 0, "(a run directory)"),
        "seed": int_at_least(0, extra=" (which of that run's trained seeds)"),
        "greedy": Field(bool),
    }
    setting = {**FROZEN_DEFAULTS, **value}
    for k, rule in rules.items():
        try:
            setting[k] = rule.validate(setting[k])
        except ValueError as err:
            fail(f"{dotted}.{k}", setting[k], str(err))
    run_dir = resolve_run_path(setting["policy"])
    missing = [f for f in (RUN_CONFIG, RUN_CHECKPOINT) if not (run_dir / f).is_file()]
    if missing:
        fail(
            f"{dotted}.policy",
            setting["policy"],
            f"must be a run directory written by ppage-jax run (it lacks {missing})",
        )
    return setting
