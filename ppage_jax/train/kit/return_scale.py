"""A running return-scale normaliser for policy-gradient learners.

Rewards are divided by the running standard deviation of the discounted return, as common
PPO implementations do (Stable-Baselines3's ``VecNormalize(norm_reward=True)``, CleanRL's
``NormalizeReward``; Engstrom et al., 2020): each agent of each grid carries its discounted
return so far, ``G = gamma * G + r`` (restarted when its episode ends), and the running
variance of ``G`` over every step and agent seen is updated with each step's batch (Chan's
parallel moments). The reward a learner sees is ``r / sqrt(var + eps)``. The mean is not
subtracted, so a cost stays a cost and a payment a payment: the design's ratios and signs are
kept and only its overall scale changes. Every value is traced and carried in the runner
state, so a checkpoint resumes the normaliser too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.types import Replaceable, pytree_dataclass

EPSILON = 1e-8


@pytree_dataclass
class ReturnScale(Replaceable):
    """The normaliser of one role: its agents' running discounted returns and the moments."""

    returns: jax.Array  # float32[E, n]: each agent's discounted return in its episode so far
    count: jax.Array  # float32: entries seen (starts at a small prior, as SB3's RunningMeanStd)
    mean: jax.Array  # float32
    var: jax.Array  # float32


def return_scale_init(shape: tuple[int, ...]) -> ReturnScale:
    """A fresh normaliser for ``shape`` = (grids, agents of the role): variance 1."""
    return ReturnScale(
        returns=jnp.zeros(shape, jnp.float32),
        count=jnp.float32(1e-4),
        mean=jnp.float32(0.0),
        var=jnp.float32(1.0),
    )


def normalise(
    scale: ReturnScale,
    reward: jax.Array,
    valid: jax.Array,
    episode_end: jax.Array,
    gamma: jax.Array | float,
) -> tuple[ReturnScale, jax.Array]:
    """One step: add ``reward`` [E, n] to the running returns, update the moments with the
    ``valid`` entries, and return the new normaliser and ``reward / sqrt(var + eps)``.
    ``episode_end`` [E, n] restarts the returns of the agents whose episode ended."""
    returns = scale.returns * gamma + reward
    weight = valid.astype(jnp.float32)
    n = weight.sum()
    batch_mean = (returns * weight).sum() / jnp.maximum(n, 1.0)
    batch_var = (((returns - batch_mean) ** 2) * weight).sum() / jnp.maximum(n, 1.0)
    total = scale.count + n
    delta = batch_mean - scale.mean
    mean = scale.mean + delta * n / total
    m2 = scale.var * scale.count + batch_var * n + delta**2 * scale.count * n / total
    var = m2 / total
    scaled = reward / jnp.sqrt(var + EPSILON)
    returns = jnp.where(episode_end, 0.0, returns)
    return ReturnScale(returns, total, mean, var), scaled
