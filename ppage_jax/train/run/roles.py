"""Roles and what a role may play instead of learning: a fixed baseline policy, or a policy
frozen from another run.

Agents are rows (predators first). A *role* is ``"predator"`` or ``"prey"``; each role is
learned by the algorithm, played by a fixed baseline policy, or played by the policy another
run trained for that role (``experiment.roles.<role>: {policy: RUN_DIR}``, a
:class:`FrozenPolicy`: loaded once, never trained).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax import policies
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams, State
from ppage_jax.train.protocol import acting_one

if TYPE_CHECKING:
    from ppage_jax.config import Config
    from ppage_jax.env import GridWorld
    from ppage_jax.train.config import TrainConfig

ROLES = ("predator", "prey")
# experiment.roles keys (PPAGE's plural config names) in ROLES order.
ROLE_KEYS = ("predators", "preys")
LEARN = "learn"
# A frozen role's setting: {policy: RUN_DIR, seed: which trained seed, greedy: argmax}.
FROZEN_DEFAULTS = {"policy": None, "seed": 0, "greedy": False}
# The files of a run directory a frozen policy is read from (written by ppage-jax run).
RUN_CONFIG, RUN_CHECKPOINT = "config.yaml", "checkpoint.msgpack"


def baseline_policies(role: str) -> dict[str, Callable[..., Policy]]:
    """Fixed policies ``role`` may play instead of learning (``experiment.roles``):
    factories ``f(env, params) -> Policy`` from :mod:`ppage_jax.policies`."""
    return dict(policies.PREDATOR_POLICIES if role == "predator" else policies.PREY_POLICIES)


def role_policy_actions(
    tc: TrainConfig,
    role: str,
    name: str,
    key: jax.Array,
    obs: jax.Array,
    state: State,
    params: EnvParams,
    actions: jax.Array,
) -> jax.Array:
    """Set the actions of ``role``'s rows in int32[E, A] ``actions`` from baseline ``name``
    (or a :class:`FrozenPolicy`)."""
    rows = tc.agents_of(role)
    if len(rows) == 0:
        return actions
    if isinstance(name, FrozenPolicy):
        policy = name.policy(tc.env, params)
    else:
        policy = baseline_policies(role)[name](tc.env, params)
    fixed = jax.vmap(policy)(jax.random.split(key, obs.shape[0]), obs, state)
    return actions.at[:, rows].set(fixed[:, rows].astype(jnp.int32))


def fixed_role_actions(
    tc: TrainConfig,
    key: jax.Array,
    obs: jax.Array,
    state: State,
    params: EnvParams,
    actions: jax.Array,
) -> jax.Array:
    """Replace the actions of the fixed (non-learning) roles by their baseline or frozen
    policy.

    ``obs`` float32[E, A, F], ``state`` batched, ``actions`` int32[E, A] -> int32[E, A].
    """
    for i, (role, name) in enumerate(zip(ROLES, tc.roles, strict=True)):
        if name != LEARN:
            actions = role_policy_actions(
                tc, role, name, jax.random.fold_in(key, i), obs, state, params, actions
            )
    return actions


# --------------------------------------------------------------------------- frozen policies
class FrozenPolicy(str):
    """A role played by the policy another run trained for it, never trained here.

    It is a ``str`` (its label, ``"policy RUN_DIR (seed S, checkpoint DIGEST)"``), so
    ``TrainConfig.roles`` stays a pair of names that tables and summary.json print, and equal
    labels mean equal weights (the digest is the checkpoint's), which keeps a TrainConfig
    holding one a valid static jit argument. Its weights (NumPy, one training seed) enter the
    compiled program as constants. It acts like its run's ``trained`` row (sampled for a
    stochastic algorithm, greedy otherwise; ``greedy`` forces the argmax) on its own
    observation, rebuilt from the state when its run observed differently.
    """

    role: str
    run_dir: str
    seed: int
    greedy: bool
    tc: TrainConfig  # the frozen run's TrainConfig (its env, algorithm, network)
    weights: Any  # its policy_state for one seed (NumPy leaves)
    digest: str  # first hex digits of the checkpoint's SHA-256
    same_observation: bool  # it observed exactly as the run that plays it

    def __new__(cls, label: str, **fields: Any) -> FrozenPolicy:
        obj = super().__new__(cls, label)
        obj.__dict__.update(fields)
        return obj

    def policy(self, env: GridWorld, params: EnvParams) -> Policy:
        """One grid's actions ``(key, obs float32[A, F], state) -> int32[A]`` (every row set;
        only the frozen role's rows are meant to be used), in ``env`` with ``params``."""
        from ppage_jax.train.registry import algorithm

        module = algorithm(self.tc.algorithm)
        acts = acting_one(module, self.greedy or not module.STOCHASTIC)
        own_env, tc, same = self.tc.env, self.tc, self.same_observation
        weights = self.weights

        def act(key: jax.Array, obs: jax.Array, state: State) -> jax.Array:
            own = obs if same else own_env.observe(state, params)
            frozen = jax.tree.map(jnp.asarray, weights)
            return acts(tc, frozen, key, own, state)

        return act


def load_run_config(run_dir: str | Path, error: Callable[[str], Exception]) -> Config:
    """The resolved config a run directory was trained with. Roles that run played with a
    frozen policy in turn were not trained there and load as ``noop``, so its own frozen
    runs need not exist any more. A missing or unreadable file raises ``error(reason)``."""
    import yaml

    from ppage_jax.config import load_config

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
    from ppage_jax.config import ConfigError
    from ppage_jax.train.run.checkpoint import CheckpointError, load_checkpoint
    from ppage_jax.train.run.experiment import make_train_config

    setting = {**FROZEN_DEFAULTS, **setting}
    key = key or f"experiment.roles.{ROLE_KEYS[ROLES.index(role)]}"
    source = config.source_of(key)
    run_dir = Path(setting["policy"])

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
    return FrozenPolicy(
        label,
        role=role,
        run_dir=str(run_dir),
        seed=seed,
        greedy=greedy,
        tc=tc,
        weights=weights,
        digest=digest,
        same_observation=frozen_config["observations"] == config["observations"],
    )


def role_settings(config: Config, env: GridWorld) -> tuple[str, str]:
    """What each role plays, in ROLES order: ``"learn"``, a baseline name or a
    :class:`FrozenPolicy` (``experiment.roles.<role>: {policy: RUN_DIR}``)."""
    given = config["experiment"]["roles"]
    return tuple(
        frozen_policy(role, given[key], config, env) if isinstance(given[key], dict) else given[key]
        for key, role in zip(ROLE_KEYS, ROLES, strict=True)
    )
