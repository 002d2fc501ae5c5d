"""Run the configured experiment. With `experiment.algorithm: random` this is a random-policy
rollout of `num_envs` grids for `total_timesteps` env steps that prints episodes, captures,
mean episode length and per-term returns per role."""
from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from ppage_jax.cli import add_config_arguments, load_cli_config
from ppage_jax.env import make
from ppage_jax.policies import random_policy
from ppage_jax.rollout import rollout_summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)


def main(args: argparse.Namespace) -> int:
    config = load_cli_config(args)
    env = make(config)
    exp = config["experiment"]
    num_envs = exp["num_envs"]
    num_steps = max(1, exp["total_timesteps"] // num_envs)
    print(f"config {config.path} (hash {config.hash()}), {env.num_agents} agents "
          f"{env.agent_names}, {env.layout.size}x{env.layout.size}, "
          f"{env.layout.num_obstacles} obstacles, terms {env.reward_terms}")
    print(f"random policy: {num_envs} grids x {num_steps} turns on {jax.devices()[0].platform}")
    start = time.perf_counter()
    summary = rollout_summary(env, random_policy(env), jax.random.PRNGKey(exp["seed"]),
                              num_envs, num_steps)
    elapsed = time.perf_counter() - start
    print_summary(env, summary)
    print(f"{num_envs * num_steps / elapsed:,.0f} env-steps/s including compile "
          f"({elapsed:.1f} s)")
    return 0


def print_summary(env, summary: dict) -> None:
    episodes = int(summary["episodes"])
    print(f"episodes finished: {episodes} (terminated {int(summary['terminated'])}, "
          f"truncated only {int(summary['truncated'])})")
    if episodes == 0:
        return
    print(f"captures: {int(summary['captures'])} "
          f"({summary['captures'] / episodes:.2f} per episode)")
    print(f"mean episode length: {summary['length_sum'] / episodes:.1f} turns")
    print("mean per-term return per agent, by role:")
    print(f"  {'term':<20}{'predator':>12}{'prey':>12}")
    is_pred = np.asarray(env.is_predator)
    returns = summary["term_returns"] / episodes
    for t, name in enumerate(env.reward_terms):
        pred = returns[is_pred, t].mean() if is_pred.any() else 0.0
        prey = returns[~is_pred, t].mean() if (~is_pred).any() else 0.0
        print(f"  {name:<20}{pred:>12.2f}{prey:>12.2f}")
