"""PPAGE parity: each of PPAGE's eight learning baselines on configs/1v1 (PPAGE's dqn_1v1
preset: predator speed 2, prey speed 1, 10x10, 20 % obstacles, 500-turn cap, local_radius
r=8 observations), with PPAGE's hyperparameters and episode budgets, both roles learning as
PPAGE trains them.

Per algorithm, on one held-out block of start layouts (PRNGKey(1000000 + j)), each row
against the same prey: the trained predators as they act (sampled for the actor-critic
family, greedy otherwise) and random predators; for the value-based learners also both roles
epsilon-greedy at the final epsilon (``min_epsilon``, what PPAGE's ``evaluate()`` plays) and
random predators against that prey. Each row: the time to capture censored at the cap
(restricted mean, RMST, and the Kaplan-Meier median: the primary figure, since random
predators already capture in most 500-turn episodes) and the capture rate. Per algorithm:
PPAGE's own measure, the share of training episodes (exploring, against the learning prey)
that end in capture, overall and in the last quarter, beside PPAGE's documented figure; and
the training wall-clock and CPU seconds (compile included) with the 1-minute load average.

PPAGE runs one environment (A3C: one per worker); here ``--num-envs`` grids step together
(default 16; the epsilon schedules decay per finished episode, so they follow the same course
per episode of experience; the networks make one gradient step per turn over all grids, so
fewer steps per episode). ``--num-envs 1`` (4 for a3c's 4 workers) makes PPAGE's updates.

    python benchmarks/ppage_parity.py                    # PPAGE's budgets, 16 grids
    python benchmarks/ppage_parity.py --merge --num-envs 1 --only dqn   # a 1-grid row
    python benchmarks/ppage_parity.py --quick            # 40 episodes each, to check it runs
Writes benchmarks/results/ppage_parity.{json,md} (``--merge`` keeps the other rows).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tables import ROW_KEYS, cpu_seconds, rmst_cells, write_json

import ppage_jax as pj
from ppage_jax.episodes import episode_keys, play_episodes, summarize_episodes
from ppage_jax.policies import PREDATOR_POLICIES
from ppage_jax.train import make_train_config
from ppage_jax.train.registry import algorithm
from ppage_jax.train.run.evaluate import evaluate, is_stochastic, matchup_policy
from ppage_jax.train.run.runner import run_training

CONFIG = "configs/1v1"
NUM_ENVS = 16
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
        "80.3 % of training episodes",
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
        "75.1 % of training episodes (35.4 % before normalize_returns)",
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
        "28 % -> 74 % of training episodes, first -> last quarter",
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
        "32.2 % -> 78.2 % of training episodes, first -> last quarter",
    ),
    "jalgt": ("jalgt", TABULAR, 1000, "not documented (legacy)"),
}
# Rows for value-based learners played as PPAGE's act at the end of training.
EPSILON_ROWS = {"trained, eps-greedy": "trained", "random vs eps-greedy prey": "random"}


def run(name: str, num_envs: int, episodes: int | None, eval_episodes: int, seeds: int) -> dict:
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
    cpu_start = cpu_seconds()
    result = run_training(tc, tc.env.default_params, 42, seeds)
    train_cpu = cpu_seconds() - cpu_start
    load = os.getloadavg()
    which = {"trained": ("trained", "trained"), "random predators": ("random", "trained")}
    out = evaluate(
        tc, result.policies, tc.env.default_params, EVAL_SEED, eval_episodes, which=which
    )
    if not is_stochastic(algorithm(tc.algorithm)):
        epsilon = float(params["min_epsilon"])
        for row, predators in EPSILON_ROWS.items():
            out[row] = epsilon_greedy(
                tc, result.policies, tc.env.default_params, epsilon, predators, eval_episodes
            )
            which[row] = None
    episodes_done = int(result.metrics["episodes"].sum()) // seeds
    in_training = training_capture(result.metrics)
    print(
        f"  {name}: {episodes_done} episodes, {result.env_steps:,} steps in "
        f"{result.seconds:.0f} s ({train_cpu:.0f} CPU s, load {load[0]:.2f}); trained RMST "
        f"{out['trained']['rmst']:.1f}, capture "
        f"{out['trained']['capture_rate']:.2f}; random predators RMST "
        f"{out['random predators']['rmst']:.1f}; training capture "
        f"{in_training['overall']:.3f} (last quarter {in_training['last_quarter']:.3f})"
    )
    return {
        "name": name,
        "algorithm": algo,
        "episodes": episodes_done,
        "env_steps": result.env_steps,
        "num_envs": num_envs,
        "seeds": seeds,
        "train_seconds": result.seconds,
        "compile_seconds": result.compile_seconds,
        "train_cpu_seconds": train_cpu,
        "load_average": list(load),
        "ppage": figure,
        "training_capture": in_training,
        "rows": list(which),
        **{row: {k: out[row][k] for k in ROW_KEYS} for row in which},
    }


def training_capture(metrics: dict) -> dict:
    """PPAGE's figure: the share of training episodes (exploring, against the learning prey)
    that end in capture, overall and in the first and last quarter of the episodes."""
    done = np.asarray(metrics["episodes"], np.float64)  # [seeds, updates]
    captured = np.nan_to_num(np.asarray(metrics["capture_rate"], np.float64)) * done
    seen = np.cumsum(done, axis=1) - done / 2  # episodes before the middle of each update
    total = done.sum(axis=1, keepdims=True)  # seeds pooled below

    def share(rows) -> float:
        return float(captured[rows].sum() / max(done[rows].sum(), 1.0))

    return {
        "overall": share(slice(None)),
        "first_quarter": share(seen < total / 4),
        "last_quarter": share(seen >= 3 * total / 4),
    }


def epsilon_greedy(tc, policies, params, epsilon: float, predators: str, episodes: int) -> dict:
    """Evaluate with both roles acting epsilon-greedily on their greedy policy, as PPAGE's
    value-based learners act at the end of training (``predators="random"``: uniformly random
    predators against the same prey)."""
    uniform = PREDATOR_POLICIES["random"](tc.env, params)
    is_predator = jnp.asarray(tc.env.is_predator)
    random_predators = predators == "random"
    keys = episode_keys(EVAL_SEED, episodes)

    def play(policy):  # one training seed's policies
        greedy = matchup_policy(tc, policy, params, "greedy", "greedy")

        def act(key, obs, state):
            k_greedy, k_random, k_explore = jax.random.split(key, 3)
            chosen = greedy(k_greedy, obs, state)
            noise = uniform(k_random, obs, state)
            explore = jax.random.uniform(k_explore, chosen.shape) < epsilon
            explore = explore | (is_predator & random_predators)
            return jnp.where(explore, noise, chosen).astype(jnp.int32)

        return play_episodes(tc.env, act, keys, params)

    played = jax.tree.map(np.asarray, jax.device_get(jax.jit(jax.vmap(play))(policies)))
    strata = np.broadcast_to(np.arange(len(played["captured"]))[:, None], played["captured"].shape)
    return summarize_episodes(played, tc.env, horizon=int(params.max_steps), strata=strata)


def row_order(item: tuple[str, dict]) -> tuple[int, int]:
    """Rows in BASELINES order, then by number of grids."""
    key, r = item
    return list(BASELINES).index(r.get("name", key)), -r["num_envs"]


def in_training(r: dict) -> str:
    if "training_capture" not in r:
        return ""
    share = r["training_capture"]
    return f"{100 * share['overall']:.1f} % / {100 * share['last_quarter']:.1f} %"


def grids(r: dict) -> str:
    seeds = r.get("seeds", 1)
    return f"{r['num_envs']}" if seeds == 1 else f"{r['num_envs']} x {seeds} seeds"


def timing(r: dict) -> str:
    if "train_cpu_seconds" not in r:
        return f"{r['train_seconds']:.0f}"
    return f"{r['train_seconds']:.0f} / {r['train_cpu_seconds']:.0f} ({r['load_average'][0]:.2f})"


def markdown(results: dict) -> str:
    lines = [
        f"Device: {results['device']}; {results['eval_episodes']} held-out episodes per "
        f"row; time to capture censored at the 500-turn cap (RMST with its 95 % "
        f"bootstrap CI, Kaplan-Meier median). Random predators capture in most 500-turn "
        f"episodes on this preset, so compare the time to capture. Rows: `trained` plays "
        f"the policy as it acts (sampled: actor-critic family; greedy: the rest), `trained, "
        f"eps-greedy` both roles epsilon-greedy at `min_epsilon` (PPAGE's `evaluate()`), "
        f"random predators play against the prey of the row above. `capture in training` "
        f"is PPAGE's documented measure: the share of training episodes (exploring, against "
        f"the learning prey) that end in capture. Train time: wall / CPU seconds (1-minute "
        f"load average at the end of training), compile included.",
        "",
        "| algorithm | episodes (grids) | train wall s / CPU s (load) | predators "
        "| RMST to capture [95 % CI] | KM median | capture rate "
        "| capture in training: all / last quarter | PPAGE's figure |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in results["rows"].items():
        name = r.get("name", key)
        for i, row in enumerate(r.get("rows", ("trained", "random predators"))):
            head = f"{key} | {r['episodes']} ({grids(r)}) | {timing(r)}" if i == 0 else " | | "
            figure = f"{in_training(r)} | {BASELINES[name][3]}" if i == 0 else " | "
            lines.append(f"| {head} | {row} | {rmst_cells(r[row], truncated=False)} | {figure} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=list(BASELINES), default=list(BASELINES))
    parser.add_argument(
        "--num-envs", type=int, default=NUM_ENVS, help="grids stepped together (PPAGE: 1)"
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="training episodes (default: PPAGE's budget per algorithm)",
    )
    parser.add_argument("--eval-episodes", type=int, default=500)
    parser.add_argument("--seeds", type=int, default=1, help="training seeds (vmapped)")
    parser.add_argument("--quick", action="store_true", help="40 episodes each, 100 evaluated")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument(
        "--merge", action="store_true", help="keep the other rows of an earlier results file"
    )
    parser.add_argument(
        "--render", action="store_true", help="only rewrite the table from the results file"
    )
    args = parser.parse_args()
    episodes, eval_episodes = args.episodes, args.eval_episodes
    if args.quick:
        episodes, eval_episodes = 40, 100
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "ppage_parity_quick" if args.quick else "ppage_parity"
    results = {
        "device": f"{jax.devices()[0]} ({os.cpu_count()} cores)",
        "eval_episodes": eval_episodes,
        "rows": {},
    }
    previous = out / f"{stem}.json"
    if args.render:
        (out / f"{stem}.md").write_text(markdown(json.loads(previous.read_text())))
        return
    if args.merge and previous.exists():  # keep the rows of earlier runs (--only)
        earlier = json.loads(previous.read_text())
        if earlier.get("eval_episodes") == eval_episodes:
            results["rows"] = earlier["rows"]
    for name in args.only:
        key = name if args.num_envs == NUM_ENVS else f"{name}, {args.num_envs} grid(s)"
        results["rows"][key] = run(name, args.num_envs, episodes, eval_episodes, args.seeds)
        results["rows"] = dict(sorted(results["rows"].items(), key=row_order))
        write_json(out / f"{stem}.json", results)
        (out / f"{stem}.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
