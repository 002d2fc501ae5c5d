"""The compiled programs of a search: the sweep's train-then-evaluate program
(:func:`ppage_jax.analysis.batch.program.make_program`) compiled once for a fixed number of
runs and called with new inputs (each generation's candidates: traced ``EnvParams`` and
hyperparameters), so generations never recompile.

Compiled programs are also kept for the life of the process (the last :data:`CACHE_SIZE`),
keyed by everything their code depends on: the shared config's hash, the held-out block,
the evaluation policy and step limit, the number of runs and devices, the inputs' structure,
and the train/eval functions when they are the caller's own (by identity). A second search
of the same scenario in one process (random search after CMA-ES, or a resumed search) runs
the same executable without compiling again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jax
import numpy as np

from ppage_jax.analysis.batch.metrics import curve_rows, run_metrics
from ppage_jax.analysis.batch.program import (
    compile_chunk,
    make_program,
    stack_hyperparams,
    stack_runs,
    take,
)
from ppage_jax.analysis.batch.spec import SweepSpec
from ppage_jax.analysis.batch.trainers import EvalFn, TrainFn, trainer_functions
from ppage_jax.env import GridWorld
from ppage_jax.sharding import make_mesh, shard_global, to_host

CACHE_SIZE = 4
_CACHE: OrderedDict[tuple, tuple[Any, Any, Any, int]] = OrderedDict()


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
