"""MAPPO: PPO per role with a centralised critic on the global state (JaxMARL's MAPPO).

As :mod:`ppage_jax.train.algorithms.ippo` (one actor shared by the role's agents, one-hot agent id,
the encoder that fits the observation, GAE, clipping, the same masking of captured prey),
but the critic reads ``env.global_state`` (every agent's position, role and captured flag and
the obstacle map; coordinates scaled by 1 / grid size) with the agent's one-hot id within
the role, through MLP layers (:func:`ppage_jax.train.kit.networks.critic_input`). The critic is
used in training only: the policy acts on the agent's own observation.

- Bootstrap: ``V`` of the global state after every step (``final_state``, before any reset),
  cut only by termination (the episode's, or the prey's own capture); truncation bootstraps.
  As in ``ippo``, only truncated steps take a value pass on ``final_state``; elsewhere it is
  the next step's value (:func:`ppage_jax.train.algorithms.ippo.rollout`).
- Checkpoints hold both networks (``policy_state``); acting reads the actor only.

``train(key, config, params) -> (runner_state, metrics)``: see ``ppage_jax/train/__init__.py``.
"""

from __future__ import annotations

import jax

from ppage_jax.config.experiment.ppo import MAPPOHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.algorithms import ippo as ppo
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, networks

Hyperparams = MAPPOHyperparams
STOCHASTIC = True  # sample_actions draws from the learned policy
# Acting is IPPO's (the same actor; only the critic differs): the protocol's policy half.
READS_STATE = ppo.READS_STATE
policy_state = ppo.policy_state
greedy_actions = ppo.greedy_actions
sample_actions = ppo.sample_actions


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> ppo.RunnerState:
    """Networks (the critic sized for the global state), optimisers, first observations."""
    return ppo.init(key, tc, params, networks.critic_input)


def rollout(
    runner: ppo.RunnerState, tc: TrainConfig, params: EnvParams
) -> tuple[ppo.RunnerState, dict, dict]:
    """``num_steps`` turns of every grid: new runner, per-role Trajectory (with the critic's
    global-state input), stacked finished."""
    return ppo.rollout(runner, tc, params, networks.critic_input)


def update(
    runner: ppo.RunnerState, tc: TrainConfig, params: EnvParams
) -> tuple[ppo.RunnerState, dict]:
    """One rollout and one PPO update of every learning role; returns a metrics row."""
    return ppo.update(runner, tc, params, networks.critic_input)


train = loop.trainer(init, update, "MAPPO")
