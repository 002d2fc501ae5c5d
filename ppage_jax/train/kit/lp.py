"""A small dense linear-programme solver that runs batched on device.

:func:`maximize` solves ``max c.x  s.t.  A x <= b, x >= 0`` with ``b >= 0`` (the slack basis
is feasible, so no phase 1 is needed) by the tableau simplex method: Dantzig's entering rule
(most negative reduced cost) and the minimum-ratio leaving rule, ties broken towards the
largest pivot, which keeps the tableau well conditioned on the many degenerate vertices such
programmes have. A pivot entry must exceed ``pivot_tol`` times its column's largest entry,
so that round-off in float32 data (entries that are zero in exact arithmetic) never becomes
a pivot.

- The loop is a ``lax.while_loop`` capped at ``max_iter`` pivots: jittable and vmappable
  (under ``vmap`` the batch loops until every member has converged; converged members stop
  changing). Every iterate is a vertex of the feasible set, so even a capped run returns a
  feasible point (up to round-off).
- The tableau is float64 inside a ``jax.enable_x64`` scope (inputs and outputs stay float32):
  float32 pivoting accumulates enough error on these degenerate programmes to stop at wrong
  vertices. Accelerators without float64 (TPUs) are therefore not supported.

Meant for programmes of a few hundred variables at most, such as the correlated-equilibrium
programme of a small stage game.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppage_jax.types import Replaceable, pytree_dataclass

# A reduced cost below -COST_TOL improves the objective; ratios within RATIO_TOL of the
# minimum tie; PIVOT_TOL is the default relative pivot tolerance.
COST_TOL = 1e-9
RATIO_TOL = 1e-12
PIVOT_TOL = 1e-5


@pytree_dataclass
class Solution(Replaceable):
    """What :func:`maximize` returns."""

    x: jax.Array  # float32[n]: the vertex reached (clipped at 0)
    value: jax.Array  # float32: c.x
    converged: jax.Array  # bool: optimal within max_iter pivots
    pivots: jax.Array  # int32: pivots taken


def maximize(
    c: jax.Array, a: jax.Array, b: jax.Array, max_iter: int = 1000, pivot_tol: float = PIVOT_TOL
) -> Solution:
    """Maximise ``c.x`` over ``{x >= 0 : a x <= b}``; ``c`` float[n], ``a`` float[m, n],
    ``b`` float[m] with ``b >= 0``. The feasible set must be bounded."""
    m, n = a.shape
    with jax.enable_x64(True):
        f64 = jnp.float64
        tableau = jnp.concatenate(
            [
                jnp.concatenate([a.astype(f64), jnp.eye(m, dtype=f64), b.astype(f64)[:, None]], 1),
                jnp.concatenate([-c.astype(f64), jnp.zeros(m + 1, f64)])[None, :],
            ]
        )
        index = jnp.arange(n + m, dtype=jnp.int32)

        def first(mask: jax.Array) -> jax.Array:
            # the lowest index where mask holds (argmin/argmax's variadic reduction loses the
            # float64 scope under vmap, so they are spelled out with plain min reductions)
            return jnp.where(mask, index[: mask.shape[0]], n + m).min()

        def improvable(t: jax.Array) -> jax.Array:
            return (t[-1, :-1] < -COST_TOL).any()

        def cond(carry):
            t, _, it, stuck = carry
            return improvable(t) & (it < max_iter) & ~stuck

        def body(carry):
            t, basis, it, _ = carry
            costs = t[-1, :-1]
            j = first(costs == costs.min())  # entering: Dantzig
            col, rhs = t[:-1, j], jnp.maximum(t[:-1, -1], 0.0)
            eligible = col > pivot_tol * jnp.maximum(jnp.abs(col).max(), 1.0)
            ratio = jnp.where(eligible, rhs / jnp.where(eligible, col, 1.0), jnp.inf)
            tied = eligible & (ratio <= ratio.min() + RATIO_TOL)
            pivots = jnp.where(tied, col, -jnp.inf)
            r = first(pivots == pivots.max())  # leaving row
            stuck = ~eligible.any()  # no usable pivot: keep the vertex reached
            pivot_row = t[r] / jnp.where(stuck, 1.0, t[r, j])
            factors = t[:, j].at[r].set(0.0)
            pivoted = (t - factors[:, None] * pivot_row[None, :]).at[r].set(pivot_row)
            return (
                jnp.where(stuck, t, pivoted),
                jnp.where(stuck, basis, basis.at[r].set(j)),
                it + 1,
                stuck,
            )

        t, basis, pivots, _ = jax.lax.while_loop(
            cond,
            body,
            (
                tableau,
                jnp.arange(n, n + m, dtype=jnp.int32),
                jnp.zeros((), jnp.int32),
                jnp.bool_(False),
            ),
        )
        x = jnp.maximum(jnp.zeros(n + m, f64).at[basis].set(t[:-1, -1])[:n], 0.0)
        value = (c.astype(f64) * x).sum()
        converged = ~improvable(t)
    return Solution(
        x=x.astype(jnp.float32), value=value.astype(jnp.float32), converged=converged, pivots=pivots
    )
