"""The greedy baselines' breadth-first search: the distances read where the slides go
(``policies.bfs_distances_at``, one machine word per grid row) against the whole distance
field (``policies.bfs_distances``, then read there), timed A B B A in one process.

Both give the same distances (``tests/core/test_policies.py``); this measures what the greedy
evade prey and the BFS chase cost per call on a batch of fresh layouts of a config (default:
the reward study's 16x16 scenario, 448 grids, as a 7-run sweep chunk of 64 grids steps them).
Compile time is left out (every variant is compiled and run once before timing).

    python benchmarks/baseline_search.py
    python benchmarks/baseline_search.py --config configs/default --grids 1024 --rounds 4
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

import ppage_jax as pj
from ppage_jax import policies


def full_field(env, obstacle_map, sources, cells):
    """The distances read from the whole field (the search before the word-per-row one)."""
    dist = policies.bfs_distances(env, obstacle_map, sources)
    return dist[cells[..., 1], cells[..., 0]]


def timed(fn, *args, calls: int) -> float:
    """Milliseconds per call of a compiled ``fn`` (after one call)."""
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return 1000 * (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/studies/reward_design/hybrid")
    parser.add_argument("--grids", type=int, default=448)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    env = pj.make(args.config)
    keys = jax.random.split(jax.random.PRNGKey(0), args.grids)
    obs, states = jax.vmap(env.reset)(keys)
    variants = {}
    for name, search in (("words", policies.bfs_distances_at), ("full", full_field)):
        original = policies.bfs_distances_at
        policies.bfs_distances_at = search  # the policies look it up when traced
        try:
            evade = jax.jit(jax.vmap(policies.greedy_evade(env)))
            chase = jax.jit(jax.vmap(policies.greedy_chase(env)))
            variants[name] = (
                evade.lower(keys, obs, states).compile(),
                chase.lower(keys, obs, states).compile(),
            )
        finally:
            policies.bfs_distances_at = original
    for evade, chase in variants.values():  # the same actions
        for policy in (0, 1):
            same = variants["words"][policy](keys, obs, states)
            np.testing.assert_array_equal(
                np.asarray(same), np.asarray((evade, chase)[policy](keys, obs, states))
            )
    times = {name: {"evade": [], "chase": []} for name in variants}
    order = [n for _ in range(args.rounds) for n in ("words", "full", "full", "words")]
    for name in order:
        evade, chase = variants[name]
        times[name]["evade"].append(timed(evade, keys, obs, states, calls=args.calls))
        times[name]["chase"].append(timed(chase, keys, obs, states, calls=args.calls))
    device = jax.devices()[0]
    print(
        f"{args.config}: {args.grids} grids of {env.layout.size}x{env.layout.size} on "
        f"{device.platform} ({device.device_kind})"
    )
    summary = {}
    for policy in ("evade", "chase"):
        words, full = np.median(times["words"][policy]), np.median(times["full"][policy])
        summary[policy] = {
            "words_ms": float(words),
            "full_ms": float(full),
            "speedup": float(full / words),
        }
        print(
            f"  {policy}: {words:.2f} ms per call (word per row) against {full:.2f} ms "
            f"(whole field): {full / words:.2f}x"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"config": args.config, "grids": args.grids, "times": times, "summary": summary},
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
