"""A sweep as one compiled program: the (arm, seed) runs stacked on a leading axis, train then
evaluate vmapped over them, split across every process's devices and compiled for a chunk of
runs (shrunk until it fits the memory budget when the chunk size is automatic).

The memory budget is what one device's share of the compiled program (arguments, outputs
and temporaries, from XLA's ``memory_analysis``) may take, first found wins: ``run_sweep(...,
memory_budget=)`` / ``ppage-jax sweep --memory-budget``, the ``PPAGE_JAX_MEMORY_BUDGET``
environment variable, ``MEMORY_FRACTION`` of the device's ``memory_stats()["bytes_limit"]``
where the backend reports it (GPU, TPU), else ``MEMORY_FRACTION`` of the machine's physical
memory shared by its local devices (CPU).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.analysis.batch.spec import SweepSpec
from ppage_jax.analysis.batch.trainers import EvalFn, TrainFn
from ppage_jax.artifacts import fault_soon
from ppage_jax.compilation.programs import ProgramStore
from ppage_jax.env import GridWorld
from ppage_jax.sharding import shard_global
from ppage_jax.state import EnvParams

MEMORY_BUDGET_ENV = "PPAGE_JAX_MEMORY_BUDGET"
# Share of a device's reported memory a sweep program may plan for (the rest: XLA's own
# buffers, fragmentation, the host copies of finished chunks).
MEMORY_FRACTION = 0.7
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def stack_runs(
    spec: SweepSpec, env: GridWorld
) -> tuple[list[tuple[str, int]], jax.Array, EnvParams]:
    """The runs (arm-major): names ``[(arm, seed)]``, keys [R] and stacked params [R].

    Seed ``i`` of every arm trains from ``PRNGKey(train_seed + i)``: paired across arms.
    """
    arm_params = spec.arm_params(env)
    runs, keys, params = [], [], []
    for arm, p in zip(spec.arms, arm_params, strict=True):
        for i in range(spec.seeds):
            runs.append((arm.name, spec.train_seed + i))
            keys.append(jax.random.PRNGKey(spec.train_seed + i))
            params.append(p)
    return runs, jnp.stack(keys), jax.tree.map(lambda *xs: jnp.stack(xs), *params)


def stack_hyperparams(spec: SweepSpec) -> dict[str, jax.Array]:
    """The runs' traced training hyperparameters (arm-major as :func:`stack_runs`): name ->
    float32[R]; empty when no arm sets one."""
    per_arm = spec.arm_hyperparams()
    names = list(per_arm[0]) if per_arm else []
    return {
        n: jnp.asarray([h[n] for h in per_arm for _ in range(spec.seeds)], jnp.float32)
        for n in names
    }


def make_program(train_fn: TrainFn, eval_fn: EvalFn) -> Callable:
    """``vmap`` over runs of train-then-evaluate: ``(keys [R], params [R]) -> (metrics, eval)``;
    ``params`` may be a pair ``(EnvParams [R], hyperparams [R])`` (:func:`stack_hyperparams`),
    the hyperparameters then passed to ``train_fn`` as its third argument."""

    def one_run(key: jax.Array, params: EnvParams | tuple):
        params, hyper = params if isinstance(params, tuple) else (params, None)
        runner, metrics = train_fn(key, params, hyper) if hyper else train_fn(key, params)
        return metrics, eval_fn(runner, params)

    return jax.vmap(one_run)


def take(tree: Any, index: int | np.ndarray) -> Any:
    return jax.tree.map(lambda x: x[index], tree)


def parse_bytes(text: str | int) -> int:
    """A byte count: an integer, or a number with a K/M/G/T suffix (powers of 1024, an
    optional ``B``/``iB``): ``"512M"``, ``"1.5GiB"``. ValueError saying what is allowed."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _BYTES.match(str(text))
        if match is None:
            raise ValueError(
                f"expected a byte count such as 1000000, 512M or 2GiB (K/M/G/T = powers of "
                f"1024), got {text!r}"
            )
        value = int(float(match[1]) * _UNITS[match[2].upper()])
    if value < 1:
        raise ValueError(f"a memory budget must be at least 1 byte, got {text!r}")
    return value


def device_memory_limit() -> int | None:
    """Bytes one local device may hold: ``memory_stats()["bytes_limit"]`` where the backend
    reports it, else the physical memory shared by the local devices; None if unknown."""
    devices = jax.local_devices()
    try:
        stats = devices[0].memory_stats() or {}
    except Exception:  # backends without memory stats
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // len(devices)
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget(
    budget: int | str | None = None, environ: Mapping[str, str] | None = None
) -> int | None:
    """Bytes one device's share of a sweep program may take (see the module docstring):
    ``budget``, else ``PPAGE_JAX_MEMORY_BUDGET``, else ``MEMORY_FRACTION`` of
    :func:`device_memory_limit`. ValueError naming a bad setting."""
    env = os.environ if environ is None else environ
    if budget is None and env.get(MEMORY_BUDGET_ENV):
        try:
            return parse_bytes(env[MEMORY_BUDGET_ENV])
        except ValueError as err:
            raise ValueError(f"{MEMORY_BUDGET_ENV}: {err}") from None
    if budget is not None:
        return parse_bytes(budget)
    limit = device_memory_limit()
    return None if limit is None else int(MEMORY_FRACTION * limit)


def program_bytes(compiled) -> int | None:
    """One device's arguments + outputs + temporaries of ``compiled`` (XLA's memory
    analysis of the partitioned program), None where the backend does not say."""
    try:
        ma = compiled.memory_analysis()
    except Exception:
        return None
    if ma is None:
        return None
    return int(ma.temp_size_in_bytes + ma.argument_size_in_bytes + ma.output_size_in_bytes)


def compile_chunk(
    program: Callable,
    keys: jax.Array,
    params: EnvParams,
    chunk: int,
    mesh,
    budget: int | None = None,
    store: tuple[ProgramStore, Mapping[str, Any]] | None = None,
) -> tuple[Any, int, int | None]:
    """Compile ``program`` for ``chunk`` runs (a multiple of the mesh's devices, every
    process's). With a ``budget`` (bytes per device), shrink the chunk until one device's
    share of the program fits it (to the size its measured bytes per run predict, again
    while it does not fit; at least one run per device). Returns ``(compiled, chunk,
    bytes)``: bytes is one device's share, None where the backend does not report it.
    ``store``: a program store and the program's static description; the compiled chunk is
    loaded from it whole, or compiled and kept there."""
    n_dev = mesh.devices.size
    while True:
        index = np.arange(chunk) % keys.shape[0]
        args = shard_global((np.asarray(keys)[index], take(params, index)), mesh)
        if store is None:
            lowered = jax.jit(program).lower(*args)
            fault_soon("compile")  # testing hook: killed while XLA compiles
            compiled = lowered.compile()
        else:
            fault_soon("compile")
            compiled = store[0].compile("sweep_chunk", program, args, store[1])
        need = program_bytes(compiled)
        if budget is None or need is None or chunk <= n_dev or need <= budget:
            return compiled, chunk, need
        # bytes grow about linearly with the runs: aim for the predicted fit, always fewer
        fit = max(1, budget * (chunk // n_dev) // need) * n_dev
        chunk = max(n_dev, min(fit, chunk - n_dev))
