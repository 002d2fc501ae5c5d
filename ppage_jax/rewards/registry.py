"""Registry of reward terms and potentials, and the read-only context a term sees."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax

from ppage_jax.config.schema import declare_term, forget_term
from ppage_jax.defaults import APPLIES_TO
from ppage_jax.state import CaptureEvents, State
from ppage_jax.types import pytree_dataclass, static_field

# Said after the known terms when a config names a term that is not registered.
UNREGISTERED_HINT = (
    "(register it with @pj.register_reward in a module and pass --import MODULE_OR_FILE, "
    "or install a package with a ppage_jax.plugins entry point)"
)
# A term's declared range of raw values per sub-step: ``(low, high)``, or a function of its
# params and the grid size giving them (``lambda params, size: (-2.0 * (size - 1), 0.0)``).
Bounds = tuple[float, float] | Callable[[Mapping[str, float], int], tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class Choice:
    """A string-valued term param; traced as the int32 index of the chosen option."""

    options: tuple[str, ...]
    default: str

    def index(self, value: str) -> int:
        return self.options.index(value)


@pytree_dataclass
class PotentialContext:
    """What a potential phi(state, ctx) may read besides the state: layout and its params."""

    is_predator: jax.Array
    params: Mapping[str, jax.Array]
    grid_size: int = static_field()

    @property
    def is_prey(self) -> jax.Array:
        return ~self.is_predator


@pytree_dataclass
class RewardContext(PotentialContext):
    """Read-only view a reward term gets for one sub-step.

    ``prev`` and ``state`` are the states before and after the sub-step's move and capture;
    ``events`` the sub-step's captures; ``is_predator`` and ``grid_size`` the static layout;
    ``params`` the term's own parameters from YAML (traced scalars).
    """

    prev: State
    state: State
    events: CaptureEvents

    @property
    def free_prey(self) -> jax.Array:
        """bool[A]: prey not captured after this sub-step."""
        return self.is_prey & ~self.state.captured

    @property
    def on_obstacle(self) -> jax.Array:
        """bool[A]: agents standing on an obstacle cell after this sub-step."""
        x, y = self.state.positions[:, 0], self.state.positions[:, 1]
        return self.state.obstacle_map[y, x]


@dataclasses.dataclass(frozen=True)
class TermSpec:
    """A registered term: its function, params with defaults, default role and kind."""

    name: str
    fn: Callable[..., jax.Array]
    params: Mapping[str, Any]
    applies_to: str
    potential: bool
    doc: str
    bounds: Bounds | None = None

    def defaults(self) -> dict[str, Any]:
        """The declared param defaults as YAML writes them (a Choice's default option)."""
        return {k: (v.default if isinstance(v, Choice) else v) for k, v in self.params.items()}

    def value_bounds(self, params: Mapping[str, float], size: int) -> tuple[float, float] | None:
        """The raw value's declared range per sub-step for these ``params`` on a ``size`` grid
        (None when the term declares none)."""
        if self.bounds is None:
            return None
        low, high = self.bounds(params, size) if callable(self.bounds) else self.bounds
        return float(low), float(high)


_TERMS: dict[str, TermSpec] = {}


def _register(
    name: str,
    potential: bool,
    params: Mapping[str, Any] | None,
    applies_to: str,
    bounds: Bounds | None = None,
):
    if not isinstance(name, str) or not name:
        raise TypeError(f"a reward term name must be a non-empty string, got {name!r}")
    if applies_to not in APPLIES_TO:
        raise ValueError(f"applies_to must be one of {APPLIES_TO}, got {applies_to!r}")
    params = dict(params or {})
    for key, default in params.items():
        if not isinstance(default, (int, float, Choice)) or isinstance(default, bool):
            raise TypeError(
                f"param {key!r} of {name!r}: default must be a number or a Choice, got {default!r}"
            )
    if bounds is not None and not callable(bounds):
        ok = isinstance(bounds, tuple) and len(bounds) == 2
        if not ok or not all(isinstance(b, (int, float)) for b in bounds) or bounds[0] > bounds[1]:
            raise ValueError(
                f"bounds of {name!r} must be (low, high) numbers with low <= high, or a "
                f"function (params, size) -> (low, high); got {bounds!r}"
            )

    def decorator(fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
        if not callable(fn):
            raise TypeError(f"reward term {name!r} must be callable, got {fn!r}")
        if name in _TERMS:
            raise ValueError(f"reward term {name!r} is already registered")
        _TERMS[name] = TermSpec(
            name, fn, params, applies_to, potential, (fn.__doc__ or "").strip(), bounds
        )
        declare_term(name, applies_to, [k for k, v in params.items() if not isinstance(v, Choice)])
        return fn

    return decorator


def register_reward(
    name: str,
    *,
    params: Mapping[str, Any] | None = None,
    applies_to: str = "all",
    bounds: Bounds | None = None,
):
    """Register ``term(ctx: RewardContext) -> float32[A]`` (raw, unweighted) as ``name``.

    ``params`` declares the term's YAML params and their defaults (numbers, or a
    :class:`Choice`); they reach the term as traced scalars in ``ctx.params``.
    ``applies_to`` is the default role mask (``predator``, ``prey`` or ``all``).
    ``bounds`` declares the raw value's range per sub-step (:data:`Bounds`), which the
    reward audit's stall margin reads (the largest payment a sub-step can make) and
    ``ppage_jax.testing.check_reward_term`` checks.
    """
    return _register(name, False, params, applies_to, bounds)


def register_potential(
    name: str, *, params: Mapping[str, Any] | None = None, applies_to: str = "all"
):
    """Register a potential ``phi(state, ctx: PotentialContext) -> float32[A]``.

    The term pays ``gamma * phi(s') * (1 - terminated) - phi(s)`` once per turn, so its
    discounted sum over an episode telescopes; phi is zeroed on termination, never on
    truncation. A one-argument ``phi(state)`` is accepted too.
    """
    return _register(name, True, params, applies_to)


def unregister_reward(name: str) -> None:
    """Remove a registered term (for notebooks and tests that define throwaway terms)."""
    _TERMS.pop(name, None)
    forget_term(name)


def reward_terms() -> tuple[str, ...]:
    """Names of every registered reward term and potential."""
    return tuple(sorted(_TERMS))


def known_terms_help() -> str:
    """What a refusal of an unknown term ends with: the known terms and how to add one."""
    return f"known terms: {list(reward_terms())} {UNREGISTERED_HINT}"


def get_term(name: str) -> TermSpec:
    """The registered term ``name``; an unknown name lists the known ones."""
    try:
        return _TERMS[name]
    except KeyError:
        raise KeyError(f"unknown reward term {name!r}; {known_terms_help()}") from None


def term_of(fn: Callable) -> TermSpec | None:
    """The registered term whose function is ``fn``; None when it is not registered."""
    return next((spec for spec in _TERMS.values() if spec.fn is fn), None)


@contextlib.contextmanager
def registered_for_now(
    fn: Callable[..., jax.Array], params: Mapping[str, Any] | None = None, potential: bool = False
) -> Iterator[TermSpec]:
    """``fn`` registered (a term, or a potential) under the first free name of its own
    (``fn.__name__``, then ``<name>_2``, ...) with ``params`` for the block, then removed."""
    base = getattr(fn, "__name__", "term")
    name = next(n for n in (base, *(f"{base}_{i}" for i in range(2, 1000))) if n not in _TERMS)
    _register(name, potential, params, "all")(fn)
    try:
        yield _TERMS[name]
    finally:
        unregister_reward(name)
