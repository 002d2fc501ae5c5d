"""Config -> TrainConfig, with what each role plays: ``learn``, a baseline, or a policy
frozen from another run's checkpoint. The ``experiment`` section's schema and validator live
in :mod:`ppage_jax.config.experiment.section`, the algorithms' hyperparameter declarations in
:mod:`ppage_jax.config.experiment.algorithms`."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
import yaml

from ppage_jax.config import Config, ConfigError, load_config
from ppage_jax.config.experiment.algorithms import algorithm_params
from ppage_jax.config.experiment.base import Hyperparams, from_params
from ppage_jax.config.experiment.roles import FROZEN_DEFAULTS, ROLE_KEYS, RUN_CHECKPOINT, RUN_CONFIG
from ppage_jax.config.experiment.section import planned_updates
from ppage_jax.config.shipped import resolve_run_path
from ppage_jax.defaults import ROLES, SECTIONS
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit.roles import FrozenPolicy, StartPolicy
from ppage_jax.train.protocol import acting_one
from ppage_jax.train.registry import algorithm
from ppage_jax.train.run.checkpoint import CheckpointError, load_checkpoint

if TYPE_CHECKING:
    from ppage_jax.env import GridWorld
    from ppage_jax.state import EnvParams


def make_train_config(config: Config, env=None) -> TrainConfig[Hyperparams]:
    """The static TrainConfig of a validated Config (``env`` defaults to ``make(config)``)."""
    from ppage_jax.env import make

    exp = config["experiment"]
    name = exp["algorithm"]["name"]
    hp = from_params(algorithm_params(name), exp["algorithm"]["params"])
    env = make(config) if env is None else env
    return TrainConfig(
        env=env,
        algorithm=name,
        hp=hp,
        num_envs=exp["num_envs"],
        num_updates=planned_updates(
            exp["total_timesteps"],
            exp["episodes"],
            exp["num_envs"],
            hp.num_steps,
            env.spec.max_steps,
        ),
        episodes=exp["episodes"],
        roles=role_settings(config, env),
        config_hash=config.hash(),
        policy_hash=policy_hash(config),
        start=start_policy(config, exp["start_from"], env, name),
        stagger_starts=bool(exp["stagger_starts"]),
    )


def train_agents(
    key: jax.Array,
    config: TrainConfig | Config,
    params: EnvParams | None = None,
    hyperparams: dict[str, Any] | None = None,
) -> tuple[Any, dict]:
    """Train the configured algorithm: ``(runner_state, metrics)`` (``pj.train_agents``).

    ``config`` is a TrainConfig (or a Config, converted with :func:`make_train_config`, whose
    ``experiment.curriculum`` then applies); ``params`` defaults to the environment's
    default params. ``hyperparams`` (``{name: value}``, traced: jit this with them as an
    argument and new values do not recompile) replace the algorithm's traced
    hyperparameters (:mod:`ppage_jax.train.kit.traced`).
    """
    from ppage_jax.train.kit.loop import train_loop
    from ppage_jax.train.run.curriculum import config_curriculum

    tc = make_train_config(config) if isinstance(config, Config) else config
    params = tc.env.default_params if params is None else params
    module = algorithm(tc.algorithm)
    curriculum = config_curriculum(config) if isinstance(config, Config) else None
    if curriculum is not None or hyperparams:
        return train_loop(module.init, module.update, key, tc, params, curriculum, hyperparams)
    return module.train(key, tc, params)


def start_policy(
    config: Config, setting: dict | None, env: GridWorld, algorithm_name: str
) -> StartPolicy | None:
    """``experiment.start_from``'s trained policy (None when unset): seed ``setting["seed"]``
    of the run directory ``setting["policy"]``, which must have trained the same algorithm
    with the same networks on the same layout. Its checkpoint is loaded against this config
    (:func:`load_checkpoint` refuses other shapes, naming the first array that differs); a
    ConfigError at ``experiment.start_from`` otherwise."""
    if setting is None:
        return None
    key = "experiment.start_from"
    source = config.source_of(key)
    run_dir = resolve_run_path(setting["policy"])

    def fail(what: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(source, what, value, allowed)

    started = load_run_config(
        run_dir,
        lambda err: fail(
            f"{key}.policy",
            str(run_dir),
            f"must be a run directory written by ppage-jax run ({err})",
        ),
    )
    theirs = started["experiment"]["algorithm"]["name"]
    if theirs != algorithm_name:
        raise fail(
            f"{key}.policy",
            str(run_dir),
            f"that run trained {theirs!r}, this config {algorithm_name!r}",
        )
    mine = config.with_overrides({"experiment.start_from": None})
    tc = make_train_config(mine, env)
    checkpoint = run_dir / RUN_CHECKPOINT
    try:
        with warnings.catch_warnings():  # other rewards are the point of fine-tuning
            warnings.simplefilter("ignore")
            stacked = load_checkpoint(checkpoint, tc)
    except (CheckpointError, OSError) as err:
        raise fail(f"{key}.policy", str(run_dir), f"its checkpoint does not load: {err}") from None
    num_seeds = int(jax.tree.leaves(stacked)[0].shape[0])
    seed = setting["seed"]
    if not 0 <= seed < num_seeds:
        raise fail(
            f"{key}.seed",
            seed,
            f"must be in [0, {num_seeds}) (that run trained {num_seeds} seed(s))",
        )
    weights = jax.tree.map(lambda a: np.asarray(a[seed]), stacked)
    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()[:12]
    return StartPolicy(
        f"policy {run_dir} (seed {seed}, checkpoint {digest})",
        run_dir=str(run_dir),
        seed=seed,
        weights=weights,
        digest=digest,
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


# --------------------------------------------------------------------------- roles
def load_run_config(run_dir: str | Path, error: Callable[[str], Exception]) -> Config:
    """The resolved config a run directory was trained with. Roles that run played with a
    frozen policy in turn were not trained there and load as ``noop``, so its own frozen
    runs need not exist any more. A missing or unreadable file raises ``error(reason)``."""
    path = Path(run_dir) / RUN_CONFIG
    try:
        settings = yaml.safe_load(path.read_text())["experiment"]["roles"]
        frozen = [k for k, v in settings.items() if isinstance(v, dict)]
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise error(f"{path}: {err}") from None
    return load_config(path, {f"experiment.roles.{k}": "noop" for k in frozen})


def frozen_policy(
    role: str, setting: dict, config: Config, env: GridWorld, key: str | None = None
) -> FrozenPolicy:
    """Load the policy the run directory ``setting["policy"]`` trained for ``role`` (seed
    ``setting["seed"]``) to play it in ``env`` (built from ``config``). Raises a
    :class:`~ppage_jax.config.ConfigError` at ``key`` when that run did not train ``role``,
    has another layout or action table, or its checkpoint does not load."""
    setting = {**FROZEN_DEFAULTS, **setting}
    key = key or f"experiment.roles.{ROLE_KEYS[ROLES.index(role)]}"
    source = config.source_of(key)
    run_dir = resolve_run_path(setting["policy"])

    def fail(what: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(source, f"{key}.{what}", value, allowed)

    frozen_config = load_run_config(
        run_dir,
        lambda err: fail(
            "policy", str(run_dir), f"must be a run directory written by ppage-jax run ({err})"
        ),
    )
    tc = make_train_config(frozen_config)
    if not tc.learns(role):
        raise fail(
            "policy",
            str(run_dir),
            f"that run did not train its {role}s (its roles: "
            f"{dict(zip(ROLE_KEYS, tc.roles, strict=True))})",
        )
    mine, theirs = env.layout, tc.env.layout
    for what in ("size", "n_predators", "n_prey", "num_obstacles"):
        if getattr(mine, what) != getattr(theirs, what):
            raise fail(
                "policy",
                str(run_dir),
                f"that run's {what} is {getattr(theirs, what)}, this config's is "
                f"{getattr(mine, what)}; a frozen policy needs the same grid size, "
                f"agent counts and obstacle count",
            )
    if env.num_actions != tc.env.num_actions:
        raise fail(
            "policy",
            str(run_dir),
            f"that run has {tc.env.num_actions} actions, this config {env.num_actions}",
        )
    checkpoint = run_dir / RUN_CHECKPOINT
    try:
        stacked = load_checkpoint(checkpoint, tc)
    except (CheckpointError, OSError) as err:
        raise fail("policy", str(run_dir), f"its checkpoint does not load: {err}") from None
    num_seeds = int(jax.tree.leaves(stacked)[0].shape[0])
    seed = setting["seed"]
    if not 0 <= seed < num_seeds:
        raise fail(
            "seed", seed, f"must be in [0, {num_seeds}) (that run trained {num_seeds} seed(s))"
        )
    weights = jax.tree.map(lambda a: np.asarray(a[seed]), stacked)
    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()[:12]
    greedy = bool(setting["greedy"])
    label = f"policy {run_dir} (seed {seed}{', greedy' if greedy else ''}, checkpoint {digest})"
    module = algorithm(tc.algorithm)
    return FrozenPolicy(
        label,
        acts=acting_one(module, greedy or not module.STOCHASTIC),
        role=role,
        run_dir=str(run_dir),
        seed=seed,
        greedy=greedy,
        tc=tc,
        weights=weights,
        digest=digest,
        same_observation=all(
            getattr(tc.env.spec, field) == getattr(env.spec, field)
            for field in ("observation_type", "observation_params", "observation_per_agent")
        ),
    )


def role_settings(config: Config, env: GridWorld) -> tuple[str | FrozenPolicy, str | FrozenPolicy]:
    """What each role plays, in ROLES order: ``"learn"``, a baseline name or a
    :class:`FrozenPolicy` (``experiment.roles.<role>: {policy: RUN_DIR}``)."""
    given = config["experiment"]["roles"]
    predator, prey = (
        frozen_policy(role, given[key], config, env) if isinstance(given[key], dict) else given[key]
        for key, role in zip(ROLE_KEYS, ROLES, strict=True)
    )
    return predator, prey
