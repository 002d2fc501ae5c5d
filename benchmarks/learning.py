"""Learning goals (a benchmark, not a test): how fast trained predators capture against fixed
prey, beside the greedy BFS chase against the same prey, after a wall-clock training budget.

- ``1v1``: configs/1v1 (predator speed 2, prey speed 1, 10x10, 20 % obstacles) with its own
  observation (local_radius r=8), predators trained against random prey for five minutes.
  Goal: restricted mean time to capture (RMST) within 1.5x the greedy chase's.
- ``default``: configs/default (3 predators vs 3 speed-3 prey), predators trained against
  greedy-evade prey for fifteen minutes. Goal: a lower RMST than the greedy BFS chase (every
  predator to its nearest prey, no coordination); writes a GIF of a typical episode
  (``--gif``). The chase reads the whole state, so the predators see the whole grid too
  (``local_radius`` r=9), and they are trained on the team reward (the base term with
  ``credit: team``, no distance shaping): every predator pays the step cost until the first
  capture, the quantity the goal measures. The chase is their residual prior (``prior:
  greedy``: the actor reads the chase's action and adds ``prior_logit`` to its logit), and
  the intercept chase teaches them for the first half of the run (``teacher: intercept``,
  annealed away), the team reward alone for the second.
- ``default-kickstart``: goal 2 with a network that reads only its observation (no prior),
  kickstarted from the chase (``teacher: greedy``, annealed over the whole run).
- ``default-residual``: goal 2 with the chase as residual prior and no teacher.
- Goals with a prior add the untrained policy (the prior alone) to their table, and goals
  against greedy-evade prey the intercept chase (a stronger hand-made reference); "x chase"
  has a paired bootstrap CI (the layouts resampled together).
- All: the greedy (argmax) trained predators should hit the step limit in under 5 % of the
  episodes.

Training runs in compiled chunks until the budget (training wall-clock seconds, compile
excluded and reported apart) is spent; the policy is evaluated every ``--eval-every`` seconds
of training on held-out layouts (not counted as training), and at the end on ``--episodes``
layouts beside the chase and random predators (the same layouts, the same prey). Time to
capture is censored at the step limit (RMST with a 95 % bootstrap CI, Kaplan-Meier median;
docs/evaluation.md). Writes benchmarks/results/learning_<goal>.{json,md}.

    python benchmarks/learning.py 1v1
    python benchmarks/learning.py default --gif docs/learning_default.gif
    python benchmarks/learning.py default-kickstart
    python benchmarks/learning.py default-residual
    python benchmarks/learning.py 1v1 --budget 30 --episodes 100    # a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

import jax
import numpy as np
from tables import ROW_KEYS, cpu_seconds, fmt_turns, write_json

import ppage_jax as pj
from ppage_jax.config import parse_override
from ppage_jax.stats.survival import rmst_ratio
from ppage_jax.train import algorithm, make_train_config
from ppage_jax.train.kit.loop import run_updates
from ppage_jax.train.run import report
from ppage_jax.train.run.checkpoint import save_checkpoint
from ppage_jax.train.run.evaluate import evaluate_episodes, summarize_rows
from ppage_jax.train.run.runner import seed_keys

EVAL_SEED = 1_000_000
UNTRAINED = "untrained, the prior alone (sampled)"
INTERCEPT = "intercept chase (heuristic)"


@dataclasses.dataclass(frozen=True)
class Goal:
    config: str
    prey: str  # the fixed prey policy the predators train and play against
    budget: float  # training seconds
    target: float  # trained RMST must be <= target x the chase's
    algorithm: str
    params: dict
    num_envs: int
    steps: int  # env steps the learning rate anneals over (training may stop first)
    overrides: dict = dataclasses.field(default_factory=dict)  # config changes for training


# Every goal: MAPPO with the set encoder, the same settings.
MAPPO_SET = {
    "learning_rate": 1e-3,
    "num_steps": 32,
    "update_epochs": 2,
    "num_minibatches": 4,
    "ent_coef": 0.003,
    "network": "set",
}

ENT_COEF = 0.01
# One pass over each rollout in eight minibatches: the same optimiser steps per update, 1.66x
# the env steps per second with the 19x19 window (12.0 k against 7.3 k on two cores).
ONE_EPOCH = {"update_epochs": 1, "num_minibatches": 8}
# The chase as a residual prior: the actor reads its action and adds 3 to that logit.
RESIDUAL = {"prior": "greedy", "prior_logit": 3.0, "ent_coef": 0.001}
# Goal 2's changes from the preset: the whole grid in view, the team reward, no shaping.
DEFAULT_OVERRIDES = {
    "observations.params.radius": 9,
    "rewards.base.params.credit": "team",
    "rewards.shaping": [],
}

GOALS = {
    "1v1": Goal(
        "configs/1v1",
        "random",
        300.0,
        1.5,
        "mappo",
        MAPPO_SET,
        256,
        4_000_000,
    ),
    # Goal 2: the chase as a residual prior, taught by the intercept chase for the first half
    # of the run, then the team reward alone.
    "default": Goal(
        "configs/default",
        "evade",
        900.0,
        1.0,
        "mappo",
        {
            **MAPPO_SET,
            **ONE_EPOCH,
            **RESIDUAL,
            "teacher": "intercept",
            "teacher_coef": 2.0,
            "teacher_fraction": 0.5,
        },
        256,
        10_000_000,
        DEFAULT_OVERRIDES,
    ),
    # Goal 2 with a network that reads only its observation, kickstarted from the chase.
    "default-kickstart": Goal(
        "configs/default",
        "evade",
        900.0,
        1.0,
        "mappo",
        {
            **MAPPO_SET,
            **ONE_EPOCH,
            "teacher": "greedy",
            "teacher_fraction": 1.0,
            "ent_coef": ENT_COEF,
        },
        256,
        10_000_000,
        DEFAULT_OVERRIDES,
    ),
    # Goal 2 with the chase as a residual prior and no teacher: the policy reads the chase's
    # action and learns when to follow it.
    "default-residual": Goal(
        "configs/default",
        "evade",
        900.0,
        1.0,
        "mappo",
        {**MAPPO_SET, **ONE_EPOCH, **RESIDUAL},
        256,
        10_000_000,
        DEFAULT_OVERRIDES,
    ),
}


def make_config(goal: Goal, args: argparse.Namespace):
    params = dict(goal.params)
    if args.network:
        params["network"] = args.network
    params.update(json.loads(args.params))
    overrides = {
        "experiment.algorithm": {"name": args.algorithm or goal.algorithm, "params": params},
        "experiment.num_envs": goal.num_envs,
        "experiment.total_timesteps": args.steps or goal.steps,
        "experiment.episodes": None,
        "experiment.roles": {"predators": "learn", "preys": goal.prey},
        **goal.overrides,
    }
    overrides.update(dict(parse_override(text) for text in args.set))
    return pj.load_config(goal.config, overrides)


def evaluation(tc, runner, module, episodes: int, which: dict, reps: int = 1000):
    policies = module.policy_state(runner)
    played = evaluate_episodes(
        tc, policies, tc.env.default_params, EVAL_SEED, episodes, None, which
    )
    rows = summarize_rows(tc, played, which, int(tc.env.default_params.max_steps), reps)
    return played, {name: {k: row[k] for k in ROW_KEYS} for name, row in rows.items()}


def train(goal: Goal, args: argparse.Namespace) -> dict:
    config = make_config(goal, args)
    tc = make_train_config(config)
    module = algorithm(tc.algorithm)
    params = tc.env.default_params
    start_cpu, start = cpu_seconds(), time.perf_counter()
    runner = jax.jit(jax.vmap(module.init, in_axes=(0, None, None)))(
        seed_keys(args.seed, 1), tc, params
    )
    size = args.chunk_updates

    def chunk(runner, params):
        return run_updates(module.update, runner, tc, params, size)

    compiled = jax.jit(jax.vmap(chunk, in_axes=(0, None))).lower(runner, params).compile()
    compile_seconds = time.perf_counter() - start
    untrained, untrained_played = {}, {}
    if tc.hp.prior is not None:  # what the prior alone does, before any training
        untrained_played, rows = evaluation(
            tc, runner, module, args.episodes, {UNTRAINED: ("sampled", "trained")}
        )
        untrained = {UNTRAINED: rows[UNTRAINED]}
    print(
        f"{tc.algorithm} ({tc.hp.network or 'default'} encoder), {tc.num_envs} grids, "
        f"compiled in {compile_seconds:.1f} s; training for {args.budget or goal.budget:.0f} s",
        flush=True,
    )
    budget = args.budget or goal.budget
    periodic = {"sampled": ("sampled", "trained"), "greedy": ("greedy", "trained")}
    curve, trained, cpu_trained, updates, next_eval = [], 0.0, 0.0, 0, args.eval_every
    while trained < budget and updates + size <= tc.num_updates:
        t, c = time.perf_counter(), cpu_seconds()
        runner, _ = compiled(runner, params)
        jax.block_until_ready(runner)
        trained += time.perf_counter() - t
        cpu_trained += cpu_seconds() - c
        updates += size
        if trained >= next_eval or trained >= budget:
            next_eval += args.eval_every
            _, rows = evaluation(tc, runner, module, args.curve_episodes, periodic, reps=200)
            steps = updates * tc.env_steps_per_update
            curve.append(
                {
                    "train_seconds": trained,
                    "train_cpu_seconds": cpu_trained,
                    "env_steps": steps,
                    **rows,
                }
            )
            print(
                f"  {trained:6.0f} s ({cpu_trained:6.0f} cpu-s) {steps:>11,} steps: "
                + ", ".join(
                    f"{k} RMST {v['rmst']:.1f} capture {v['capture_rate']:.3f} "
                    f"limit {v['truncated_share']:.3f}"
                    for k, v in rows.items()
                ),
                flush=True,
            )
    which = {
        "trained (sampled)": ("sampled", "trained"),
        "trained (greedy)": ("greedy", "trained"),
        "greedy BFS chase": ("chase", "trained"),
        "random": ("random", "trained"),
    }
    if goal.prey == "evade":  # the chase that heads greedy-evade prey off: a stronger reference
        which[INTERCEPT] = ("intercept", "trained")
    played, final = evaluation(tc, runner, module, args.episodes, which)
    final.update(untrained)
    played.update(untrained_played)
    chase = final["greedy BFS chase"]["rmst"]
    horizon = int(tc.env.default_params.max_steps)
    chase_episodes = times_events(played["greedy BFS chase"])
    paired = {  # the layouts resampled together: x chase with a paired 95 % CI
        name: rmst_ratio(*times_events(episodes), *chase_episodes, horizon)["ratio_ci"]
        for name, episodes in played.items()
    }
    result = {
        "goal": dataclasses.asdict(goal),
        "algorithm": tc.algorithm,
        "params": config["experiment"]["algorithm"]["params"],
        "device": str(jax.devices()[0]),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "compile_seconds": compile_seconds,
        "train_seconds": trained,
        "train_cpu_seconds": cpu_trained,
        "env_steps": updates * tc.env_steps_per_update,
        "eval_episodes": args.episodes,
        "curve": curve,
        "final": final,
        "ratio": {name: row["rmst"] / chase for name, row in final.items()},
        "ratio_ci": paired,
        "total_seconds": time.perf_counter() - start,
        "total_cpu_seconds": cpu_seconds() - start_cpu,
    }
    if args.save:
        run_dir = Path(args.save)
        run_dir.mkdir(parents=True, exist_ok=True)
        report.write_config(run_dir, config)
        save_checkpoint(run_dir / report.CHECKPOINT_FILE, tc, module.policy_state(runner))
    if args.gif:
        result["gif"] = write_gif(
            tc, runner, module, played["trained (sampled)"], final, Path(args.gif)
        )
    return result


def write_gif(tc, runner, module, episodes: dict, final: dict, path: Path) -> dict:
    """A typical episode of the sampled policy: the captured episode whose length is closest
    to the Kaplan-Meier median (the first such episode of the block)."""
    from ppage_jax.train.run.evaluate import matchup_policy
    from ppage_jax.viz.frames import render_episode
    from ppage_jax.viz.frames import write_gif as write_frames

    length = np.asarray(episodes["episode_length"])[0]
    captured = np.asarray(episodes["captured"])[0]
    median = final["trained (sampled)"]["km_median"]
    score = np.where(captured, np.abs(length - median), np.inf)
    j = int(np.argmin(score))
    policy = matchup_policy(
        tc,
        jax.tree.map(lambda a: a[0], module.policy_state(runner)),
        tc.env.default_params,
        "sampled",
        "trained",
    )
    frames = render_episode(
        tc.env,
        jax.random.PRNGKey(EVAL_SEED + j),
        policy,
        tc.env.default_params,
        max_steps=int(length[j]) + 1,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_frames(path, frames, fps=3.0)
    return {"path": str(path), "episode": j, "length": int(length[j])}


def times_events(episodes: dict) -> tuple[np.ndarray, np.ndarray]:
    """Every played episode's length and whether it ended in a capture, flat."""
    return tuple(np.asarray(episodes[k]).reshape(-1) for k in ("episode_length", "captured"))


def paired_ci(r: dict, row_name: str) -> str:
    """`` [low, high]``: the row's paired CI of x chase (absent in results written before the
    CI existed)."""
    ci = r.get("ratio_ci", {}).get(row_name)
    return "" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def markdown(name: str, r: dict) -> str:
    goal, cap = r["goal"], 500
    lines = [
        f"Goal `{name}`: {goal['config']}, {r['algorithm']} predators "
        f"({r['params'].get('network') or 'default'} encoder) against {goal['prey']} prey; "
        f"{r['train_seconds']:.0f} s of training ({r['train_cpu_seconds']:.0f} CPU-s, "
        f"{r['env_steps']:,} env steps, compile {r['compile_seconds']:.0f} s) on "
        f"{r['cpu_count']} CPU cores (load average at the end "
        f"{r['load_average'][0]:.1f}); {r['eval_episodes']} held-out episodes per row.",
        "",
        "Changed from the preset: "
        + (", ".join(f"`{k}: {json.dumps(v)}`" for k, v in goal["overrides"].items()) or "none")
        + f"; hyperparameters `{json.dumps(r['params'])}`.",
        "",
        "| predators | RMST to capture [95 % CI] | x chase [paired 95 % CI] | KM median | "
        "capture rate | hit the step limit |",
        "|---|---|---|---|---|---|",
    ]
    for row_name, row in r["final"].items():
        low, high = row["rmst_ci"]
        lines.append(
            f"| {row_name} | {row['rmst']:.1f} [{low:.1f}, {high:.1f}] | "
            f"{r['ratio'][row_name]:.2f}{paired_ci(r, row_name)} | "
            f"{fmt_turns(row['km_median'], cap)} | "
            f"{100 * row['capture_rate']:.1f} % | "
            f"{100 * row['truncated_share']:.1f} % |"
        )
    lines += [
        "",
        "| training s | CPU s | env steps | sampled RMST | greedy RMST | greedy hit the limit |",
        "|---|---|---|---|---|---|",
    ]
    for p in r["curve"]:
        lines.append(
            f"| {p['train_seconds']:.0f} | {p['train_cpu_seconds']:.0f} | "
            f"{p['env_steps']:,} | {p['sampled']['rmst']:.1f} | "
            f"{p['greedy']['rmst']:.1f} | {100 * p['greedy']['truncated_share']:.1f} % |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("goal", choices=sorted(GOALS))
    parser.add_argument("--budget", type=float, default=None, help="training seconds")
    parser.add_argument("--algorithm", default=None, help="ippo or mappo")
    parser.add_argument("--network", default=None, help="mlp, cnn or set")
    parser.add_argument("--params", default="{}", help="more hyperparameters, as JSON")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="env steps the learning rate anneals over (an upper bound)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--chunk-updates", type=int, default=8)
    parser.add_argument("--eval-every", type=float, default=75.0)
    parser.add_argument("--curve-episodes", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another config override (e.g. observations.type=grid)",
    )
    parser.add_argument("--gif", default=None, help="write a typical episode here")
    parser.add_argument(
        "--save",
        default=None,
        metavar="RUN_DIR",
        help="also write the trained policy as a run directory (config.yaml, "
        "checkpoint.msgpack): ppage-jax evaluate / crossplay read it",
    )
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    result = train(GOALS[args.goal], args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / f"learning_{args.goal}.json", result)
    table = markdown(args.goal, result)
    (out / f"learning_{args.goal}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
