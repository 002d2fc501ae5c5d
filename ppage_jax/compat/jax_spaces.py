"""Jittable ``Discrete`` and ``Box`` spaces for the JaxMARL adapter.

JaxMARL's wrappers check space types (``CTRolloutManager`` accepts only JaxMARL's or gymnax's
classes), so the adapter uses JaxMARL's own classes when ``jaxmarl`` is installed, else
gymnax's, and only otherwise the minimal classes below (same attributes and methods).
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp

_PROVIDERS = ("jaxmarl.environments.spaces", "gymnax.environments.spaces")


class Discrete:
    """Integers in [0, n) (JaxMARL/gymnax ``Discrete``)."""

    def __init__(self, num_categories: int, dtype=jnp.int32):
        self.n = num_categories
        self.shape = ()
        self.dtype = dtype

    def sample(self, rng: jax.Array) -> jax.Array:
        return jax.random.randint(rng, self.shape, 0, self.n).astype(self.dtype)

    def contains(self, x: jax.Array) -> jax.Array:
        return jnp.logical_and(x >= 0, x < self.n)


class Box:
    """Arrays of a fixed shape within [low, high] (JaxMARL/gymnax ``Box``)."""

    def __init__(self, low, high, shape: tuple[int, ...], dtype=jnp.float32):
        self.low, self.high, self.shape, self.dtype = low, high, tuple(shape), dtype

    def sample(self, rng: jax.Array) -> jax.Array:
        return jax.random.uniform(rng, self.shape, minval=self.low, maxval=self.high).astype(
            self.dtype
        )

    def contains(self, x: jax.Array) -> jax.Array:
        return jnp.logical_and(jnp.all(x >= self.low), jnp.all(x <= self.high))


def space_classes(provider: str = "auto") -> tuple[type, type]:
    """(Discrete, Box): ``"auto"`` takes JaxMARL's, else gymnax's, else the built-in ones;
    ``"jaxmarl"``, ``"gymnax"`` or ``"builtin"`` asks for one."""
    names = {"auto": _PROVIDERS, "jaxmarl": _PROVIDERS[:1], "gymnax": _PROVIDERS[1:], "builtin": ()}
    if provider not in names:
        raise ValueError(f"spaces = {provider!r}: must be one of {list(names)}")
    for module_name in names[provider]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            if provider != "auto":
                raise ImportError(
                    f"spaces = {provider!r} needs the {provider} package (pip install {provider})"
                ) from None
            continue
        return module.Discrete, module.Box
    return Discrete, Box
