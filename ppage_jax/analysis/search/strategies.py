"""Search strategies from evosax (ask/tell evolution strategies in JAX), in the unit cube.

:class:`Strategy` wraps one of evosax's algorithms over ``[0, 1]^d`` (the search space's unit
coordinates, :mod:`.space`): ``ask(generation)`` proposes a population (float64[P, d], the
key folded from the search seed and the generation, so a search replays exactly) and
``tell(losses)`` gives the ranks of the population back to the algorithm (lower is better;
infeasible candidates are given the worst ranks by the caller). Only ranks reach the
algorithm: CMA-ES and SNES shape fitness by rank anyway, and a rank cannot be fooled by the
scale of the task metric.

Strategies (:data:`STRATEGIES`): ``cma_es`` (evosax ``CMA_ES``), ``snes`` (evosax ``SNES``),
``random`` (evosax ``RandomSearch``: every generation a fresh sample of the start
distribution, the baseline every strategy is compared with) and ``pbt`` (population-based
training, :mod:`.pbt`: not an evosax algorithm; its first population is the random search's
first generation). **Equal starts**: every strategy's first generation is drawn from the
same distribution, a normal with mean ``start`` (unit coordinates: the box's centre by
default, or a declared prior) and standard deviation ``std`` in every coordinate; CMA-ES and
SNES then adapt it, random search keeps drawing from it. A draw outside the cube is clipped
to the bounds when it becomes a design (:mod:`.space`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np


def require_evosax():
    """``evosax.algorithms``; an ImportError naming the ``search`` extra when evosax is not
    installed (checked before a search writes anything)."""
    try:
        import evosax.algorithms as algorithms
    except ImportError:
        raise ImportError(
            "ppage-jax search needs evosax, the 'search' extra: pip install 'ppage_jax[search]'"
        ) from None
    return algorithms


@dataclasses.dataclass(frozen=True)
class StrategyInfo:
    """What a strategy needs: the evosax class name, the smallest population it can rank
    sensibly, and whether it starts from a mean (the base design)."""

    cls: str
    min_population: int
    uses_mean: bool
    about: str


STRATEGIES: dict[str, StrategyInfo] = {
    "cma_es": StrategyInfo(
        "CMA_ES", 4, True, "CMA-ES (evosax): covariance-matrix adaptation from the start"
    ),
    "snes": StrategyInfo(
        "SNES", 4, True, "SNES (evosax): separable natural evolution strategy from the start"
    ),
    "random": StrategyInfo(
        "RandomSearch", 1, False, "random search (evosax): the start distribution, every time"
    ),
    "pbt": StrategyInfo(
        "", 4, False, "population-based training: exploit and explore between intervals"
    ),
}
EVOSAX = tuple(name for name, info in STRATEGIES.items() if info.cls)


def rank_fitness(losses: Sequence[float], feasible: Sequence[bool]) -> np.ndarray:
    """float32[P] ranks (0 = best): every feasible candidate by loss (lower is better), then
    every infeasible one by loss; ties by position. NaN losses rank after every number."""
    loss = np.asarray(losses, np.float64)
    ok = np.asarray(feasible, bool)
    safe = np.where(np.isnan(loss), np.inf, loss)
    order = sorted(range(len(loss)), key=lambda i: (not ok[i], safe[i], i))
    ranks = np.empty(len(loss), np.float32)
    ranks[order] = np.arange(len(loss), dtype=np.float32)
    return ranks


class Strategy:
    """An evosax algorithm over the unit cube ``[0, 1]^dims`` (see the module docstring)."""

    def __init__(
        self,
        name: str,
        population: int,
        dims: int,
        seed: int = 0,
        start: Sequence[float] | None = None,
        std: float = 0.25,
    ):
        algorithms = require_evosax()
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r}; choose one of {list(STRATEGIES)}")
        # pbt draws its first population as random search does (then trains it, .pbt)
        info = STRATEGIES[name]
        if population < info.min_population:
            raise ValueError(
                f"strategy {name!r} needs a population of at least {info.min_population}"
            )
        self.name, self.population, self.dims, self.seed = name, population, dims, seed
        solution = jnp.zeros(dims, jnp.float32)
        mean = jnp.full(dims, 0.5, jnp.float32) if start is None else jnp.asarray(start)
        mean = jnp.asarray(mean, jnp.float32)
        cls = getattr(algorithms, info.cls or "RandomSearch")
        if not info.cls or name == "random":
            scale = jnp.asarray(std, jnp.float32)

            def sample(key: jax.Array) -> jax.Array:
                """One draw of the start distribution (the other strategies' first one)."""
                return mean + scale * jax.random.normal(key, (dims,), jnp.float32)

            self.algo = cls(population, solution, sampling_fn=sample)
            self.params = self.algo.default_params
        else:
            self.algo = cls(population, solution)
            self.params = self.algo.default_params.replace(std_init=jnp.asarray(std, jnp.float32))
        key = jax.random.fold_in(jax.random.PRNGKey(seed), 0)
        self.state = self.algo.init(key, jnp.asarray(mean, jnp.float32), self.params)
        self._asked: jax.Array | None = None
        self.generation = 0

    def _key(self, generation: int, stage: int) -> jax.Array:
        return jax.random.fold_in(
            jax.random.fold_in(jax.random.PRNGKey(self.seed), generation + 1), stage
        )

    def ask(self) -> np.ndarray:
        """float64[P, d]: this generation's population in unit coordinates (not clipped)."""
        population, self.state = self.algo.ask(
            self._key(self.generation, 0), self.state, self.params
        )
        self._asked = population
        return np.asarray(population, np.float64)

    def tell(self, fitness: Sequence[float] | np.ndarray) -> None:
        """Give the asked population's fitness (lower is better; ranks from
        :func:`rank_fitness`) and move to the next generation."""
        if self._asked is None:
            raise RuntimeError("tell() before ask()")
        self.state, _ = self.algo.tell(
            self._key(self.generation, 1),
            self._asked,
            jnp.asarray(fitness, jnp.float32),
            self.state,
            self.params,
        )
        self._asked = None
        self.generation += 1

    def mean(self) -> np.ndarray | None:
        """The distribution's mean (unit coordinates), None for random search."""
        if not STRATEGIES[self.name].uses_mean:
            return None
        return np.asarray(self.state.mean, np.float64)
