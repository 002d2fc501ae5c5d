"""Training benchmark on configs/1v1 (PPAGE's dqn_1v1 preset: predator speed 2, prey speed 1,
10x10, 20 % obstacles, 500-turn cap):

1. baselines: random predators and the greedy shortest-path chase, against random prey and
   against greedy-evade prey;
2. IPPO predators trained against random prey (the preset's local_radius r=8 observation,
   and the egocentric grid observation r=9), evaluated greedily against random prey and
   against greedy-evade prey;
3. both roles learning (IPPO, as PPAGE trains them): the sampled policies (IPPO's policy as it
   acts), the greedy ones, and random and greedy-chase predators against the same sampled
   prey, over training time;
4. training env-steps/s of every algorithm (compile excluded).

Every evaluation uses the same held-out block of start layouts (PRNGKey(1000000 + j)). Time to
capture is censored at the 500-turn cap: the restricted mean (RMST, with a 95 % bootstrap CI)
and the Kaplan-Meier median, beside the capture rate and the share of episodes that hit the
cap (docs/evaluation.md).
Writes benchmarks/results/training.{json,md} and training_curves.png.

    python benchmarks/training.py                 # the full run (~15 min on 2 CPU cores)
    python benchmarks/training.py --quick         # small budgets, to check it runs
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
from tables import ROW_KEYS, rmst_cells, write_json

import ppage_jax as pj
from ppage_jax.train import algorithm, make_train_config
from ppage_jax.train.run.evaluate import evaluate
from ppage_jax.train.run.runner import run_training

CONFIG = "configs/1v1"
EVAL_SEED = 1_000_000
OBSERVATIONS = {
    "local_radius r=8 (preset)": {},
    "grid r=9": {
        "observations.type": "grid",
        "observations.params": {"radius": 9},
        "observations.per_agent": None,
    },
}
IPPO = {
    "learning_rate": 1e-3,
    "num_steps": 32,
    "update_epochs": 2,
    "num_minibatches": 4,
    "ent_coef": 0.003,
}


def config(
    algo: str,
    params: dict,
    num_envs: int,
    steps: int,
    prey: str = "learn",
    extra: dict | None = None,
):
    overrides = {
        "experiment.algorithm": {"name": algo, "params": params},
        "experiment.num_envs": num_envs,
        "experiment.total_timesteps": steps,
        "experiment.episodes": None,
        "experiment.roles.preys": prey,
    }
    overrides.update(extra or {})
    return pj.load_config(CONFIG, overrides)


def row(summary: dict) -> dict:
    return {k: summary[k] for k in ROW_KEYS}


def baselines(episodes: int) -> dict:
    tc = make_train_config(config("random", {}, 1, 1))
    which = {
        f"{p} predators vs {q} prey": (p, q)
        for q in ("random", "evade")
        for p in ("random", "chase")
    }
    out = evaluate(tc, {}, tc.env.default_params, EVAL_SEED, episodes, which=which)
    return {name: row(v) for name, v in out.items()}


def ippo_vs_random_prey(name: str, extra: dict, steps: int, episodes: int) -> dict:
    tc = make_train_config(config("ippo", IPPO, 256, steps, prey="random", extra=extra))
    result = run_training(tc, tc.env.default_params, 42, 1)
    which = {
        "sampled, vs random prey": ("sampled", "random"),
        "sampled, vs evade prey": ("sampled", "evade"),
        "greedy, vs random prey": ("greedy", "random"),
        "greedy, vs evade prey": ("greedy", "evade"),
    }
    out = evaluate(tc, result.policies, tc.env.default_params, EVAL_SEED, episodes, which=which)
    print(f"  {name}: {result.env_steps:,} steps in {result.seconds:.0f} s")
    return {
        "observation": name,
        "env_steps": result.env_steps,
        "train_seconds": result.seconds,
        "compile_seconds": result.compile_seconds,
        "results": {k: row(v) for k, v in out.items()},
    }


def both_roles_learning(extra: dict, steps: int, episodes: int, evals: int) -> list[dict]:
    tc = make_train_config(config("ippo", IPPO, 256, steps, extra=extra))
    module = algorithm("ippo")
    which = {
        "sampled": ("sampled", "sampled"),
        "greedy": ("greedy", "greedy"),
        "random predators": ("random", "sampled"),
        "chase predators": ("chase", "sampled"),
    }
    curve, start = [], time.perf_counter()
    every = max(1, 40 // evals)
    count = {"chunks": 0}

    def on_chunk(metrics, env_steps, runner):
        count["chunks"] += 1
        if count["chunks"] % every:
            return
        elapsed = time.perf_counter() - start
        out = evaluate(
            tc, module.policy_state(runner), tc.env.default_params, EVAL_SEED, episodes, which=which
        )
        curve.append(
            {"env_steps": env_steps, "seconds": elapsed, **{k: row(v) for k, v in out.items()}}
        )
        print(
            f"  {env_steps:>10,} steps {elapsed:6.0f} s: RMST to capture (capture rate) "
            + ", ".join(f"{k} {v['rmst']:.1f} ({v['capture_rate']:.2f})" for k, v in out.items())
        )

    run_training(tc, tc.env.default_params, 42, 1, on_chunk)
    return curve


# PPAGE's dqn_1v1 experiment_dqn.yaml (double + dueling), vectorised over 32 grids.
D3QN = {
    "learning_rate": 1e-3,
    "gamma": 0.99,
    "epsilon": 1.0,
    "epsilon_decay": 0.998,
    "min_epsilon": 0.05,
    "double_dqn": True,
    "dueling": True,
    "batch_size": 256,
    "buffer_size": 50_000,
    "target_update_interval": 100,
    "hidden_layers": [64, 64],
}


def throughput(steps: int) -> dict:
    setups = {
        "ippo": ("ippo", IPPO, 256),
        "dqn (D3QN preset)": ("dqn", D3QN, 32),
        "iql": ("iql", {}, 256),
        "cql": ("cql", {}, 256),
        "mixed": ("mixed", {}, 256),
        "random (no learning)": ("random", {}, 256),
    }
    out = {}
    for name, (algo, params, num_envs) in setups.items():
        tc = make_train_config(config(algo, params, num_envs, steps))
        result = run_training(tc, tc.env.default_params, 42, 1)
        run_seconds = result.seconds - result.compile_seconds
        out[name] = {
            "num_envs": tc.num_envs,
            "env_steps": result.env_steps,
            "env_steps_per_second": result.env_steps / run_seconds,
            "compile_seconds": result.compile_seconds,
        }
        print(
            f"  {name}: {out[name]['env_steps_per_second']:,.0f} env-steps/s "
            f"(compile {result.compile_seconds:.1f} s)"
        )
    return out


def markdown(results: dict) -> str:
    head = "RMST to capture [95 % CI] | KM median | capture rate | hit the 500-turn cap"
    lines = [
        f"Device: {results['device']}; {results['eval_episodes']} held-out episodes "
        f"per row; time to capture censored at the 500-turn cap.",
        "",
        f"| predators | prey | {head} |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results["baselines"].items():
        pred, prey = name.split(" vs ")
        lines.append(f"| {pred} | {prey} | {rmst_cells(r)} |")
    for run in results["ippo_vs_random_prey"]:
        for name, r in run["results"].items():
            mode, prey = name.split(", vs ")
            lines.append(
                f"| IPPO, {run['observation']}, {mode} ({run['env_steps'] / 1e6:.1f} M "
                f"steps, {run['train_seconds']:.0f} s) | {prey} | {rmst_cells(r)} |"
            )
    lines += [
        "",
        "Both roles learning (IPPO, grid r=9); each row's predators against the "
        "learning prey's sampled policy (greedy: both roles greedy):",
        "",
        f"| env steps | seconds | predators | {head} |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in results["both_roles"]:
        for key in ("sampled", "greedy", "random predators", "chase predators"):
            cells = rmst_cells(p[key])
            lines.append(f"| {p['env_steps']:,} | {p['seconds']:.0f} | {key} | {cells} |")
    lines += ["", "| algorithm | grids | training env-steps/s | compile s |", "|---|---|---|---|"]
    for name, r in results["throughput"].items():
        lines.append(
            f"| {name} | {r['num_envs']} | {r['env_steps_per_second']:,.0f} | "
            f"{r['compile_seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    from ppage_jax.viz import figures as plt

    curve = results["both_roles"]
    if not curve:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    t = [p["seconds"] for p in curve]
    for key in ("sampled", "greedy", "random predators", "chase predators"):
        axes[0].plot(t, [p[key]["capture_rate"] for p in curve], marker="o", label=key)
        axes[1].plot(t, [p[key]["rmst"] for p in curve], marker="o", label=key)
        axes[1].fill_between(
            t,
            [p[key]["rmst_ci"][0] for p in curve],
            [p[key]["rmst_ci"][1] for p in curve],
            alpha=0.2,
        )
    axes[0].set_title("capture rate within 500 turns (vs the learning prey)")
    axes[1].set_title("RMST: mean turns to capture, censored at 500 (95 % CI)")
    for ax in axes:
        ax.set_xlabel("training wall-clock seconds (2 CPU cores)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small budgets (a smoke run)")
    parser.add_argument(
        "--steps", type=int, default=10_000_000, help="IPPO env steps per training run"
    )
    parser.add_argument("--episodes", type=int, default=1000, help="evaluation episodes")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    steps, episodes, speed_steps = args.steps, args.episodes, 2_000_000
    if args.quick:
        steps, episodes, speed_steps = 200_000, 100, 100_000
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"device": str(jax.devices()[0]), "eval_episodes": episodes}
    print("baselines")
    results["baselines"] = baselines(episodes)
    print("IPPO predators trained against random prey")
    results["ippo_vs_random_prey"] = [
        ippo_vs_random_prey(name, extra, steps, episodes) for name, extra in OBSERVATIONS.items()
    ]
    print("both roles learning (IPPO, grid r=9)")
    results["both_roles"] = both_roles_learning(
        OBSERVATIONS["grid r=9"], steps, min(episodes, 300), 8
    )
    print("training throughput")
    results["throughput"] = throughput(speed_steps)
    write_json(out / "training.json", results)
    table = markdown(results)
    (out / "training.md").write_text(table)
    plot(results, out / "training_curves.png")
    print(table)


if __name__ == "__main__":
    main()
