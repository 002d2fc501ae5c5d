"""Shared type aliases for the public array shapes, and the pytree dataclass helper.

Shapes use ``A`` agents, ``F`` observation features, ``T`` reward terms, ``K`` obstacles and
``E`` a batch of grids. The aliases are documentation for readers and type checkers; at run
time they are all ``jax.Array``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self, TypeAlias, TypeVar, dataclass_transform

import jax

Key: TypeAlias = jax.Array  # a PRNG key
Actions: TypeAlias = jax.Array  # int32[A], predators first
Observations: TypeAlias = jax.Array  # float32[A, F]
Rewards: TypeAlias = jax.Array  # float32[A]
RewardTerms: TypeAlias = jax.Array  # float32[A, T] in env.reward_terms order
AgentMask: TypeAlias = jax.Array  # bool[A]
Flag: TypeAlias = jax.Array  # bool scalar (terminated, truncated)
GlobalState: TypeAlias = jax.Array  # float32[4A + H*W]
Frame: TypeAlias = jax.Array  # uint8[H_px, W_px, 3]
# step info: reward_terms float32[A, T], captured, ...; the auto-reset wrappers add
# final_obs and final_state (a State)
Info: TypeAlias = dict[str, Any]
# The same for a batch of E grids (BatchedAutoResetEnv).
BatchActions: TypeAlias = jax.Array  # int32[E, A]
BatchObservations: TypeAlias = jax.Array  # float32[E, A, F]
BatchRewards: TypeAlias = jax.Array  # float32[E, A]
BatchFlags: TypeAlias = jax.Array  # bool[E]

_T = TypeVar("_T")


def static_field(**kwargs: Any) -> Any:
    """A dataclass field that is static pytree metadata (hashed by ``jit``, never traced)."""
    return dataclasses.field(metadata={"static": True}, **kwargs)


class Replaceable:
    """The typed ``replace`` of a frozen dataclass: a base for the classes decorated with
    :func:`pytree_dataclass` (or ``flax.struct.dataclass``), so that type checkers know it."""

    def replace(self, **changes: Any) -> Self:
        """A copy with the given fields replaced."""
        # a dataclass once decorated (pyright cannot see that)
        return dataclasses.replace(self, **changes)  # pyright: ignore[reportArgumentType]


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, static_field))
def pytree_dataclass(cls: type[_T]) -> type[_T]:
    """A frozen dataclass registered as a JAX pytree, with a ``replace`` method.

    Fields are array leaves unless declared with :func:`static_field`. The same job as
    ``flax.struct.dataclass``, without importing flax into the simulator core. Derive the
    class from :class:`Replaceable` for type checkers to see ``replace``.
    """
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)  # pyright: ignore[reportArgumentType]
    meta = [f.name for f in fields if f.metadata.get("static", False)]
    data = [f.name for f in fields if not f.metadata.get("static", False)]

    def replace(self: Any, **changes: Any) -> Any:
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)

    cls.replace = replace  # type: ignore[attr-defined]
    return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
