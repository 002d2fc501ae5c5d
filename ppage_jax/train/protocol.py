"""The algorithm contract as code: what a module registered as an algorithm provides.

An algorithm is a module (modules satisfy protocols, PEP 544). Optional capabilities are
declared, never probed: ``STOCHASTIC = True`` promises ``sample_actions``
(:class:`StochasticAlgorithm`); ``READS_STATE = True`` promises that ``greedy_actions`` and
``sample_actions`` take the grids' states too (keyword ``state``, batched as ``obs``), as a
policy with a baseline prior needs (:func:`acting` passes it).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    import jax

    from ppage_jax.config.experiment.base import Hyperparams
    from ppage_jax.state import EnvParams, State
    from ppage_jax.train.config import TrainConfig


@runtime_checkable
class Algorithm(Protocol):
    """A training algorithm. Pure and jittable; ``tc`` is static, ``params`` traced."""

    Hyperparams: type[Hyperparams]  # its declaration (ppage_jax.config.experiment.base)
    STOCHASTIC: bool  # True: it also implements StochasticAlgorithm

    def init(self, key: jax.Array, tc: TrainConfig, params: EnvParams) -> Any:
        """The runner state before the first update."""
        ...

    def update(self, runner: Any, tc: TrainConfig, params: EnvParams) -> tuple[Any, dict]:
        """One update: the new runner state and a metrics row."""
        ...

    def train(self, key: jax.Array, tc: TrainConfig, params: EnvParams) -> tuple[Any, dict]:
        """``init`` then ``tc.num_updates`` updates: (runner state, stacked metrics). The
        built-in algorithms also take traced ``hyperparams`` (:mod:`.traced`); every one may
        run through :func:`ppage_jax.train.kit.loop.train_loop`, which binds them into
        ``tc.hp``, so ``init``/``update`` must read traced floats from ``tc.hp`` with array
        operations (and optimiser settings through :mod:`ppage_jax.train.kit.optim`)."""
        ...

    def policy_state(self, runner: Any) -> Any:
        """What the greedy policy needs (and what checkpoints hold)."""
        ...

    def greedy_actions(
        self, tc: TrainConfig, policy: Any, key: jax.Array, obs: jax.Array
    ) -> jax.Array:
        """Greedy actions int32[E, A] of the learning roles (0 for the others)."""
        ...


@runtime_checkable
class StochasticAlgorithm(Algorithm, Protocol):
    """An algorithm whose learned policy is a distribution one can sample."""

    def sample_actions(
        self, tc: TrainConfig, policy: Any, key: jax.Array, obs: jax.Array
    ) -> jax.Array:
        """Actions int32[E, A] sampled from the learned policy (0 for the other roles)."""
        ...


def members(protocol: type) -> list[str]:
    """The attribute names a protocol asks for."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (Protocol, object, type(protocol)) or not getattr(cls, "_is_protocol", False):
            continue
        names.update(getattr(cls, "__annotations__", {}))
        names.update(n for n, v in vars(cls).items() if callable(v) and not n.startswith("_"))
    return sorted(names)


def missing_members(module: ModuleType) -> list[str]:
    """What ``module`` lacks to be an :class:`Algorithm` (and a :class:`StochasticAlgorithm`
    when it declares ``STOCHASTIC = True``); empty when it satisfies the contract."""
    wanted = members(StochasticAlgorithm if getattr(module, "STOCHASTIC", False) else Algorithm)
    return [name for name in wanted if not hasattr(module, name)]


def acting(module: ModuleType | Algorithm, greedy: bool) -> Callable[..., jax.Array]:
    """``(tc, policy, key, obs[E, A, F], state[E]) -> int32[E, A]``: the module's greedy (or
    sampled) actions, given the states only when it declares ``READS_STATE = True``."""
    act = module.greedy_actions if greedy else cast(StochasticAlgorithm, module).sample_actions
    if getattr(module, "READS_STATE", False):
        return act

    def without_state(tc: TrainConfig, policy: Any, key: jax.Array, obs: jax.Array, state: State):
        return act(tc, policy, key, obs)

    return without_state


def acting_one(module: ModuleType | Algorithm, greedy: bool) -> Callable[..., jax.Array]:
    """``(tc, policy, key, obs[A, F], state) -> int32[A]``: :func:`acting` for one grid."""
    import jax
    import jax.numpy as jnp

    act = acting(module, greedy)

    def one_grid(tc: TrainConfig, policy: Any, key: jax.Array, obs: jax.Array, state: State):
        batched = jax.tree.map(lambda a: a[None], (obs, state))
        return act(tc, policy, key, *batched)[0].astype(jnp.int32)

    return one_grid
