"""Auto-reset strategies compared on one config and batch (random policy, jit(vmap)):

  no reset          vmap(env.step); finished grids keep stepping (the upper bound)
  per-grid/perm     vmap(AutoResetEnv.step) with the layout drawn by jax.random.permutation
                    (a sort over all cells: the original reset)
  per-grid/FY       vmap(AutoResetEnv.step) with the partial Fisher-Yates draw (now default)
  batched           BatchedAutoResetEnv: R fresh layouts per round, scattered into the
                    grids that finished (the fast path)

For each: env-steps/s (best of --repeats, interleaved) and the compile time of the jitted
scan (wall and process CPU seconds). The permutation variant swaps the draw in for this
process only.

    python benchmarks/reset_strategies.py                    # configs/default, batch 4096
    python benchmarks/reset_strategies.py --batch 1024 --steps 50
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

import ppage_jax.env.layout as layout_module
from ppage_jax.bench.throughput import device_info
from ppage_jax.env import make
from ppage_jax.wrappers import AutoResetEnv, BatchedAutoResetEnv


def permutation_sample(key, population, k):
    """The original draw: the first k of jax.random.permutation (a sort over all cells)."""
    values = jnp.arange(population) if isinstance(population, int) else population
    return jax.random.permutation(key, values)[:k]


def compile_strategy(env, batch: int, steps: int, strategy: str):
    """(run() -> seconds, compile wall s, compile CPU s) for one strategy."""
    params = env.default_params
    if strategy == "batched":
        auto = BatchedAutoResetEnv(env, batch)
        env_step = lambda key, state, actions: auto.step(key, state, actions, params)
    else:
        one = env.step if strategy == "no reset" else AutoResetEnv(env).step
        vstep = jax.vmap(one, in_axes=(0, 0, 0, None))
        env_step = lambda key, state, actions: vstep(
            jax.random.split(key, batch), state, actions, params
        )
    carry = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.PRNGKey(0), batch), params
    )

    def body(carry, key):
        k_act, k_env = jax.random.split(key)
        actions = jax.random.randint(k_act, (batch, env.num_agents), 0, env.num_actions)
        obs, state, *_ = env_step(k_env, carry[1], actions)
        return (obs, state), None

    run = jax.jit(lambda key, carry: jax.lax.scan(body, carry, jax.random.split(key, steps))[0])
    wall, cpu = time.perf_counter(), time.process_time()
    compiled = run.lower(jax.random.PRNGKey(1), carry).compile()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    jax.block_until_ready(compiled(jax.random.PRNGKey(1), carry))

    def timed(i: int) -> float:
        start = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.PRNGKey(2 + i), carry))
        return time.perf_counter() - start

    return timed, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="configs/default")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(device_info())
    env = make(args.config)
    print(
        f"| strategy | env-steps/s | compile wall s | compile CPU s |  ({args.config}, "
        f"batch {args.batch})\n|---|---:|---:|---:|"
    )
    fisher_yates = layout_module.distinct_sample
    strategies = ("no reset", "per-grid/perm", "per-grid/FY", "batched")
    compiled = {}
    for strategy in strategies:
        layout_module.distinct_sample = (
            permutation_sample if strategy == "per-grid/perm" else fisher_yates
        )
        compiled[strategy] = compile_strategy(env, args.batch, args.steps, strategy)
    layout_module.distinct_sample = fisher_yates
    # Interleaved repeats: a shared machine's load drifts between strategies otherwise.
    best = dict.fromkeys(strategies, float("inf"))
    for i in range(args.repeats):
        for strategy in strategies:
            best[strategy] = min(best[strategy], compiled[strategy][0](i))
    for strategy in strategies:
        _, wall, cpu = compiled[strategy]
        print(
            f"| {strategy} | {args.batch * args.steps / best[strategy]:,.0f} | {wall:.2f} | "
            f"{cpu:.2f} |"
        )


if __name__ == "__main__":
    main()
