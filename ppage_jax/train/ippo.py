"""IPPO: independent PPO per role, parameters shared within a role (PureJaxRL style).

Each learning role has one actor-critic network (separate actor and critic, each reading the
role's observation through the encoder that fits it, ``network``) shared by all its agents;
the agent's one-hot id within the role is appended to its observation. Every update collects
``num_steps`` turns from ``num_envs`` grids, computes GAE per agent, and runs
``update_epochs`` epochs of ``num_minibatches`` clipped-PPO minibatch steps per role. The
pieces live in :mod:`ppage_jax.train.ppo` (shared with ``mappo``).

- Bootstrap: ``V(final_obs)`` after every step, cut only by termination (the episode's, or
  the prey's own capture); truncation bootstraps.
- Masking: transitions of a prey that was already captured before the step have weight 0 in
  every loss term and in the advantage normalisation.

``train(key, config, params) -> (runner_state, metrics)``: see ``ppage_jax/train/__init__.py``.
"""

from __future__ import annotations

import jax

from ppage_jax.state import EnvParams
from ppage_jax.train import ppo, progress
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.hyperparams import IPPOHyperparams
from ppage_jax.train.ppo import (  # noqa: F401  (the PPO pieces, importable from here)
    READS_STATE,
    ActorCritic,
    RunnerState,
    Trajectory,
    gae,
    greedy_actions,
    learn,
    network,
    policy_state,
    ppo_loss,
    sample_actions,
)

Hyperparams = IPPOHyperparams
STOCHASTIC = True  # sample_actions draws from the learned policy


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    """Networks, optimisers and the first observations."""
    return ppo.init(key, tc, params)


def rollout(
    runner: RunnerState, tc: TrainConfig, params: EnvParams
) -> tuple[RunnerState, dict, dict]:
    """``num_steps`` turns of every grid: new runner, per-role Trajectory, stacked finished."""
    return ppo.rollout(runner, tc, params)


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """One rollout and one PPO update of every learning role; returns a metrics row."""
    return ppo.update(runner, tc, params)


train = progress.trainer(init, update, "IPPO")
