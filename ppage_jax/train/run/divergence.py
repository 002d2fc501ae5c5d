"""Divergence checks between compiled chunks: a NaN or inf loss, return or parameter stops
training with :class:`DivergenceError` naming the update, the algorithm and the quantity (a
return by its reward term: the first term that is not finite).

The checks run on the host on what a chunk already returns (its metrics rows) plus one small
compiled all-finite reduction of the learned parameters (``policy_state``), so they add no
work to the chunk itself. Some NaNs are not divergence and are let through: the returns of
an update in which no episode finished, of a role without agents, the metrics of updates
skipped after an episode budget was reached, and a loss that has not been computed yet (DQN
before its replay buffer fills reports NaN); a loss that was finite and turns NaN, or any
inf, is divergence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.compilation.programs import ProgramStore
from ppage_jax.defaults import ROLES
from ppage_jax.train.config import TrainConfig


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss, return or parameter."""

    def __init__(self, update: int, algorithm: str, quantity: str, value: float | str, seed: int):
        self.update, self.algorithm, self.quantity = update, algorithm, quantity
        self.value, self.seed = value, seed
        self.metrics: dict | None = None  # every metrics row up to this update
        self.checkpoint: int | None = None  # update of the last good checkpoint
        super().__init__(
            f"training diverged at update {update} of {algorithm}: {quantity} "
            f"is {value} (seed {seed})"
        )


def _finite_params(policy_state: Any) -> dict[str, jax.Array]:
    """Per floating-point parameter array: bool[num_seeds], all of its entries finite."""
    paths, _ = jax.tree_util.tree_flatten_with_path(policy_state)
    return {
        jax.tree_util.keystr(path, simple=True, separator="/"): jnp.isfinite(x)
        .reshape(x.shape[0], -1)
        .all(axis=1)
        for path, x in paths
        if jnp.issubdtype(x.dtype, jnp.inexact)
    }


class DivergenceCheck:
    """Checks each chunk's metrics and the parameters after it; remembers which losses
    have been finite so far (per seed)."""

    def __init__(self, tc: TrainConfig, policy_state: Any):
        self.tc = tc
        self.finite_params: Callable[[Any], dict] = jax.jit(
            lambda runner: _finite_params(policy_state(runner))
        )
        self.seen: dict[str, np.ndarray | np.bool_] = {}
        is_pred = np.asarray(tc.env.is_predator, bool)
        self.roles = [r for r, rows in zip(ROLES, (is_pred, ~is_pred), strict=True) if rows.any()]

    def compile(self, runner: Any, programs: ProgramStore | None = None) -> None:
        """Compile the parameter check for ``runner``'s shapes now, by running it once
        before training, so that the first chunk's check does not compile on the way;
        through ``programs`` (loaded whole, or compiled and kept) when given."""
        if programs is not None:
            static = {"algorithm": self.tc.algorithm, "config": self.tc.config_hash}
            self.finite_params = programs.compile(
                "finite_params", self.finite_params, (runner,), static
            )
        jax.block_until_ready(self.finite_params(runner))

    def prime(self, metrics: dict) -> None:
        """Note the losses already finite in ``metrics`` (restored from a checkpoint)."""
        for name, values in metrics.get("losses", {}).items():
            finite = np.isfinite(np.asarray(values, np.float64)).any(axis=1)
            self.seen[name] = self.seen.get(name, False) | finite

    def __call__(self, metrics: dict, first_update: int, runner: Any) -> None:
        """Raise :class:`DivergenceError` for the first non-finite quantity of the chunk
        whose metrics rows are ``metrics`` (updates ``first_update + 1 ...``) and whose
        final runner state is ``runner``: the earliest update, then the lowest seed, then
        reward terms (in ``reward_terms`` order, predators' returns first) before losses, as
        a non-finite reward makes the losses non-finite. A term is seen through its mean
        return per role (``return/<role>/<term>``), so in an update where an episode
        ended."""
        active = np.asarray(metrics["active"], bool)
        num_seeds, size = active.shape
        found = []  # (update index, seed, order, quantity, value)
        returns = np.asarray(metrics["returns"], np.float64)  # [S, U, 2, T]
        ended = np.asarray(metrics["episodes"]) > 0
        for t, term in enumerate(self.tc.env.reward_terms):
            for r, role in enumerate(ROLES):
                if role not in self.roles:
                    continue
                values = returns[:, :, r, t]
                bad = active & (np.isinf(values) | (np.isnan(values) & ended))
                quantity = f"reward term {term!r} (return/{role}/{term})"
                found += self._first(bad, len(found), quantity, values)
        for name, values in sorted(metrics["losses"].items()):
            values = np.asarray(values, np.float64)
            finite = np.isfinite(values) & active
            before = np.broadcast_to(self.seen.get(name, False), (num_seeds,))
            # finite at an earlier update of this chunk (or before it), per seed and update
            earlier = before[:, None] | (np.cumsum(finite, axis=1) - finite > 0)
            bad = active & (np.isinf(values) | (np.isnan(values) & earlier))
            found += self._first(bad, len(found), f"loss {name}", values)
            self.seen[name] = before | finite.any(axis=1)
        if found:
            u, seed, _, quantity, value = min(found)
            raise DivergenceError(first_update + u + 1, self.tc.algorithm, quantity, value, seed)
        flags = jax.device_get(self.finite_params(runner))
        for name, ok in flags.items():
            ok = np.asarray(ok)
            if not ok.all():
                raise DivergenceError(
                    first_update + size,
                    self.tc.algorithm,
                    f"parameter {name}",
                    "not finite",
                    int(np.argmin(ok)),
                )

    @staticmethod
    def _first(bad: np.ndarray, order: int, quantity: str, values: np.ndarray) -> list[tuple]:
        """The earliest (update, seed) where ``bad`` [S, U] holds, as a candidate."""
        if not bad.any():
            return []
        seeds, updates = np.nonzero(bad)
        i = np.lexsort((seeds, updates))[0]
        u, seed = int(updates[i]), int(seeds[i])
        return [(u, seed, order, quantity, float(values[seed, u]))]
