"""Checkpoints of trained policies: Flax serialization (msgpack) plus the config hash.

A checkpoint holds what the greedy policy needs (``module.policy_state``), stacked over the
run's seeds, with the algorithm name and the hash of the config it was trained with. Loading
rebuilds the expected shapes from the current config and refuses a checkpoint whose shapes
differ (another grid, agent count, observation or network), naming the first differing array
and both config hashes. Equal shapes under a different config hash (say, other reward weights)
load with a warning (seeds, budgets and the eval block may differ silently).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization
from flax.traverse_util import flatten_dict

from ppage_jax.train.common import TrainConfig
from ppage_jax.train.experiment import algorithm

FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint that does not fit the config it is loaded into."""


def template_policy(tc: TrainConfig, num_seeds: int | None = None):
    """Shapes (ShapeDtypeStruct leaves) of ``policy_state`` for ``tc``; with ``num_seeds``,
    stacked on a leading seed axis. Traced only, never compiled or run."""
    module = algorithm(tc.algorithm)

    def policy(key):
        return module.policy_state(module.init(key, tc, tc.env.default_params))

    shapes = jax.eval_shape(policy, jax.random.PRNGKey(0))
    if num_seeds is None:
        return shapes
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct((num_seeds,) + s.shape, s.dtype), shapes)


def save_checkpoint(path: str | os.PathLike, tc: TrainConfig, policies) -> None:
    """Write ``policies`` (policy_state stacked over seeds) with the algorithm and config hash."""
    leaves = jax.tree.leaves(policies)
    payload = {
        "format": FORMAT,
        "algorithm": tc.algorithm,
        "config_hash": tc.config_hash,
        "policy_hash": tc.policy_hash,
        "num_seeds": int(leaves[0].shape[0]) if leaves else 0,
        "policy": serialization.to_state_dict(jax.device_get(policies)),
    }
    Path(path).write_bytes(serialization.msgpack_serialize(payload))


def load_checkpoint(path: str | os.PathLike, tc: TrainConfig):
    """Read a checkpoint written by :func:`save_checkpoint` into ``tc``'s policy structure.

    Raises :class:`CheckpointError` when the algorithm, the array names or any array shape
    differ from what ``tc`` expects.
    """
    raw = serialization.msgpack_restore(Path(path).read_bytes())
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a ppage_jax checkpoint (format {FORMAT})")
    where = (f"{path}: checkpoint trained with config hash {raw['config_hash']}, loading "
             f"into config hash {tc.config_hash}")
    if raw["algorithm"] != tc.algorithm:
        raise CheckpointError(f"{where}: it holds algorithm {raw['algorithm']!r}, the config "
                              f"asks for {tc.algorithm!r}")
    num_seeds = raw["num_seeds"]
    expected = serialization.to_state_dict(template_policy(tc, num_seeds if num_seeds else None))
    saved_flat = flatten_dict(raw["policy"], sep="/") if raw["policy"] else {}
    expected_flat = flatten_dict(expected, sep="/") if expected else {}
    if set(saved_flat) != set(expected_flat):
        missing = sorted(set(expected_flat) - set(saved_flat))
        extra = sorted(set(saved_flat) - set(expected_flat))
        raise CheckpointError(f"{where}: the arrays differ (missing {missing[:5]}, "
                              f"unexpected {extra[:5]}); was it trained with another "
                              f"config?")
    for name, spec in expected_flat.items():
        got = np.shape(saved_flat[name])
        if got != tuple(spec.shape):
            raise CheckpointError(
                f"{where}: array {name!r} has shape {got}, this config needs "
                f"{tuple(spec.shape)} (grid size, agent counts, observation, action table "
                f"and network shape must match the training config)")
    if raw.get("policy_hash") != tc.policy_hash:
        warnings.warn(f"{where}: shapes match, but the environment, rewards or algorithm "
                      f"differ from the training config", stacklevel=2)
    if not expected_flat:
        return {}
    restored = serialization.from_state_dict(
        jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), template_policy(
            tc, num_seeds if num_seeds else None)), raw["policy"])
    return jax.tree.map(jnp.asarray, restored)
