"""PPAGE parity: each of PPAGE's eight learning baselines on configs/1v1 (PPAGE's dqn_1v1
preset: predator speed 2, prey speed 1, 10x10, 20 % obstacles, 500-turn cap, local_radius
r=8 observations), with PPAGE's hyperparameters and episode budgets, both roles learning as
PPAGE trains them.

Per algorithm: the trained predators (as they act: sampled for the actor-critic family,
greedy otherwise) and random predators, each against the same trained prey, on one held-out
block of start layouts (PRNGKey(1000000 + j)); the capture rate within the 500-turn cap, the
time to capture censored at the cap (restricted mean, RMST, and the Kaplan-Meier median),
the training wall-clock seconds (compile included) and PPAGE's documented figure. Random
predators already capture in most 500-turn episodes on this preset, so the capture rate says
little: the time to capture is the primary figure.

PPAGE runs one environment; here ``--num-envs`` grids step together (the epsilon schedules
decay per finished episode, so they follow the same course per episode of experience; the
networks make one gradient step per turn over all grids, so fewer steps per episode).

    python benchmarks/ppage_parity.py                    # PPAGE's budgets
    python benchmarks/ppage_parity.py --quick            # 40 episodes each, to check it runs
    python benchmarks/ppage_parity.py --only dqn a2c     # some rows
Writes benchmarks/results/ppage_parity.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import jax

import ppage_jax as pj
from ppage_jax.train import make_train_config
from ppage_jax.train.evaluate import evaluate
from ppage_jax.train.report import _clean
from ppage_jax.train.runner import run_training

CONFIG = "configs/1v1"
EVAL_SEED = 1_000_000
TABULAR = {"alpha": 0.1, "gamma": 0.99, "epsilon": 1.0, "epsilon_decay": 0.995, "min_epsilon": 0.05}
# name -> (algorithm, PPAGE's hyperparameters, PPAGE's episode budget, PPAGE's figure).
# Tabular: PPAGE's experiment_{iql,cql,mixed}.yaml; the rest: its dqn_1v1 experiment files
# (JAL-GT: its code defaults).
BASELINES: dict[str, tuple[str, dict, int, str]] = {
    "iql": ("iql", TABULAR, 1000, "not documented"),
    "cql": ("cql", TABULAR, 1000, "not documented"),
    "mixed": ("mixed", dict(TABULAR, predator_algo="cql", prey_algo="iql"), 1000, "not documented"),
    "dqn": (
        "dqn",
        {
            "learning_rate": 1e-3,
            "gamma": 0.99,
            "epsilon": 1.0,
            "epsilon_decay": 0.998,
            "min_epsilon": 0.05,
            "double_dqn": True,
            "dueling": True,
            "hidden_layers": [64, 64],
            "buffer_size": 10_000,
            "batch_size": 32,
            "min_replay_size": 32,
            "target_update_interval": 100,
            "grad_clip": 5.0,
            "reward_scale": 1.0,
        },
        2000,
        "80.3 % capture (double + dueling, 2000 episodes)",
    ),
    "actor_critic": (
        "actor_critic",
        {
            "gamma": 0.99,
            "learning_rate": 1e-3,
            "hidden_layers": [64, 64],
            "value_coef": 0.5,
            "entropy_coef": 0.01,
            "actor_weight_decay": 0.001,
            "normalize_returns": True,
            "return_norm_decay": 0.999,
            "grad_clip": 5.0,
        },
        2000,
        "29-36 % capture (tuned)",
    ),
    "a2c": (
        "a2c",
        {
            "gamma": 0.99,
            "hidden_layers": [64, 64],
            "actor_learning_rate": 3e-4,
            "critic_learning_rate": 1e-3,
            "n_steps": 5,
            "entropy_coef": 0.05,
            "actor_weight_decay": 0.001,
            "value_loss_coef": 0.5,
            "grad_clip": 5.0,
        },
        2000,
        "29-36 % capture (tuned)",
    ),
    "a3c": (
        "a3c",
        {
            "gamma": 0.99,
            "learning_rate": 1e-3,
            "hidden_layers": [64, 64],
            "num_workers": 4,
            "n_steps": 5,
            "entropy_coef": 0.01,
            "value_coef": 0.5,
            "actor_weight_decay": 0.001,
            "normalize_returns": True,
            "return_norm_decay": 0.999,
            "grad_clip": 5.0,
        },
        2000,
        "29-36 % capture (tuned)",
    ),
    "jalgt": ("jalgt", TABULAR, 1000, "not documented (legacy)"),
}
ROW_KEYS = ("capture_rate", "rmst", "rmst_ci", "km_median", "km_median_ci", "truncated_share")


def run(name: str, num_envs: int, episodes: int | None, eval_episodes: int) -> dict:
    algo, params, budget, figure = BASELINES[name]
    budget = budget if episodes is None else episodes
    config = pj.load_config(
        CONFIG,
        {
            "experiment.algorithm": {"name": algo, "params": params},
            "experiment.num_envs": num_envs,
            "experiment.total_timesteps": None,
            "experiment.episodes": budget,
            "experiment.seed": 42,
        },
    )
    tc = make_train_config(config)
    result = run_training(tc, tc.env.default_params, 42, 1)
    which = {"trained": ("trained", "trained"), "random predators": ("random", "trained")}
    out = evaluate(
        tc, result.policies, tc.env.default_params, EVAL_SEED, eval_episodes, which=which
    )
    episodes_done = int(result.metrics["episodes"].sum())
    print(
        f"  {name}: {episodes_done} episodes, {result.env_steps:,} steps in "
        f"{result.seconds:.0f} s; trained RMST {out['trained']['rmst']:.1f}, capture "
        f"{out['trained']['capture_rate']:.2f}; random predators RMST "
        f"{out['random predators']['rmst']:.1f}"
    )
    return {
        "algorithm": algo,
        "episodes": episodes_done,
        "env_steps": result.env_steps,
        "num_envs": num_envs,
        "train_seconds": result.seconds,
        "compile_seconds": result.compile_seconds,
        "ppage": figure,
        **{row: {k: out[row][k] for k in ROW_KEYS} for row in which},
    }


def fmt_turns(value) -> str:
    return ">500" if value is None or not math.isfinite(value) else f"{value:.0f}"


def cells(r: dict) -> str:
    low, high = r["rmst_ci"]
    return (
        f"{r['rmst']:.1f} [{low:.1f}, {high:.1f}] | {fmt_turns(r['km_median'])} | "
        f"{100 * r['capture_rate']:.1f} %"
    )


def markdown(results: dict) -> str:
    lines = [
        f"Device: {results['device']}; {results['eval_episodes']} held-out episodes per "
        f"row; time to capture censored at the 500-turn cap (RMST with its 95 % "
        f"bootstrap CI, Kaplan-Meier median). Random predators capture in most 500-turn "
        f"episodes on this preset, so compare the time to capture.",
        "",
        "| algorithm | episodes (grids) | train s | predators | RMST to capture [95 % CI] "
        "| KM median | capture rate | PPAGE's figure |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results["rows"].items():
        for i, row in enumerate(("trained", "random predators")):
            head = (
                f"{name} | {r['episodes']} ({r['num_envs']}) | {r['train_seconds']:.0f}"
                if i == 0
                else " | | "
            )
            figure = r["ppage"] if i == 0 else ""
            lines.append(f"| {head} | {row} | {cells(r[row])} | {figure} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=list(BASELINES), default=list(BASELINES))
    parser.add_argument("--num-envs", type=int, default=16, help="grids stepped together")
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="training episodes (default: PPAGE's budget per algorithm)",
    )
    parser.add_argument("--eval-episodes", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="40 episodes each, 100 evaluated")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    episodes, eval_episodes = args.episodes, args.eval_episodes
    if args.quick:
        episodes, eval_episodes = 40, 100
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"device": str(jax.devices()[0]), "eval_episodes": eval_episodes, "rows": {}}
    for name in args.only:
        results["rows"][name] = run(name, args.num_envs, episodes, eval_episodes)
    stem = "ppage_parity_quick" if args.quick else "ppage_parity"
    (out / f"{stem}.json").write_text(json.dumps(_clean(results), indent=2) + "\n")
    table = markdown(results)
    (out / f"{stem}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
