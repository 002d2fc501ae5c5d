"""On-device training: one readable file per algorithm, each a pure ``train`` function.

The package is three folders: :mod:`~ppage_jax.train.algorithms` (one file per algorithm
family), :mod:`~ppage_jax.train.kit` (the pieces they share: networks, encoders, rollout,
exploration, optimisers, the update loop, schedules) and :mod:`~ppage_jax.train.run` (run
plumbing: runner, checkpoints, monitor, report, curriculum, evaluation). Here live only the
registry, the protocol and the static :class:`TrainConfig`.

Algorithms (``experiment.algorithm.name``): ``ippo`` (PPO per role, parameters shared within
a role), ``mappo`` (IPPO with a centralised critic), ``dqn`` (independent DQN per role;
``double_dqn`` and ``dueling`` flags), ``iql`` (tabular, hashed observations), ``cql``
(centralised joint-action table per team), ``mixed`` (each team iql or cql), PPAGE's
``actor_critic``, ``a2c``, ``a3c`` and ``jalgt``, and ``random`` (no learning; the baseline).
``ppage_jax.train.<name>`` is the module of each registered algorithm (``iql``, ``cql`` and
``mixed`` share :mod:`ppage_jax.train.algorithms.tabular`).

The contract every algorithm module follows::

    tc = make_train_config(config)              # static: env, hyperparameters, budget
    runner_state, metrics = module.train(key, tc, params)

- ``key`` a PRNG key, ``tc`` a :class:`TrainConfig` (no array leaves), ``params`` the
  ``EnvParams``. Pure and jittable end to end; vmappable over keys and over stacked
  ``EnvParams``: ``jax.jit(jax.vmap(module.train, in_axes=(0, None, 0)))(keys, tc, params)``.
- ``module.train(key, tc, params, hyperparams)``: an optional ``{name: float32}`` of traced
  hyperparameters (learning rates, loss coefficients, clipping, ``gamma``, ``gae_lambda``,
  epsilon schedule, ``alpha``; :mod:`ppage_jax.train.kit.traced`) replacing ``tc.hp``'s values;
  new values (or a vmapped batch of them) run in the same compiled program.
- ``runner_state``: the algorithm's final state (learners, optimiser states, grids, key,
  ``progress`` counters ``env_steps``/``episodes``/``updates``).
  ``module.policy_state(runner_state)`` is what the greedy policy needs (and what checkpoints
  hold); ``module.greedy_actions(tc, policy_state, key, obs[E, A, F]) -> int32[E, A]``
  (with ``state=`` the grids' states [E] too when the module declares ``READS_STATE``: a
  policy with a residual ``prior``; :func:`ppage_jax.train.protocol.acting` passes them).
- ``metrics``: a dict of arrays with a leading axis of ``tc.num_updates`` (one row per
  update): ``episodes`` (finished in the update), ``capture_rate`` (fraction of those ended
  by capture within the step limit), ``episode_length``, ``steps_to_capture`` (mean length of
  the captured ones), ``returns`` float32[U, 2, T] (mean per-term return per agent, rows
  predator then prey, terms in ``env.reward_terms`` order), ``losses`` (a dict of float32[U]
  named ``<loss>/<role>``, algorithm-specific: ippo ``actor_loss``, ``value_loss``,
  ``entropy``; dqn ``q_loss``; tabular ``td_error``, the mean |TD error|), ``extras``
  (epsilon-greedy algorithms: ``epsilon`` at the end of the update), ``active`` (False for
  the rows skipped after an episode budget ran out). Means over no episode are NaN.

``module.init`` and ``module.update`` are the two halves of ``train``; ``ppage-jax run`` calls
them in chunks to drive its progress bar (:func:`kit.loop.run_updates`), which gives the same
result as ``train``. The contract is :class:`protocol.Algorithm`; :mod:`ppage_jax.train.registry`
maps each algorithm to its module, and the config package declares its hyperparameters
(:mod:`ppage_jax.config.experiment.algorithms`). ``pj.train_agents(key, config)``
(:func:`ppage_jax.train.run.experiment.train_agents`) picks the module from the config.

This package imports no learner: its names resolve on first use. Loading a config never
imports it.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppage_jax.config.experiment.base import Hyperparams
    from ppage_jax.defaults import ROLES
    from ppage_jax.train.config import TrainConfig
    from ppage_jax.train.protocol import Algorithm
    from ppage_jax.train.registry import (
        ALGORITHMS,
        algorithm,
        register_algorithm,
        unregister_algorithm,
    )
    from ppage_jax.train.run.experiment import make_train_config

# Public names: name -> module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "ALGORITHMS": "ppage_jax.train.registry",
    "Algorithm": "ppage_jax.train.protocol",
    "Hyperparams": "ppage_jax.config.experiment.base",
    "ROLES": "ppage_jax.types",
    "TrainConfig": "ppage_jax.train.config",
    "algorithm": "ppage_jax.train.registry",
    "make_train_config": "ppage_jax.train.run.experiment",
    "register_algorithm": "ppage_jax.train.registry",
    "unregister_algorithm": "ppage_jax.train.registry",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "train":  # deprecated, removed in the next release
        warnings.warn(
            "ppage_jax.train.train is deprecated and is removed in the next release: use "
            "pj.train_agents (ppage_jax.train.run.experiment.train_agents)",
            DeprecationWarning,
            stacklevel=2,
        )
        from ppage_jax.train.run.experiment import train_agents

        return train_agents
    from ppage_jax.train.registry import ALGORITHMS, algorithm

    if name in ALGORITHMS:  # ppage_jax.train.<algorithm>: the module implementing it
        return algorithm(name)
    raise AttributeError(f"module 'ppage_jax.train' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    # the lazy names (_LAZY), spelled out for type checkers
    "ALGORITHMS",
    "Algorithm",
    "Hyperparams",
    "ROLES",
    "TrainConfig",
    "algorithm",
    "make_train_config",
    "register_algorithm",
    "unregister_algorithm",
]


class _DeprecatedCallablePackage(types.ModuleType):
    """Deprecated, removed in the next release: ``pj.train(key, config)``, the package called
    as a function, forwards to :func:`ppage_jax.train_agents` with a DeprecationWarning.
    Afterwards this package is a plain module."""

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, dict]:
        warnings.warn(
            "pj.train(...) is deprecated and is removed in the next release: call "
            "pj.train_agents(...) (ppage_jax.train is the training package)",
            DeprecationWarning,
            stacklevel=2,
        )
        from ppage_jax.train.run.experiment import train_agents

        return train_agents(*args, **kwargs)


sys.modules[__name__].__class__ = _DeprecatedCallablePackage
