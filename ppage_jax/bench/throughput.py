"""Throughput of one environment: ``jit(vmap)`` random-policy rollouts with or without the
batched auto-reset, the NumPy oracle, compile time and the time from ``make`` to the first
finished step.

Every jitted figure comes from one ``lax.scan`` of ``steps`` batched steps with uniformly
random actions drawn inside the scan; the obs and state are carried, so nothing is
optimised away. Compile time is reported apart; the rate is the best of ``repeats`` timed
runs after one warm-up run (the machine may be shared).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.defaults import SECTIONS
from ppage_jax.env import GridWorld, make
from ppage_jax.sharding import make_mesh, replicate, shard_batch, shard_global
from ppage_jax.wrappers import BatchedAutoResetEnv

AUTO_RESET, NO_RESET = "auto-reset", "no reset"


@dataclasses.dataclass
class Result:
    """One throughput figure. ``batch`` grids (1 for the oracle) x ``steps`` steps."""

    name: str
    mode: str
    batch: int
    num_agents: int
    steps: int
    seconds: float
    compile_s: float | None = None
    bytes_per_state: int | None = None

    @property
    def env_steps_per_s(self) -> float:
        return self.batch * self.steps / self.seconds

    @property
    def agent_steps_per_s(self) -> float:
        return self.env_steps_per_s * self.num_agents

    def as_dict(self) -> dict[str, Any]:
        return dict(
            dataclasses.asdict(self),
            env_steps_per_s=self.env_steps_per_s,
            agent_steps_per_s=self.agent_steps_per_s,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def row(self) -> str:
        """One line of the printed table (see ``ROW_HEADER``)."""
        compile_s = "" if self.compile_s is None else f"{self.compile_s:8.2f}"
        return (
            f"{self.name:<36} {self.mode:<14} {self.batch:>7} "
            f"{self.env_steps_per_s:>14,.0f} {self.agent_steps_per_s:>15,.0f} "
            f"{compile_s:>9}"
        )


ROW_HEADER = (
    f"{'name':<36} {'mode':<14} {'batch':>7} {'env-steps/s':>14} "
    f"{'agent-steps/s':>15} {'compile s':>9}"
)


def device_info() -> dict[str, Any]:
    """The backend, its devices, the JAX version and the host's CPU count and load."""
    devices = jax.devices()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "platform": devices[0].platform,
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "jax": jax.__version__,
        "cpu_count": os.cpu_count(),
        "load_avg_1min": load,
        "host": platform.machine(),
    }


def peak_memory_bytes() -> int | None:
    """Peak bytes in use on this process's busiest device since start, where the backend
    reports it (GPU, TPU: ``device.memory_stats()``); None on CPU."""
    peaks = [(d.memory_stats() or {}).get("peak_bytes_in_use") for d in jax.local_devices()]
    peaks = [p for p in peaks if p is not None]
    return max(peaks) if peaks else None


def env_label(env: GridWorld) -> str:
    """A short name of an env for result tables: roles, grid and observation builder
    (``3v3 10x10 local_radius``)."""
    spec = env.spec
    return f"{spec.n_predators}v{spec.n_prey} {spec.size}x{spec.size} {spec.observation_type}"


def state_bytes(env: GridWorld) -> int:
    """Bytes of one grid's State pytree (what a batch stores per environment)."""
    _, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0), env.default_params)
    return int(sum(np.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(state)))


def shipped_configs(root: str | Path = "configs") -> list[str]:
    """Every config directory under ``root`` (a directory holding any PPAGE config file)."""
    root = Path(root)
    found = {str(p.parent) for name in SECTIONS for p in root.rglob(f"{name}.yaml")}
    return sorted(found)


def default_steps(batch: int) -> int:
    """Timed steps per run: about a million env-steps, between 20 and 1000 steps."""
    return int(min(1000, max(20, 1_000_000 // batch)))


# ------------------------------------------------------------------------- timing core
@dataclasses.dataclass
class Timed:
    """A compiled rollout ready to time: ``run(i, steps)`` runs ``steps`` batched steps (a
    traced trip count: any number, one compile) and blocks; ``result.seconds`` holds the
    fastest run of ``result.steps`` steps so far."""

    result: Result
    run: Callable[[int, int], None]

    def time_once(self, i: int) -> None:
        start = time.perf_counter()
        self.run(i, self.result.steps)
        self.result.seconds = min(self.result.seconds, time.perf_counter() - start)

    def measure(self, repeats: int) -> Result:
        for i in range(repeats):
            self.time_once(i)
        return self.result

    def calibrate(self, seconds: float, min_steps: int = 4, max_steps: int = 100_000) -> Timed:
        """Set ``result.steps`` so that one timed run lasts about ``seconds`` (from a short
        probe run), between ``min_steps`` and ``max_steps``."""
        probe = min_steps
        self.run(-1, probe)
        start = time.perf_counter()
        self.run(-2, probe)
        per_step = max(time.perf_counter() - start, 1e-9) / probe
        self.result.steps = int(np.clip(seconds / per_step, min_steps, max_steps))
        return self


def compile_loop(
    step: Callable, carry: Any, warmup_steps: int = 2
) -> tuple[float, Callable[[int, int], None]]:
    """Compile ``steps`` iterations of ``step(key, carry) -> carry`` (step ``t`` gets
    ``fold_in(key, t)``; ``steps`` is traced) and run it once (warm-up); returns (compile
    seconds, run(i, steps) that blocks until run i is done).

    The carry is donated and each run continues from the previous run's carry, so no run
    copies it (a batch of 1000x1000 grids holds tens of MB: a copy per call would swamp
    the steps)."""

    def loop(key, carry, steps):
        return jax.lax.fori_loop(0, steps, lambda t, c: step(jax.random.fold_in(key, t), c), carry)

    start = time.perf_counter()
    compiled = jax.jit(loop, donate_argnums=1).lower(_key(1), carry, np.int32(1)).compile()
    compile_s = time.perf_counter() - start
    held = [jax.block_until_ready(compiled(_key(2), carry, np.int32(warmup_steps)))]

    def run(i: int, steps: int) -> None:
        held[0] = jax.block_until_ready(compiled(_key(3 + i), held[0], np.int32(steps)))

    return compile_s, run


def _key(seed: int) -> jax.Array:
    """PRNGKey(seed), replicated over every process's devices when there are several."""
    key = jax.random.PRNGKey(seed)
    return key if jax.process_count() == 1 else replicate(key, make_mesh())


def interleaved(timers: Sequence[Timed], repeats: int) -> list[Result]:
    """Time several compiled scans in turn, ``repeats`` rounds: on a shared machine the load
    drifts, and taking turns keeps the comparison fair."""
    for i in range(repeats):
        for timer in timers:
            timer.time_once(i)
    return [timer.result for timer in timers]


def place_batch(tree: Any, batch: int) -> Any:
    """Shard the batch across all devices when it divides evenly (else leave it). With
    several processes every process built the same whole batch and keeps its own rows; the
    batch must then divide evenly."""
    mesh = make_mesh()
    if jax.process_count() > 1:
        return shard_global(tree, mesh)
    return shard_batch(tree, mesh) if batch % mesh.devices.size == 0 else tree


def prepare_env(
    env: GridWorld,
    batch: int,
    steps: int | None,
    *,
    resets: bool = True,
    name: str = "",
    seconds: float = 0.25,
) -> Timed:
    """Compile a random-policy rollout of ``batch`` grids, with the batched auto-reset or
    without any reset (finished grids keep stepping their finished episode). ``steps=None``
    picks the steps per timed run so that one run lasts about ``seconds``."""
    params = env.default_params
    n_agents, n_actions = env.num_agents, env.num_actions
    auto = BatchedAutoResetEnv(env, batch)
    obs, state = jax.jit(auto.reset)(jax.random.PRNGKey(0), params)
    if resets:

        def env_step(key, state, actions):
            return auto.step(key, state, actions, params)
    else:
        batched = jax.vmap(env.step, in_axes=(0, 0, 0, None))

        def env_step(key, state, actions):
            return batched(jax.random.split(key, batch), state, actions, params)

    def step(key, carry):  # obs, state and summed rewards carried: nothing is dropped
        k_act, k_env = jax.random.split(key)
        actions = jax.random.randint(k_act, (batch, n_agents), 0, n_actions)
        obs, state, reward, *_ = env_step(k_env, carry[1], actions)
        return obs, state, carry[2] + reward

    returns = jnp.zeros((batch, n_agents), jnp.float32)
    compile_s, run = compile_loop(step, place_batch((obs, state, returns), batch))
    result = Result(
        name or env_label(env),
        AUTO_RESET if resets else NO_RESET,
        batch,
        n_agents,
        steps or 0,
        float("inf"),
        compile_s,
        state_bytes(env),
    )
    timed = Timed(result, run)
    return timed if steps else timed.calibrate(seconds)


def bench_env(
    env: GridWorld,
    batch: int,
    steps: int | None,
    *,
    resets: bool = True,
    repeats: int = 3,
    name: str = "",
    seconds: float = 0.25,
) -> Result:
    """Random-policy throughput of ``batch`` grids (see :func:`prepare_env`)."""
    return prepare_env(env, batch, steps, resets=resets, name=name, seconds=seconds).measure(
        repeats
    )


def first_step_seconds(
    config: str | None, batch: int = 4096, overrides: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """Seconds from ``make`` to the first finished auto-reset step of ``batch`` grids (reset
    and step traced, compiled and run), in a fresh Python process so that nothing is cached;
    imports are not counted. ``{"wall": ..., "cpu": ...}``: CPU time is summed over the
    compiler's threads and hardly grows when other programs share the cores, while wall
    time does."""
    code = (
        "import json, sys, ppage_jax.bench.throughput as b; "
        "print(json.dumps(b.first_step_here(*json.loads(sys.argv[1]))))"
    )
    arg = json.dumps([config, batch, dict(overrides or {})])
    out = subprocess.run(
        [sys.executable, "-c", code, arg], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_step_here(
    config: str | None, batch: int, overrides: Mapping[str, Any]
) -> dict[str, float]:
    """:func:`first_step_seconds` measured in this process (what its fresh process runs):
    anything this process already compiled or cached makes it faster."""
    wall, cpu = time.perf_counter(), time.process_time()
    env = make(config, overrides)
    auto = BatchedAutoResetEnv(env, batch)
    obs, state = jax.jit(auto.reset)(jax.random.PRNGKey(0))
    actions = jnp.zeros((batch, env.num_agents), jnp.int32)
    jax.block_until_ready(jax.jit(auto.step)(jax.random.PRNGKey(1), state, actions))
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}


# ------------------------------------------------------------------------- NumPy oracle
def oracle_for_env(env: GridWorld):
    """The NumPy ReferenceGridWorld configured like ``env`` (its default params)."""
    from ppage_jax.oracle.translate import oracle_for

    return oracle_for(env)


def bench_oracle(env: GridWorld, seconds: float = 2.0, name: str = "") -> Result:
    """The NumPy oracle stepping one grid with random actions, resetting finished episodes
    and building the env's observation each step, for about ``seconds``; the result is named
    ``oracle <name>`` (default :func:`env_label`)."""
    from ppage_jax.oracle.observations import reference_observation

    oracle = oracle_for_env(env)
    spec = env.spec
    rng = np.random.default_rng(0)

    def observe(s):
        return reference_observation(
            spec.observation_type,
            spec.observation_kwargs,
            s.positions,
            s.obstacles,
            s.captured,
            oracle.is_predator,
            oracle.size,
            oracle.speeds,
            spec.per_agent_kwargs,
        )

    state, steps = oracle.reset(rng), 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        actions = rng.integers(0, oracle.n_actions, oracle.n_agents)
        state, _, _, terminated, truncated, _ = oracle.step(state, actions)
        if terminated or truncated:
            state = oracle.reset(rng)
        observe(state)
        steps += 1
    return Result(
        f"oracle {name or env_label(env)}",
        "NumPy, 1 grid",
        1,
        oracle.n_agents,
        steps,
        time.perf_counter() - start,
    )
