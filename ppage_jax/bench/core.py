"""Throughput measurement: ppage_jax under ``jit(vmap)`` with auto-reset, the NumPy oracle,
and, when the ``bench`` extra is installed, Jumanji's LevelBasedForaging and JaxMARL's MPE
simple_tag in the same process (``ppage-jax bench``, ``benchmarks/throughput.py``).

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
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.config import load_config
from ppage_jax.defaults import SECTIONS
from ppage_jax.env import GridWorld, make
from ppage_jax.sharding import make_mesh, shard_batch
from ppage_jax.wrappers import BatchedAutoResetEnv

# The "2v2, all speeds 1, local_only" scenario, compared with Jumanji's LBF.
TWO_V_TWO = {"agents.predators.count": 2, "agents.preys.count": 2,
             "agents.predators.speed": 1, "agents.preys.speed": 1,
             "observations.type": "local_only", "observations.params": {},
             "observations.per_agent": None}
AUTO_RESET, NO_RESET = "auto-reset", "no reset"
PPAGE_2V2 = "ppage 2v2 speed 1 local_only"
# (ours, theirs) pairs printed as ratios: the same loop as the peer was measured with.
PEER_RATIOS = ((PPAGE_2V2, "jumanji LevelBasedForaging-v0"),
               ("ppage configs/default", "jaxmarl MPE_simple_tag_v3"))  # auto-reset both


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
        return dict(dataclasses.asdict(self), env_steps_per_s=self.env_steps_per_s,
                    agent_steps_per_s=self.agent_steps_per_s)


def device_info() -> dict[str, Any]:
    """The backend, its devices, the JAX version and the host's CPU count and load."""
    devices = jax.devices()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"platform": devices[0].platform, "device_kind": devices[0].device_kind,
            "device_count": len(devices), "jax": jax.__version__,
            "cpu_count": os.cpu_count(), "load_avg_1min": load, "host": platform.machine()}


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
    """A compiled scan ready to time; ``result.seconds`` holds its fastest run so far."""

    result: Result
    run: Callable[[int], None]

    def time_once(self, i: int) -> None:
        start = time.perf_counter()
        self.run(i)
        self.result.seconds = min(self.result.seconds, time.perf_counter() - start)

    def measure(self, repeats: int) -> Result:
        for i in range(repeats):
            self.time_once(i)
        return self.result


def _compile_scan(step: Callable, carry: Any, steps: int) -> tuple[float, Callable[[int], None]]:
    """Compile ``steps`` iterations of ``step(key, carry) -> carry`` and run it once (warm-up);
    returns (compile seconds, run(i) that blocks until run i is done)."""
    def scan(key, carry):
        return jax.lax.scan(lambda c, k: (step(k, c), None), carry,
                            jax.random.split(key, steps))[0]

    start = time.perf_counter()
    compiled = jax.jit(scan).lower(jax.random.PRNGKey(1), carry).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(jax.random.PRNGKey(2), carry))
    return compile_s, lambda i: jax.block_until_ready(compiled(jax.random.PRNGKey(3 + i), carry))


def interleaved(timers: Sequence[Timed], repeats: int) -> list[Result]:
    """Time several compiled scans in turn, ``repeats`` rounds: on a shared machine the load
    drifts, and taking turns keeps the comparison fair."""
    for i in range(repeats):
        for timer in timers:
            timer.time_once(i)
    return [timer.result for timer in timers]


def _placed(tree: Any, batch: int) -> Any:
    """Shard the batch across all devices when it divides evenly (else leave it)."""
    mesh = make_mesh()
    return shard_batch(tree, mesh) if batch % mesh.devices.size == 0 else tree


def prepare_env(env: GridWorld, batch: int, steps: int, *, resets: bool = True,
                name: str = "") -> Timed:
    """Compile a random-policy rollout of ``batch`` grids, with the batched auto-reset or
    without any reset (finished grids keep stepping their finished episode)."""
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

    def step(key, carry):
        k_act, k_env = jax.random.split(key)
        actions = jax.random.randint(k_act, (batch, n_agents), 0, n_actions)
        obs, state, *_ = env_step(k_env, carry[1], actions)
        return obs, state

    compile_s, run = _compile_scan(step, _placed((obs, state), batch), steps)
    result = Result(name or str(env.config.path), AUTO_RESET if resets else NO_RESET, batch,
                    n_agents, steps, float("inf"), compile_s, state_bytes(env))
    return Timed(result, run)


def bench_env(env: GridWorld, batch: int, steps: int, *, resets: bool = True,
              repeats: int = 3, name: str = "") -> Result:
    """Random-policy throughput of ``batch`` grids (see :func:`prepare_env`)."""
    return prepare_env(env, batch, steps, resets=resets, name=name).measure(repeats)


def first_step_seconds(config: str | None, batch: int = 4096,
                       overrides: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Seconds from ``make`` to the first finished auto-reset step of ``batch`` grids (reset
    and step traced, compiled and run), in a fresh Python process so that nothing is cached;
    imports are not counted. ``{"wall": ..., "cpu": ...}``: CPU time is summed over the
    compiler's threads and hardly grows when other programs share the cores, while wall
    time does."""
    code = ("import json, sys, ppage_jax.bench.core as b; "
            "print(json.dumps(b._first_step_here(*json.loads(sys.argv[1]))))")
    arg = json.dumps([config, batch, dict(overrides or {})])
    out = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _first_step_here(config: str | None, batch: int, overrides: Mapping[str, Any]
                     ) -> dict[str, float]:
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
    from ppage_jax.oracle.env import ReferenceGridWorld
    from ppage_jax.state import NO_TRUNCATION, UNLIMITED_STAMINA

    params = env.default_params
    terms = []
    for entry, spec, weight in zip(env.composer.entries, env.composer.specs,
                                   np.asarray(params.reward.weights)):
        terms.append({"name": entry.name, "weight": float(weight), "params": dict(entry.params),
                      "applies_to": entry.applies_to})
    max_steps = int(params.max_steps)
    return ReferenceGridWorld(
        size=env.layout.size, n_predators=env.layout.n_predators, n_prey=env.layout.n_prey,
        speeds=[int(s) for s in np.asarray(params.speeds)],
        stamina=[None if s >= UNLIMITED_STAMINA else int(s)
                 for s in np.asarray(params.stamina)],
        allow_cell_sharing=env.layout.allow_cell_sharing,
        block_agents_by_obstacles=env.layout.block_agents_by_obstacles,
        capture_threshold=int(params.capture_threshold),
        max_steps=None if max_steps >= NO_TRUNCATION else max_steps,
        action_table=np.asarray(env.action_table), reward_terms=terms,
        gamma=float(params.reward.gamma), num_obstacles=env.layout.num_obstacles)


def bench_oracle(env: GridWorld, seconds: float = 2.0) -> Result:
    """The NumPy oracle stepping one grid with random actions, resetting finished episodes
    and building the configured observation each step, for about ``seconds``."""
    from ppage_jax.oracle.observations import reference_observation

    oracle = oracle_for_env(env)
    cfg = env.config["observations"]
    rng = np.random.default_rng(0)

    def observe(s):
        return reference_observation(cfg["type"], cfg["params"], s.positions, s.obstacles,
                                     s.captured, oracle.is_predator, oracle.size,
                                     oracle.speeds, cfg["per_agent"])

    state, steps = oracle.reset(rng), 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        actions = rng.integers(0, oracle.n_actions, oracle.n_agents)
        state, _, _, terminated, truncated, _ = oracle.step(state, actions)
        if terminated or truncated:
            state = oracle.reset(rng)
        observe(state)
        steps += 1
    return Result(f"oracle {env.config.path}", "NumPy, 1 grid", 1, oracle.n_agents, steps,
                  time.perf_counter() - start)


# ------------------------------------------------------------------------- peers
def prepare_jumanji_lbf(batch: int, steps: int) -> Timed | None:
    """Jumanji LevelBasedForaging-v0 (2 agents, 8x8), vmapped, stepped without resets;
    None when jumanji is not installed (``pip install -e ".[bench]"``)."""
    try:
        import jumanji
    except ImportError:
        return None
    env = jumanji.make("LevelBasedForaging-v0")
    n_agents = int(env.action_spec.shape[0])
    n_actions = int(np.asarray(env.action_spec.num_values).max())
    carry = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), batch))
    vstep = jax.vmap(env.step)

    def step(key, carry):       # the timestep (observation included) is carried, like ours
        actions = jax.random.randint(key, (batch, n_agents), 0, n_actions)
        return vstep(carry[0], actions)

    compile_s, run = _compile_scan(step, _placed(carry, batch), steps)
    return Timed(Result("jumanji LevelBasedForaging-v0", NO_RESET, batch, n_agents, steps,
                        float("inf"), compile_s), run)


def prepare_jaxmarl_simple_tag(batch: int, steps: int) -> Timed | None:
    """JaxMARL MPE_simple_tag_v3 (3 adversaries, 1 agent), vmapped; its step always
    auto-resets (JaxMARL computes a reset every step). None when jaxmarl is missing."""
    try:
        import jaxmarl
    except ImportError:
        return None
    env = jaxmarl.make("MPE_simple_tag_v3")
    agents = list(env.agents)
    n_actions = {a: int(env.action_space(a).n) for a in agents}
    carry = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), batch))
    vstep = jax.vmap(env.step)

    def step(key, carry):       # (obs, state) carried, like ours
        keys = jax.random.split(key, len(agents) + 1)
        actions = {a: jax.random.randint(k, (batch,), 0, n_actions[a])
                   for a, k in zip(agents, keys[1:])}
        obs, state, *_ = vstep(jax.random.split(keys[0], batch), carry[1], actions)
        return obs, state

    compile_s, run = _compile_scan(step, _placed(carry, batch), steps)
    return Timed(Result("jaxmarl MPE_simple_tag_v3", AUTO_RESET, batch, len(agents), steps,
                        float("inf"), compile_s), run)


# ------------------------------------------------------------------------- whole run
def run_benchmark(configs: Sequence[str], batch_sizes: Iterable[int], steps: int | None = None,
                  *, repeats: int = 3, oracle: bool = True, oracle_seconds: float = 2.0,
                  peers: bool = True, peer_batch: int = 4096, first_step: bool = True,
                  log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure every config at every batch size, plus the oracle, the peers (if installed)
    and the compile-to-first-step time; returns a JSON-ready dict (see :func:`format_report`)."""
    report: dict[str, Any] = {"device": device_info(), "scaling": [], "oracle": [],
                              "peers": [], "first_step": []}
    for config in configs:
        env = make(load_config(config))
        for batch in batch_sizes:
            result = bench_env(env, batch, steps or default_steps(batch), repeats=repeats,
                               name=config)
            report["scaling"].append(result.as_dict())
            log(_row(result))
        if oracle:
            result = bench_oracle(env, oracle_seconds)
            report["oracle"].append(result.as_dict())
            log(_row(result))
        if first_step:
            seconds = first_step_seconds(config, peer_batch)
            report["first_step"].append({"name": config, "batch": peer_batch, **seconds})
            log(f"{config}: make -> first auto-reset step at batch {peer_batch}: "
                f"{seconds['wall']:.2f} s wall, {seconds['cpu']:.2f} s CPU")
    if peers:
        peer_steps = steps or default_steps(peer_batch)
        # The comparison: the shipped default config (else the first one given).
        base = next((c for c in configs if Path(c).name == "default"),
                    configs[0] if configs else None)
        timers = [
            prepare_env(make(load_config(base)), peer_batch, peer_steps, name=f"ppage {base}"),
            prepare_env(make(load_config(base, TWO_V_TWO)), peer_batch, peer_steps,
                        resets=False, name=PPAGE_2V2),
            prepare_jumanji_lbf(peer_batch, peer_steps),
            prepare_jaxmarl_simple_tag(peer_batch, peer_steps),
        ]
        available = [t for t in timers if t is not None]
        for result in interleaved(available, repeats):
            report["peers"].append(result.as_dict())
            log(_row(result))
        if len(available) < len(timers):
            log(f"({len(timers) - len(available)} peer(s) not installed: pip install -e "
                f"\".[bench]\" for jumanji and jaxmarl)")
    return report


# ------------------------------------------------------------------------- reporting
def _row(r: Result) -> str:
    compile_s = "" if r.compile_s is None else f"{r.compile_s:8.2f}"
    return (f"{r.name:<36} {r.mode:<14} {r.batch:>7} {r.env_steps_per_s:>14,.0f} "
            f"{r.agent_steps_per_s:>15,.0f} {compile_s:>9}")


def _result(d: Mapping[str, Any]) -> Result:
    fields = {f.name for f in dataclasses.fields(Result)}
    return Result(**{k: v for k, v in d.items() if k in fields})


def format_report(report: Mapping[str, Any]) -> str:
    """Markdown tables of a :func:`run_benchmark` report (device line first)."""
    dev = report["device"]
    lines = [f"Device: {dev['platform']} ({dev['device_kind']}) x{dev['device_count']}, "
             f"jax {dev['jax']}, {dev['cpu_count']} CPU cores, 1-min load average "
             f"{dev['load_avg_1min']:.1f} at the start.", ""]
    lines += ["| config | batch | env-steps/s | agent-steps/s | compile s | bytes/state |",
              "|---|---:|---:|---:|---:|---:|"]
    for d in report["scaling"]:
        r = _result(d)
        lines.append(f"| {r.name} | {r.batch} | {r.env_steps_per_s:,.0f} | "
                     f"{r.agent_steps_per_s:,.0f} | {r.compile_s:.2f} | {r.bytes_per_state} |")
    if report["oracle"]:
        lines += ["", "| NumPy oracle (1 grid, obs built each step) | env-steps/s | "
                      "agent-steps/s |", "|---|---:|---:|"]
        for d in report["oracle"]:
            r = _result(d)
            lines.append(f"| {r.name} | {r.env_steps_per_s:,.0f} | {r.agent_steps_per_s:,.0f} |")
    if report["first_step"]:
        lines += ["", "| config | batch | make -> first auto-reset step, wall s | "
                      "same, process CPU s |", "|---|---:|---:|---:|"]
        for d in report["first_step"]:
            lines.append(f"| {d['name']} | {d['batch']} | {d['wall']:.2f} | {d['cpu']:.2f} |")
    if report["peers"]:
        peers = [_result(d) for d in report["peers"]]
        ref = peers[0].env_steps_per_s
        lines += ["", f"| at batch {peers[0].batch} | reset | env-steps/s | agent-steps/s | "
                      f"ratio to first row |", "|---|---|---:|---:|---:|"]
        for r in peers:
            lines.append(f"| {r.name} | {r.mode} | {r.env_steps_per_s:,.0f} | "
                         f"{r.agent_steps_per_s:,.0f} | {r.env_steps_per_s / ref:.2f} |")
        rate = {r.name: r.env_steps_per_s for r in peers}
        for ours, theirs in PEER_RATIOS:
            if ours in rate and theirs in rate:
                lines.append(f"\n{ours} / {theirs}: {rate[ours] / rate[theirs]:.2f}x "
                             f"env-steps/s")
    return "\n".join(lines)


def plot_scaling(report: Mapping[str, Any], path: str | Path) -> Path:
    """Write a log-log plot of env-steps/s against batch size per config (PNG)."""
    import matplotlib

    from ppage_jax.viz import figures as plt   # off-screen figures; no global backend switch

    fig, ax = plt.subplots(figsize=(8, 5))
    names = sorted({d["name"] for d in report["scaling"]})
    palette = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    for name in names:
        rows = sorted((d for d in report["scaling"] if d["name"] == name),
                      key=lambda d: d["batch"])
        ax.plot([d["batch"] for d in rows], [d["env_steps_per_s"] for d in rows], "o-",
                color=colors[name], label=f"{name} (auto-reset)")
    for d in report["oracle"]:
        name = d["name"].removeprefix("oracle ")
        ax.plot([1], [d["env_steps_per_s"]], "x", ms=9, color=colors.get(name, "grey"))
    if report["oracle"]:
        ax.plot([], [], "x", color="grey", label="NumPy oracle, 1 grid (colour = config)")
    for d, marker in zip(report["peers"], "sD^v<>"):
        ax.plot([d["batch"]], [d["env_steps_per_s"]], marker, ms=8, color="black",
                mfc="none", label=f"{d['name']} ({d['mode']})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (grids)")
    ax.set_ylabel("env-steps/s")
    dev = report["device"]
    ax.set_title(f"random-policy throughput, jit(vmap), {dev['platform']} "
                 f"x{dev['device_count']} ({dev['cpu_count']} cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
