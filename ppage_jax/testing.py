"""A test kit for reward terms and observation builders: the contract every one must meet.

:func:`check_reward_term` and :func:`check_observation_builder` run the contract on any
registered (or not yet registered) term or builder and raise :class:`ContractError`, an
``AssertionError``, whose message names the rule broken. They work in a notebook, a script
or a pytest test alike; the project's own contract tests call them for every shipped term
and builder.

The inputs are sampled sub-steps (:func:`sample_substeps`): a few short random walks on
``env`` (by default a 5x5 grid, 2 predators against 2 prey, 3 obstacles that do not block),
some prey flagged captured, then one sub-step of move and capture (predators chasing); and
the same states with every prey captured. A term sees them through the same ``RewardContext`` (a
potential through the same ``PotentialContext``) as inside ``env.step``; its params are the
values ``env`` configures for it, else its declared defaults.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax import stages
from ppage_jax.config.env_spec import EnvSpec, RewardTerm
from ppage_jax.env import GridWorld
from ppage_jax.observations.registry import ObservationBuilder, make_observation
from ppage_jax.rewards.compose import param_value, term_value
from ppage_jax.rewards.registry import (
    CaptureEvents,
    Choice,
    TermSpec,
    get_term,
    registered_for_now,
    term_of,
)
from ppage_jax.state import EnvParams, State
from ppage_jax.types import Replaceable, pytree_dataclass

__all__ = [
    "DEFAULT_ENV",
    "OBSERVATION_RULES",
    "REWARD_RULES",
    "ContractError",
    "ContractReport",
    "SubSteps",
    "check_observation_builder",
    "check_reward_term",
    "default_env",
    "sample_substeps",
]

# The rules reward terms and observation builders share, in the order both run them.
_SHARED_RULES = (
    "shape",
    "dtype",
    "inputs_untouched",
    "finite",
    "deterministic",
    "jit",
    "vmap",
)
REWARD_RULES = ("runs", "params", *_SHARED_RULES, "zero_without_prey", "bounds", "docstring")
OBSERVATION_RULES = ("builds", "runs", *_SHARED_RULES)
MUST_PASS = ("runs", "builds", "finite")  # every other rule can be skipped
DEFAULT_ENV = EnvSpec(
    size=5,
    obstacle_percentage=12.0,  # floor(0.12 * 25) = 3 obstacles
    block_agents_by_obstacles=False,  # agents may stand on obstacles
    n_predators=2,
    n_prey=2,
    prey_speed=1,
    capture_threshold=2,
    observation_type="local_only",
    rewards=(RewardTerm("base"),),
)
MAX_WALK = 6  # sampled states are 0..MAX_WALK random sub-steps from a reset
FLAG_RATE = 0.25  # share of the still-free prey flagged captured in the sampled states
# Shares of chasing predators and of prey staying put, in the walks and in the sampled
# sub-step (which then often captures).
WALK, LAST = (0.3, 0.0), (1.0, 0.5)
RTOL = ATOL = 1e-5


class ContractError(AssertionError):
    """A reward term or observation builder broke its contract; ``rule`` names the rule."""

    def __init__(self, subject: str, rule: str, detail: str):
        self.subject, self.rule, self.detail = subject, rule, detail
        super().__init__(f"{subject} breaks the {rule!r} rule: {detail}")


@pytree_dataclass
class SubSteps(Replaceable):
    """Sub-step inputs (batched: a leading axis on every leaf): the state before the
    sub-step's move and capture, the state after, and the sub-step's capture events."""

    prev: State
    state: State
    events: CaptureEvents

    def __len__(self) -> int:
        return int(self.state.positions.shape[0])

    def one(self, i: int) -> SubSteps:
        """Sample ``i`` without the batch axis."""
        return jax.tree.map(lambda x: x[i], self)


@dataclasses.dataclass(frozen=True)
class ContractReport:
    """What a passed check ran: the rules checked, the sampled inputs and the outputs
    (float32[B, A] for a term, float32[B, A, F] for a builder), with and without free prey."""

    subject: str
    rules: tuple[str, ...]
    samples: SubSteps
    values: np.ndarray
    samples_without_prey: SubSteps
    values_without_prey: np.ndarray


@functools.cache
def default_env() -> GridWorld:
    """The small env the checks use when none is given (see ``DEFAULT_ENV``)."""
    return GridWorld(DEFAULT_ENV)


# ----------------------------------------------------------------------------- sampling
@functools.lru_cache(maxsize=16)
def _sampler(env: GridWorld) -> Callable[..., tuple[SubSteps, SubSteps]]:
    """Jitted ``(key, walk, u) -> (sub-step, sub-step with every prey captured)``, one grid."""
    layout = env.layout
    n = layout.num_agents
    is_predator = jnp.asarray(layout.is_predator)
    table = jnp.asarray(env.action_table)

    def directions(u: jax.Array, state: State, chase: float, stay: float) -> jax.Array:
        """Random moves (uniforms ``u`` float[A, 3 + D]), except that a share ``chase`` of the
        predators take the move nearest to a free prey and a share ``stay`` of the prey stay
        put."""
        actions = jnp.minimum((u[:, 0] * table.shape[0]).astype(jnp.int32), table.shape[0] - 1)
        reach = jnp.clip(state.positions[:, None, :] + table[None], 0, layout.size - 1)
        gap = jnp.abs(reach[:, :, None, :] - state.positions[None, None, :, :]).sum(-1)
        free_prey = ~is_predator & ~state.captured
        nearest = jnp.where(free_prey[None, None, :], gap, 4 * layout.size).min(-1)
        chasing = is_predator & (u[:, 1] < chase)  # u[:, 3:] breaks ties among equal moves
        actions = jnp.where(chasing, jnp.argmin(nearest + u[:, 3:], axis=1), actions)
        staying = ~is_predator & (u[:, 2] < stay)
        return jnp.where(staying[:, None], 0, table[actions])

    def substep(
        u: jax.Array, state: State, chase: float, stay: float
    ) -> tuple[State, CaptureEvents]:
        moved = env.move_agents(state, jnp.ones(n, bool), directions(u, state, chase, stay))
        captured, events = stages.capture(moved, state.captured, is_predator)
        return state.replace(
            positions=moved,
            captured=captured,
            captures_total=state.captures_total + events.num_captured,
        ), events

    def one(key: jax.Array, walk: jax.Array, u: jax.Array) -> tuple[SubSteps, SubSteps]:
        """``u``: float[MAX_WALK + 2, A, 3 + D] uniforms, one block per walk sub-step, one for
        the sampled sub-step and one for the flags (drawn by NumPy: random bits compile slowly
        on CPU)."""
        _, start = env.reset(key)

        def body(t, state):
            after, _ = substep(u[t], state, *WALK)
            return jax.tree.map(lambda a, b: jnp.where(t < walk, a, b), after, state)

        state = lax.fori_loop(0, MAX_WALK, body, start).replace(turn=walk)

        def from_captured(captured: jax.Array) -> SubSteps:
            prev = state.replace(captured=captured, captures_total=captured.sum(dtype=jnp.int32))
            after, events = substep(u[MAX_WALK], prev, *LAST)
            return SubSteps(prev=prev, state=after, events=events)

        flagged = ~is_predator & (u[MAX_WALK + 1, :, 0] < FLAG_RATE)
        return from_captured(state.captured | flagged), from_captured(~is_predator)

    return jax.jit(one)


@functools.lru_cache(maxsize=16)
def sample_substeps(env: GridWorld, samples: int = 8, seed: int = 0) -> tuple[SubSteps, SubSteps]:
    """``samples`` random sub-steps on ``env`` (states 0..6 random sub-steps from a reset,
    some prey flagged captured), and the same with every prey captured beforehand."""
    if not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an int >= 1, got {samples!r}")
    rng = np.random.default_rng(seed)
    sample = _sampler(env)  # one grid at a time: one compile per env, whatever ``samples``
    shape = (MAX_WALK + 2, env.num_agents, 3 + env.num_actions)
    drawn = [
        sample(
            jax.random.PRNGKey(int(rng.integers(2**31))),
            jnp.int32(i % (MAX_WALK + 1)),
            jnp.asarray(rng.random(shape), jnp.float32),
        )
        for i in range(samples)
    ]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *drawn)


# ----------------------------------------------------------------------------- rule checks
class _Rules:
    """Raises ContractError for a broken rule unless the caller skipped it."""

    def __init__(self, subject: str, rules: tuple[str, ...], skip: Iterable[str]):
        skip = tuple(skip)
        for rule in skip:
            if rule not in rules or rule in MUST_PASS:
                allowed = [r for r in rules if r not in MUST_PASS]
                raise ValueError(f"cannot skip rule {rule!r}; rules that can be skipped: {allowed}")
        self.subject, self.skip = subject, skip
        self.checked = tuple(r for r in rules if r not in skip)

    def fail(self, rule: str, detail: str) -> None:
        if rule not in self.skip:
            raise ContractError(self.subject, rule, detail)

    def run(self, rule: str, fn: Callable, *args: Any) -> Any:
        """``fn(*args)``; an exception breaks ``rule`` (and ends the check)."""
        try:
            return fn(*args)
        except ContractError:
            raise
        except Exception as err:  # any failure of the user's code breaks the rule
            raise ContractError(self.subject, rule, _describe(err)) from err

    def array(self, out: Any, shape: tuple[int, ...], where: str) -> np.ndarray:
        """Check shape and dtype of one output; returns it as NumPy."""
        got_shape = tuple(getattr(out, "shape", ()))
        if got_shape != shape:
            self.fail("shape", f"returns shape {got_shape} {where}; expected {shape}")
        dtype = getattr(out, "dtype", type(out))
        if dtype != jnp.float32:
            self.fail(
                "dtype",
                f"returns {dtype} {where}; expected float32 (cast with .astype(jnp.float32))",
            )
        return np.asarray(out)

    def finite(self, values: np.ndarray, where: str) -> None:
        bad = ~np.isfinite(values)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            self.fail("finite", f"returns {values[at]} at index {at} {where}")

    def close(self, rule: str, got: np.ndarray, want: np.ndarray, where: str) -> None:
        if got.shape != want.shape:
            self.fail(rule, f"returns shape {got.shape} {where}; expected {want.shape}")
        elif not np.allclose(got, want, rtol=RTOL, atol=ATOL):
            at = tuple(int(i) for i in np.argwhere(~np.isclose(got, want, RTOL, ATOL))[0])
            self.fail(rule, f"returns {got[at]} at index {at} {where}, but {want[at]} eagerly")


def _describe(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def _snapshot(tree: Any) -> tuple[Any, list[np.ndarray]]:
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, [np.array(leaf, copy=True) for leaf in leaves]


def _check_calls(
    rules: _Rules, fn: Callable, batch: tuple, shared: tuple, shape: tuple[int, ...]
) -> tuple[np.ndarray, Callable]:
    """The rules every per-grid function meets: it runs, returns float32 ``shape``, leaves
    its inputs untouched, is finite and deterministic, and gives the eager values under jit
    and under vmap. ``batch`` args carry a leading sample axis, ``shared`` args do not.
    Returns the eager outputs [B, *shape] and the jitted, vmapped function."""
    n = int(jax.tree.leaves(batch)[0].shape[0])
    samples = [jax.tree.map(lambda x, i=i: x[i], batch) for i in range(n)]
    before = _snapshot((samples[0], shared))
    first = rules.run("runs", fn, *samples[0], *shared)
    treedef, leaves = _snapshot((samples[0], shared))
    if treedef != before[0] or not all(
        a.shape == b.shape and np.array_equal(a, b) for a, b in zip(leaves, before[1], strict=True)
    ):
        rules.fail(
            "inputs_untouched",
            "changed its inputs (state, events or params); a term "
            "or builder must return new arrays, never modify them",
        )
    eager = [rules.array(first, shape, "on sample 0")]
    for i in range(1, n):
        out = rules.run("runs", fn, *samples[i], *shared)
        eager.append(rules.array(out, shape, f"on sample {i}"))
    eager = np.stack(eager)
    rules.finite(eager, "on the sampled states")
    again = np.asarray(rules.run("runs", fn, *samples[0], *shared))
    if again.shape != eager[0].shape or not np.array_equal(again, eager[0], equal_nan=True):
        rules.fail(
            "deterministic",
            "returned different values for the same inputs on a "
            "second call (hidden state, a counter, time or host "
            "randomness?)",
        )
    jitted = jax.jit(fn)
    for i, sample in enumerate(samples):
        got = np.asarray(rules.run("jit", jitted, *sample, *shared))
        rules.close("jit", got, eager[i], f"under jax.jit on sample {i}")
    batched = jax.jit(jax.vmap(fn, in_axes=(0,) * len(batch) + (None,) * len(shared)))
    got = np.asarray(rules.run("vmap", batched, *batch, *shared))
    rules.close("vmap", got, eager, "under jax.vmap over the samples")
    return eager, batched


# ----------------------------------------------------------------------------- reward terms
@contextlib.contextmanager
def _term_spec(
    term: str | Callable, params: Mapping[str, Any] | None, potential: bool
) -> Iterator[TermSpec]:
    """The registered spec of ``term`` (a name or a function); an unregistered function is
    registered for the check (with ``params`` and ``potential``) and removed afterwards."""
    if isinstance(term, str):
        spec = get_term(term)
    elif not callable(term):
        raise TypeError(f"term must be a registered name or a function, got {term!r}")
    else:
        spec = term_of(term)
    if spec is None:
        assert not isinstance(term, str)  # a name is registered (get_term raised otherwise)
        with registered_for_now(term, params, potential) as spec:
            yield spec
        return
    if params is not None:
        raise ValueError(
            f"{spec.name!r} is registered with its own params; pass params "
            "only for an unregistered function"
        )
    yield spec


def _check_bounds(
    rules: _Rules, spec: TermSpec, env: GridWorld, values: dict[str, jax.Array], seen: np.ndarray
) -> None:
    """The sampled values lie within the term's declared bounds (no bounds: nothing to check)."""
    floats = {k: float(np.asarray(v)) for k, v in values.items()}
    declared = spec.value_bounds(floats, env.layout.size)
    if declared is None:
        return
    low, high = declared
    outside = (seen < low - ATOL) | (seen > high + ATOL)
    if outside.any():
        at = tuple(int(i) for i in np.argwhere(outside)[0])
        rules.fail(
            "bounds",
            f"pays {seen[at]} to agent {at[1]} on sample {at[0]}, outside its declared bounds "
            f"[{low:g}, {high:g}] (register_reward(..., bounds=...))",
        )


def _term_params(spec: TermSpec, env: GridWorld) -> dict[str, jax.Array]:
    """The traced params ``env`` configures for the term, else its declared defaults."""
    if spec.name in env.reward_terms:
        return dict(env.default_params.reward.term_params[spec.name])
    return {key: param_value(spec, key, v) for key, v in spec.defaults().items()}


def _param_variants(
    spec: TermSpec, values: dict[str, jax.Array]
) -> Iterator[tuple[str, dict[str, jax.Array]]]:
    """Each declared param moved away from its value: every Choice option, and numbers at
    half and at twice-plus-one their value."""
    for key, declared in spec.params.items():
        if isinstance(declared, Choice):
            options = [(repr(o), jnp.int32(i)) for i, o in enumerate(declared.options)]
        else:
            v = float(values[key])
            options = [(repr(x), jnp.float32(x)) for x in (0.5 * v, 2.0 * v + 1.0)]
        for shown, value in options:
            yield f"{key}={shown}", {**values, key: value}


def _term_function(spec: TermSpec, env: GridWorld) -> Callable:
    """f(prev, state, events, params) -> float32[A], calling the term as ``env.step`` does."""
    is_predator = jnp.asarray(env.is_predator)
    size = env.layout.size

    def call(prev, state, events, params):
        return term_value(spec, prev, state, events, is_predator, params, size)

    return call


def _guard_params(rules: _Rules, spec: TermSpec, fn: Callable) -> Callable:
    """``fn`` whose KeyError for a param the term does not declare breaks 'params'."""

    def guarded(*args):
        try:
            return fn(*args)
        except KeyError as err:
            key = err.args[0] if err.args else None
            if isinstance(key, str) and key not in spec.params:
                rules.fail(
                    "params",
                    f"reads param {key!r}, which it does not declare "
                    f"(declared: {sorted(spec.params)}); declare it in "
                    f"register_reward(..., params={{{key!r}: default}})",
                )
            raise

    return guarded


def check_reward_term(
    term: str | Callable,
    env: GridWorld | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    potential: bool = False,
    samples: int = 8,
    seed: int = 0,
    skip: Iterable[str] = (),
) -> ContractReport:
    """Check a reward term (or potential) against the contract; raise :class:`ContractError`
    naming the first rule it breaks.

    The term returns float32[A] (``shape``, ``dtype``) of finite values (``finite``), the
    same for the same inputs (``deterministic``), the same under ``jax.jit`` (``jit``) and
    ``jax.vmap`` (``vmap``) as eagerly, never modifies its inputs (``inputs_untouched``),
    pays 0 once no uncaptured prey is left (``zero_without_prey``), stays within the range it
    declares (``bounds``, when it declares one: the audit's stall margin reads it), runs with
    every declared param moved (``params``) and has a docstring (``docstring``).

    ``term`` is a registered name or a function; an unregistered function is registered for
    the check (declaring ``params``, as a potential if ``potential``) and removed after.
    ``env`` gives the layout (default :func:`default_env`); ``samples`` and ``seed`` the
    sampled sub-steps; ``skip`` rules that do not apply (e.g. ``("zero_without_prey",)``
    for a term that keeps paying a step cost). Returns a :class:`ContractReport`.
    """
    with _term_spec(term, params, potential) as spec:
        env = default_env() if env is None else env
        kind = "potential" if spec.potential else "reward term"
        rules = _Rules(f"{kind} {spec.name!r}", REWARD_RULES, skip)
        fn = _guard_params(rules, spec, _term_function(spec, env))
        values = _term_params(spec, env)
        some, none_left = sample_substeps(env, samples, seed)
        batch = (some.prev, some.state, some.events)
        eager, batched = _check_calls(rules, fn, batch, (values,), (env.num_agents,))
        _check_bounds(rules, spec, env, values, np.asarray(eager))

        without = np.asarray(
            rules.run("runs", batched, none_left.prev, none_left.state, none_left.events, values)
        )
        rules.finite(without, "once every prey is captured")
        if np.abs(without).max(initial=0.0) > ATOL:
            at = tuple(int(i) for i in np.argwhere(np.abs(without) > ATOL)[0])
            rules.fail(
                "zero_without_prey",
                f"pays {without[at]} to agent {at[1]} on sample "
                f"{at[0]} once no uncaptured prey is left; "
                "expected 0",
            )
        for shown, variant in _param_variants(spec, values):
            out = rules.run("params", batched, *batch, variant)
            out = rules.array(out, (len(some), env.num_agents), f"with {shown}")
            if not np.isfinite(out).all():
                rules.fail("params", f"returns non-finite values with {shown}")
        if not spec.doc:
            rules.fail("docstring", "has no docstring; say what it pays to whom")
        return ContractReport(rules.subject, rules.checked, some, eager, none_left, without)


# ----------------------------------------------------------------------------- observations
def _builder(
    rules: _Rules,
    name: str | Callable,
    env: GridWorld,
    params: Mapping[str, Any] | None,
    per_agent: Mapping[str, Mapping[str, Any]] | None,
) -> ObservationBuilder:
    """The builder to check: ``env``'s own when it is configured with ``name`` and no
    params are given, else built for ``env``'s layout (a factory function is called)."""
    configured = env.spec.observation_type
    if name == configured and params is None and per_agent is None:
        return env.observation
    if callable(name) and not isinstance(name, str):
        if per_agent:
            raise ValueError("per_agent needs a registered builder name")
        return rules.run("builds", name, env.layout, **dict(params or {}))
    return rules.run("builds", make_observation, name, env.layout, params, per_agent)


def check_observation_builder(
    name: str | Callable,
    env: GridWorld | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    per_agent: Mapping[str, Mapping[str, Any]] | None = None,
    samples: int = 8,
    seed: int = 0,
    skip: Iterable[str] = (),
) -> ContractReport:
    """Check an observation builder against the contract; raise :class:`ContractError`
    naming the first rule it breaks.

    The builder is built for ``env``'s layout with ``params``/``per_agent`` (its registered
    defaults when omitted; ``builds``) and returns float32 (``dtype``) [A, size] for every
    agent, captured ones included, with ``size`` the product of its ``shape`` when it has
    one (``shape``); finite (``finite``), deterministic (``deterministic``), the same under
    ``jax.jit`` (``jit``) and ``jax.vmap`` (``vmap``), inputs untouched
    (``inputs_untouched``). ``name`` is a registered name or a factory
    ``factory(layout, **params) -> ObservationBuilder``. ``env``, ``samples``, ``seed`` and
    ``skip`` as in :func:`check_reward_term`. Returns a :class:`ContractReport`.
    """
    env = default_env() if env is None else env
    shown = name if isinstance(name, str) else getattr(name, "__name__", repr(name))
    rules = _Rules(f"observation builder {shown!r}", OBSERVATION_RULES, skip)
    builder = _builder(rules, name, env, params, per_agent)
    size = builder.size
    if not isinstance(size, int | np.integer) or size < 1:
        rules.fail("shape", f"declares size {size!r}; expected a positive int")
    if builder.shape is not None and int(np.prod(builder.shape)) != size:
        rules.fail(
            "shape",
            f"declares shape {builder.shape} of {int(np.prod(builder.shape))} "
            f"features but size {size}",
        )

    def observe(state: State, env_params: EnvParams) -> jax.Array:
        return builder(state, env_params)

    some, none_left = sample_substeps(env, samples, seed)
    shape = (env.num_agents, int(size))
    eager, batched = _check_calls(rules, observe, (some.state,), (env.default_params,), shape)
    where = "once every prey is captured"
    one = rules.run("runs", observe, none_left.one(0).state, env.default_params)
    rules.array(one, shape, where)
    without = rules.array(
        rules.run("vmap", batched, none_left.state, env.default_params),
        (len(none_left), *shape),
        f"under jax.vmap {where}",
    )
    rules.finite(without, where)
    return ContractReport(rules.subject, rules.checked, some, eager, none_left, without)
