"""How often the tabular learners' hashed tables merge distinct observations.

Rolls out uniformly random policies (auto-reset) on a config, collects every agent's
observation (iql keys) and every team's joint observation (cql keys), and reports, per table
size, the distinct observations seen and the share of them that share a table row with another
distinct observation (``ppage_jax.train.algorithms.tabular.collision_rate``).

    python benchmarks/hash_collisions.py                       # configs/default
    python benchmarks/hash_collisions.py --config configs/1v1 --steps 400
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

import ppage_jax as pj
from ppage_jax.policies import random_policy
from ppage_jax.train.algorithms.tabular import collision_rate
from ppage_jax.wrappers import BatchedAutoResetEnv


def observations(config: str, num_envs: int, steps: int, seed: int = 0) -> tuple:
    env = pj.make(config)
    auto = BatchedAutoResetEnv(env, num_envs)
    policy = jax.vmap(random_policy(env))

    @jax.jit
    def run(key):
        obs, state = auto.reset(key)

        def one(carry, k):
            obs, state = carry
            k_act, k_env = jax.random.split(k)
            actions = policy(jax.random.split(k_act, num_envs), obs, state)
            obs, state, *_ = auto.step(k_env, state, actions)
            return (obs, state), obs

        _, seen = jax.lax.scan(one, (obs, state), jax.random.split(key, steps))
        return seen

    seen = np.asarray(run(jax.random.PRNGKey(seed)))  # [T, E, A, F]
    is_pred = np.asarray(env.is_predator)
    per_agent = [seen[:, :, i].reshape(-1, seen.shape[-1]) for i in range(seen.shape[2])]
    teams = {
        role: seen[:, :, rows].reshape(-1, rows.sum() * seen.shape[-1])
        for role, rows in (("predator", is_pred), ("prey", ~is_pred))
        if rows.any()
    }
    return env, per_agent, teams


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="configs/default")
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--table-sizes", default="65536,1048576")
    args = parser.parse_args()
    env, per_agent, teams = observations(args.config, args.envs, args.steps)
    print(
        f"{args.config}: observation {env.observation.name} ({env.observation_size}), "
        f"{args.envs} grids x {args.steps} turns of random play; iql: each agent's own "
        f"table (mean over agents)"
    )
    print(
        f"{'keys':<22}{'table rows':>12}{'distinct obs':>14}{'rows used':>12}{'collision rate':>16}"
    )
    for size in (int(s) for s in args.table_sizes.split(",")):
        agents = [collision_rate(obs, size) for obs in per_agent]
        rows = [("iql (one agent)", {k: float(np.mean([a[k] for a in agents])) for k in agents[0]})]
        rows += [(f"cql ({r} team)", collision_rate(t, size)) for r, t in teams.items()]
        for name, stats in rows:
            print(
                f"{name:<22}{size:>12,}{stats['distinct']:>14,.0f}{stats['rows']:>12,.0f}"
                f"{100 * stats['collision_rate']:>15.1f}%"
            )


if __name__ == "__main__":
    main()
