"""Train the configured algorithm (the main job), evaluate it greedily on held-out seeds beside
random predators, and write a run directory: config.yaml (resolved, with its hash),
metrics.csv, checkpoint.msgpack, summary.json, learning_curves.png and episode.gif (one
greedy episode of the trained policy)."""
from __future__ import annotations

import argparse
import time

import jax
import numpy as np
from tqdm import tqdm

from ppage_jax.cli.main import add_config_arguments, load_cli_config
from ppage_jax.viz.run_gif import write_run_gif
from ppage_jax.train import make_train_config
from ppage_jax.train import report
from ppage_jax.train.checkpoint import save_checkpoint
from ppage_jax.train.evaluate import evaluate
from ppage_jax.train.runner import run_training


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--out", metavar="RUN_DIR", default=None,
                        help="run directory (default: <output_dir>/<algorithm>-<hash>-<time>)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def main(args: argparse.Namespace) -> int:
    config = load_cli_config(args)
    tc = make_train_config(config)
    env, exp = tc.env, config["experiment"]
    params = env.default_params
    run_dir = report.new_run_dir(config, args.out)
    report.write_config(run_dir, config)
    print(f"config {config.path} (hash {tc.config_hash}): {env.num_agents} agents "
          f"{list(env.agent_names)}, {env.layout.size}x{env.layout.size}, "
          f"{env.layout.num_obstacles} obstacles, observation {env.observation.name} "
          f"({env.observation_size}), terms {list(env.reward_terms)}")
    print(f"training {tc.algorithm} ({', '.join(f'{r}s: {p}' for r, p in zip(('predator', 'prey'), tc.roles))}): "
          f"{exp['num_seeds']} seed(s) x {tc.num_envs} grids x {tc.num_updates} updates of "
          f"{tc.steps_per_update} turns on {jax.devices()[0].platform} -> {run_dir}")

    total = tc.num_updates * tc.env_steps_per_update * exp["num_seeds"]
    bar = tqdm(total=total, unit="step", unit_scale=True, disable=args.no_progress,
               desc="compiling", dynamic_ncols=True)
    last = {"steps": 0, "start": None, "start_steps": 0}

    def on_chunk(metrics: dict, env_steps: int, runner) -> None:
        done = env_steps * exp["num_seeds"]
        now = time.perf_counter()
        if last["start"] is None:    # the first chunk includes the compile: time from here
            bar.set_description(tc.algorithm)
            last["start"], last["start_steps"] = now, done
        bar.update(done - last["steps"])
        last["steps"] = done
        elapsed = now - last["start"]
        rate = (done - last["start_steps"]) / elapsed if elapsed > 0 else float("nan")
        active = np.asarray(metrics["active"])
        capture = np.asarray(metrics["capture_rate"])[active]
        length = np.asarray(metrics["episode_length"])[active]
        text = f"{rate:,.0f} env-steps/s" if np.isfinite(rate) else ""
        if capture.size:
            text += f", capture {np.nanmean(capture):.2f}, ep len {np.nanmean(length):.1f}"
        bar.set_postfix_str(text)

    result = run_training(tc, params, exp["seed"], exp["num_seeds"], on_chunk)
    bar.close()
    steps_per_second = result.env_steps * exp["num_seeds"] / result.seconds
    print(f"trained {result.env_steps:,} env steps per seed in {result.seconds:.1f} s "
          f"({steps_per_second:,.0f} env-steps/s incl. {result.compile_seconds:.1f} s compile)")

    rows = report.metric_rows(tc, result.metrics)
    report.write_metrics(run_dir, rows)
    save_checkpoint(run_dir / report.CHECKPOINT_FILE, tc, result.policies)

    ev = exp["eval"]
    cap = ev["max_steps"] or config["env"]["termination"]["max_steps"]
    evaluation = evaluate(tc, result.policies, params, ev["seed"], ev["episodes"],
                          ev["max_steps"])
    table = report.summary_table(evaluation, cap)
    print(f"\nheld-out evaluation: {ev['episodes']} episodes, seeds "
          f"[{ev['seed']}, {ev['seed'] + ev['episodes']}), greedy actions, "
          f"{exp['num_seeds']} trained seed(s) pooled")
    print(table)
    print(report.TABLE_LEGEND)
    report.plot_learning_curves(run_dir, tc, result.metrics, evaluation.get("random_predators"))
    write_run_gif(run_dir, tc, result.policies, params, seed=ev["seed"])  # episode.gif
    report.write_summary(run_dir, {
        "config_hash": tc.config_hash,
        "algorithm": tc.algorithm,
        "roles": dict(zip(("predators", "preys"), tc.roles)),
        "num_seeds": exp["num_seeds"],
        "num_envs": tc.num_envs,
        "num_updates_run": int(np.asarray(result.metrics["active"]).shape[1]),
        "env_steps_per_seed": result.env_steps,
        "train_seconds": result.seconds,
        "compile_seconds": result.compile_seconds,
        "env_steps_per_second": steps_per_second,
        "device": str(jax.devices()[0]),
        "final_training": report.last_active_rows(rows),
        "evaluation": {"episodes": ev["episodes"], "seed": ev["seed"], "max_steps": cap,
                       "results": evaluation},
    })
    print(f"\nrun directory: {run_dir}")
    return 0
