"""What a role plays when it does not learn, inside the rollout: a fixed baseline policy, or
a policy frozen from another run (loaded by :mod:`ppage_jax.train.run.experiment`).

Agents are rows (predators first). A *role* is ``"predator"`` or ``"prey"``; each role is
learned by the algorithm, played by a fixed baseline policy, or played by the policy another
run trained for that role (``experiment.roles.<role>: {policy: RUN_DIR}``, a
:class:`FrozenPolicy`: loaded once, never trained).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from ppage_jax import policies
from ppage_jax.config.experiment.roles import LEARN
from ppage_jax.defaults import ROLES
from ppage_jax.policies import Policy
from ppage_jax.state import EnvParams, State

if TYPE_CHECKING:
    from ppage_jax.env import GridWorld
    from ppage_jax.train.config import TrainConfig


def baseline_policies(role: str) -> dict[str, Callable[..., Policy]]:
    """Fixed policies ``role`` may play instead of learning (``experiment.roles``, by the names
    of :data:`ppage_jax.config.experiment.roles.BASELINES`): factories
    ``f(env, params) -> Policy`` from :mod:`ppage_jax.policies`."""
    return dict(policies.PREDATOR_POLICIES if role == "predator" else policies.PREY_POLICIES)


def fixed_policy(tc: TrainConfig, role: str, name: str, params: EnvParams) -> Policy:
    """The policy ``role`` plays instead of learning: baseline ``name`` (or a
    :class:`FrozenPolicy`)."""
    if isinstance(name, FrozenPolicy):
        return name.policy(tc.env, params)
    return baseline_policies(role)[name](tc.env, params)


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
        rows = tc.agents_of(role)
        if name == LEARN or len(rows) == 0:
            continue
        keys = jax.random.split(jax.random.fold_in(key, i), obs.shape[0])
        fixed = jax.vmap(fixed_policy(tc, role, name, params))(keys, obs, state)
        actions = actions.at[:, rows].set(fixed[:, rows].astype(jnp.int32))
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
    acts: Callable[..., jax.Array]  # its algorithm's one-grid acting (protocol.acting_one)
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
        acts = self.acts
        own_env, tc, same = self.tc.env, self.tc, self.same_observation
        weights = self.weights

        def act(key: jax.Array, obs: jax.Array, state: State) -> jax.Array:
            own = obs if same else own_env.observe(state, params)
            frozen = jax.tree.map(jnp.asarray, weights)
            return acts(tc, frozen, key, own, state)

        return act


class StartPolicy(str):
    """The trained policy a run's learners start from (``experiment.start_from``): its
    label (``"policy RUN_DIR (seed S, checkpoint DIGEST)"``, so equal labels mean equal
    weights and a TrainConfig holding one stays a valid static jit argument) and its
    ``weights``, the policy_state of one seed (NumPy leaves) that the algorithm's ``init``
    puts in place of the random initialisation. The optimiser starts fresh."""

    run_dir: str
    seed: int
    weights: Any
    digest: str

    def __new__(cls, label: str, **fields: Any) -> StartPolicy:
        obj = super().__new__(cls, label)
        obj.__dict__.update(fields)
        return obj
