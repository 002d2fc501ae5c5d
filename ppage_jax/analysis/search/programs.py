"""The compiled programs of a search: the sweep's train-then-evaluate program
(:func:`ppage_jax.analysis.batch.program.make_program`) compiled once for a fixed number of
runs and called with new inputs (each generation's candidates: traced ``EnvParams`` and
hyperparameters), so generations never recompile; and PBT's population programs
(:func:`pbt_program`: init, the interval with its exploit gather, evaluate), each member's
inputs, exploit and explore on the host (:func:`exploit_plan`, :func:`perturb`,
:func:`keep_margin`) and the population's saved state (:mod:`.pbt`).

Compiled programs are also kept for the life of the process (the last :data:`CACHE_SIZE`),
keyed by everything their code depends on: the shared config's hash, the held-out block,
the evaluation policy and step limit, the number of runs and devices, the inputs' structure,
and the train/eval functions when they are the caller's own (by identity). A second search
of the same scenario in one process (random search after CMA-ES, or a resumed search) runs
the same executable without compiling again.
"""

from __future__ import annotations

import dataclasses
import io
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.analysis.audit.margin import stall_margins
from ppage_jax.analysis.batch.metrics import curve_rows, run_metrics
from ppage_jax.analysis.batch.program import (
    compile_chunk,
    make_program,
    stack_hyperparams,
    stack_runs,
    take,
)
from ppage_jax.analysis.batch.spec import Arm, SweepSpec
from ppage_jax.analysis.batch.trainers import EvalFn, TrainFn, trainer_functions
from ppage_jax.analysis.search.constraint import margin_reason
from ppage_jax.analysis.search.sections import PBTSettings
from ppage_jax.analysis.search.space import Dimension, candidate_arm
from ppage_jax.analysis.search.spec import SearchSpec
from ppage_jax.artifacts import OutputError
from ppage_jax.env import GridWorld
from ppage_jax.sharding import make_mesh, shard_global, to_host
from ppage_jax.state import EnvParams

CACHE_SIZE = 4
_CACHE: OrderedDict[tuple, tuple[Any, Any, Any, int]] = OrderedDict()
# Runner-state fields a PBT member keeps when it copies another's learner: its grids, its
# random key and its counters. Every other field (networks, optimiser states, return scales)
# is the learner, and is copied.
OWN_FIELDS = ("env", "key", "progress")
InitFn = Callable[..., Any]  # init(key, tc, params) -> runner state (an algorithm's init)
UpdateFn = Callable[..., tuple[Any, dict]]  # update(runner, tc, params) -> (runner, row)


class RunProgram:
    """Train and evaluate every (arm, seed) run of a sweep spec as one compiled call.

    The program is compiled on the first call for that call's number of runs (padded to a
    multiple of the devices) and reused by every later call with the same shapes.
    ``train_fn``/``eval_fn`` default to the config's algorithm and the spec's held-out block
    (:func:`~ppage_jax.analysis.batch.trainers.trainer_functions`)."""

    def __init__(
        self,
        spec: SweepSpec,
        env: GridWorld,
        train_fn: TrainFn | None = None,
        eval_fn: EvalFn | None = None,
        env_steps_per_update: int | None = None,
    ):
        self.own = (train_fn, eval_fn)  # the caller's functions (None: the config's)
        self.key = (
            spec.config.hash(),
            spec.eval_seed,
            spec.eval_episodes,
            spec.eval_max_steps,
            spec.eval_policy,
        )
        if train_fn is None or eval_fn is None:
            default_train, default_eval, default_steps = trainer_functions(spec, env)
            train_fn = train_fn or default_train
            eval_fn = eval_fn or default_eval
            env_steps_per_update = env_steps_per_update or default_steps
        self.env = env
        self.env_steps_per_update = env_steps_per_update or 1
        self.program = make_program(train_fn, eval_fn)
        self.mesh = make_mesh()
        self.compiled = None
        self.chunk: int | None = None
        self.compile_calls = 0

    def inputs(self, spec: SweepSpec) -> tuple[list[tuple[str, int]], jax.Array, Any]:
        """``(runs, keys, inputs)`` of ``spec``'s arms x seeds (the sweep's stacking)."""
        runs, keys, params = stack_runs(spec, self.env)
        hyper = stack_hyperparams(spec)
        return runs, keys, ((params, hyper) if hyper else params)

    def __call__(self, keys: jax.Array, inputs: Any, pad_to: int = 0) -> tuple[dict, dict]:
        """Host copies of ``(training metrics, evaluation episodes)`` of every run.
        ``pad_to``: compile for at least this many runs (the rest padded with the last run
        and dropped), so a call with fewer runs (candidates the constraint did not train)
        reuses the generations' program."""
        total = int(keys.shape[0])
        n_dev = self.mesh.devices.size
        chunk = -(-max(total, pad_to) // n_dev) * n_dev
        if self.compiled is None or chunk != self.chunk:
            shapes = jax.tree.map(lambda x: (np.shape(x), str(np.asarray(x).dtype)), inputs)
            key = (*self.key, chunk, n_dev, str(jax.tree.structure(inputs)), str(shapes))
            hit = _CACHE.get(key)
            own_train, own_eval = self.own
            if hit is not None and hit[1] is own_train and hit[2] is own_eval:
                _CACHE.move_to_end(key)
                self.compiled, self.chunk = hit[0], hit[3]
            else:
                self.compiled, self.chunk, _ = compile_chunk(
                    self.program, keys, inputs, chunk, self.mesh
                )
                self.compile_calls += 1
                _CACHE[key] = (self.compiled, own_train, own_eval, self.chunk)
                while len(_CACHE) > CACHE_SIZE:
                    _CACHE.popitem(last=False)
        positions = np.minimum(np.arange(chunk), total - 1)  # pad with the last run
        args = shard_global((np.asarray(keys)[positions], take(inputs, positions)), self.mesh)
        metrics, episodes = to_host(self.compiled(*args))
        index = np.arange(total)
        return take(metrics, index), take(episodes, index)

    def results(
        self, metrics: dict, episodes: dict, j: int, horizon: float
    ) -> tuple[dict[str, float], list]:
        """Run ``j``'s evaluation metrics and training curve (the sweep's own)."""
        result = run_metrics(self.env, take(episodes, j), horizon)
        curve = curve_rows(self.env, take(metrics, j), self.env_steps_per_update)
        return result, curve


# --------------------------------------------------------------------------- PBT's population
def learner_fields(runner: Any) -> tuple[str, ...]:
    """The fields of a runner state that make its learner (all but :data:`OWN_FIELDS`)."""
    return tuple(f.name for f in dataclasses.fields(runner) if f.name not in OWN_FIELDS)


def exploit(runner: Any, source: jax.Array) -> Any:
    """The population's runner state [M] in which member ``m`` holds member ``source[m]``'s
    learner (network parameters, optimiser state, every field but :data:`OWN_FIELDS`),
    copied exactly; ``source[m] == m`` keeps its own. A gather over the member axis: no host
    sync, jittable."""
    copied = {
        name: jax.tree.map(lambda x: jnp.take(x, source, axis=0), getattr(runner, name))
        for name in learner_fields(runner)
    }
    return runner.replace(**copied)


@dataclasses.dataclass
class PBTProgram:
    """The compiled programs of a population: ``init`` (every member's runner state),
    ``interval`` (exploit, then ``pbt.interval`` updates of every member) and ``evaluate``
    (every member on the search's held-out layouts), each compiled once for the
    population's shapes; ``traces`` counts how often each was traced."""

    init: Any
    interval: Any
    evaluate: Any
    env_steps_per_update: int
    traces: dict[str, int]


_PROGRAMS: dict[tuple, PBTProgram] = {}


def pbt_program(
    spec: SearchSpec,
    env: GridWorld,
    init_fn: InitFn | None = None,
    update_fn: UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
) -> PBTProgram:
    """The population's programs (kept for the process, keyed by what their code depends
    on, so a resumed search in the same process reuses them). ``init_fn``/``update_fn``
    default to the config's algorithm, ``eval_fn`` to the search's held-out block."""
    from ppage_jax.train.kit.loop import run_updates
    from ppage_jax.train.kit.traced import bind
    from ppage_jax.train.registry import algorithm
    from ppage_jax.train.run.experiment import make_train_config

    settings = pbt_settings(spec)
    key = (
        spec.config.hash(),
        spec.eval_seed,
        spec.eval_episodes,
        spec.eval_max_steps,
        spec.eval_policy,
        settings.interval,
        id(init_fn),
        id(update_fn),
        id(eval_fn),
    )
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    tc = make_train_config(spec.config, env)
    module = algorithm(tc.algorithm)
    init_one = init_fn or module.init
    update_one = update_fn or module.update
    _, default_eval, steps = trainer_functions(spec.sweep(), env)
    eval_one = eval_fn or default_eval
    traces = {"init": 0, "interval": 0, "evaluate": 0}
    length = settings.interval

    def init_all(keys: jax.Array, params: EnvParams, hyper: dict) -> Any:
        traces["init"] += 1
        return jax.vmap(lambda k, p, h: init_one(k, bind(tc, h), p))(keys, params, hyper)

    def interval_all(runner: Any, source: jax.Array, params: EnvParams, hyper: dict) -> Any:
        traces["interval"] += 1
        runner = exploit(runner, source)
        return jax.vmap(lambda r, p, h: run_updates(update_one, r, tc, p, length, None, h))(
            runner, params, hyper
        )

    def evaluate_all(runner: Any, params: EnvParams) -> dict:
        traces["evaluate"] += 1
        return jax.vmap(eval_one)(runner, params)

    program = PBTProgram(
        jax.jit(init_all), jax.jit(interval_all), jax.jit(evaluate_all), steps, traces
    )
    _PROGRAMS[key] = program
    return program


def pbt_settings(spec: SearchSpec) -> PBTSettings:
    """The search's ``pbt`` section; ValueError when it has none."""
    if spec.pbt is None:
        raise ValueError(f"{spec.path}: the search has no pbt settings")
    return spec.pbt


def member_inputs(
    spec: SearchSpec, env: GridWorld, values: np.ndarray
) -> tuple[list[Arm], EnvParams, dict[str, jax.Array], list[EnvParams]]:
    """Each member's design at ``values`` [M, d]: the arms, their stacked EnvParams [M],
    their traced hyperparameters (name -> float32[M]) and the per-member EnvParams."""
    arms = [candidate_arm(spec.design, spec.dims, v, f"m{m:02d}") for m, v in enumerate(values)]
    sweep = spec.sweep(tuple(arms))
    params = sweep.arm_params(env)
    hyper = sweep.arm_hyperparams()
    names = list(hyper[0]) if hyper and hyper[0] else []
    stacked_hyper = {n: jnp.asarray([h[n] for h in hyper], jnp.float32) for n in names}
    return arms, jax.tree.map(lambda *xs: jnp.stack(xs), *params), stacked_hyper, params


# --------------------------------------------------------------------------- saved state
def state_bytes(runner: Any) -> bytes:
    """The population's runner state as ``.npz`` bytes (its leaves in tree order)."""
    buffer = io.BytesIO()
    leaves = [np.asarray(x) for x in jax.tree.leaves(runner)]
    np.savez(buffer, *leaves)
    return buffer.getvalue()


def load_state(path: Path, template: Any) -> Any:
    """A runner state saved by :func:`state_bytes`, in ``template``'s tree structure."""
    with np.load(path) as saved:
        leaves = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    treedef = jax.tree.structure(template)
    if treedef.num_leaves != len(leaves):
        raise OutputError(f"{path}: the saved population does not match this search")
    return jax.tree.unflatten(treedef, [jnp.asarray(x) for x in leaves])


# --------------------------------------------------------------------------- exploit, explore
def exploit_plan(
    losses: Sequence[float], feasible: Sequence[bool], movers: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(source int32[M], replaced bool[M])``: the ``movers`` worst members (infeasible
    first, then by loss, lower is better, later members first on ties) each copy a member
    of the ``movers`` best, drawn uniformly; everyone else keeps its own learner."""
    loss = np.where(np.isnan(np.asarray(losses, np.float64)), np.inf, losses)
    ok = np.asarray(feasible, bool)
    order = sorted(range(len(loss)), key=lambda i: (not ok[i], loss[i], i))
    best, worst = order[:movers], order[len(order) - movers :]
    source = np.arange(len(loss), dtype=np.int32)
    replaced = np.zeros(len(loss), bool)
    for w in worst:
        source[w] = best[int(rng.integers(len(best)))]
        replaced[w] = True
    return source, replaced


def perturb(
    dims: Sequence[Dimension],
    values: np.ndarray,
    source: np.ndarray,
    replaced: np.ndarray,
    factor: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """float64[M, d]: the next interval's values. A replaced member takes its source's
    values, each multiplied by ``factor`` or by ``1 / factor`` (a fair coin per key) and
    clipped to the key's bounds; the others keep theirs."""
    values = np.asarray(values, np.float64)
    out = values.copy()
    low = np.array([d.low for d in dims])
    high = np.array([d.high for d in dims])
    for m in np.flatnonzero(replaced):
        scale = np.where(rng.random(len(dims)) < 0.5, factor, 1.0 / factor)
        out[m] = np.clip(values[source[m]] * scale, low, high)
    return out


def keep_margin(
    spec: SearchSpec,
    env: GridWorld,
    old: np.ndarray,
    new: np.ndarray,
    source: np.ndarray,
    replaced: np.ndarray,
) -> np.ndarray:
    """``new`` with each perturbation that breaks the stall-margin constraint dropped (the
    copy keeps its source's values)."""
    if spec.constraint.stall_margin is None:
        return new
    out = new.copy()
    _, _, _, params = member_inputs(spec, env, new)
    for m in np.flatnonzero(replaced):
        if margin_reason(stall_margins(env, params[m]), spec.constraint.stall_margin):
            out[m] = old[source[m]]
    return out
