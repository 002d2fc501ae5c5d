"""Cross-play: every trained predator policy of the given run directories against every trained
prey policy and the baselines (random and greedy BFS-chase predators; random and greedy
BFS-evade prey), all on the same held-out layouts (the first run's eval block unless
--episodes/--seed/--max-steps say otherwise). Each trained policy acts as in its run's
``trained`` row (sampled for a stochastic policy; --greedy for the argmax) on its own
observation. Prints one row per pairing with the censored time to capture (RMST with its
bootstrap CI, Kaplan-Meier median), the capture rate and the share that hit the step limit,
and writes crossplay.csv and crossplay.md (with the RMST matrix) to --out."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from typing import TYPE_CHECKING, Any

from ppage_jax.artifacts import prepare_output_dir, write_text
from ppage_jax.cli.args import nonnegative_int, positive_int, seed_number
from ppage_jax.defaults import ROLES

if TYPE_CHECKING:
    from ppage_jax.policies import Policy

# Baselines every table holds, per role (names of ppage_jax.policies).
BASELINES = {"predator": ("random", "chase"), "prey": ("random", "evade")}
CSV_FILE, MARKDOWN_FILE = "crossplay.csv", "crossplay.md"
COLUMNS = (
    "predators",
    "prey",
    "episodes",
    "capture_rate",
    "km_median",
    "km_median_low",
    "km_median_high",
    "rmst",
    "rmst_low",
    "rmst_high",
    "truncated_share",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dirs",
        metavar="RUN_DIR",
        nargs="+",
        help="directories written by ppage-jax run (same grid size, agent "
        "counts, obstacle count and action table)",
    )
    parser.add_argument("--episodes", type=positive_int, default=None, help="episodes per pairing")
    parser.add_argument(
        "--seed", type=seed_number, default=None, help="first seed of the eval block"
    )
    parser.add_argument("--max-steps", type=positive_int, default=None, help="step cap per episode")
    parser.add_argument(
        "--policy-seed",
        type=nonnegative_int,
        default=0,
        help="which trained seed of each run plays (default 0)",
    )
    parser.add_argument(
        "--greedy",
        action="store_true",
        help="trained policies take the argmax action instead of sampling",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default="crossplay",
        help=f"where {CSV_FILE} and {MARKDOWN_FILE} go (default: ./crossplay)",
    )


def policy_options(
    run_dirs: list[str], config, env, seed: int, greedy: bool
) -> dict[str, list[tuple[str, Any]]]:
    """Per role: ``(name, FrozenPolicy or baseline name)`` for every run that trained the
    role, then the baselines. Names are the run directories (``#i`` added when repeated).
    Raises ValueError naming the run that cannot play here."""
    from ppage_jax.config import ConfigError
    from ppage_jax.train.run.evaluate import BASELINE_LABELS
    from ppage_jax.train.run.experiment import frozen_policy, load_run_config, make_train_config

    options: dict[str, list[tuple[str, Any]]] = {role: [] for role in ROLES}
    for i, run_dir in enumerate(run_dirs):
        learned = make_train_config(load_run_config(run_dir, _not_a_run(run_dir))).learning_roles
        name = run_dir if run_dirs.count(run_dir) == 1 else f"{run_dir}#{i}"
        for role in learned:
            try:
                frozen = frozen_policy(
                    role,
                    {"policy": run_dir, "seed": seed, "greedy": greedy},
                    config,
                    env,
                    key="crossplay",
                )
            except ConfigError as err:  # another layout, a missing seed, ...
                raise ValueError(f"{run_dir}: {err.allowed}") from None
            options[role].append((name, frozen))
    for role in ROLES:
        options[role] += [(BASELINE_LABELS[b], b) for b in BASELINES[role]]
    return options


def _not_a_run(run_dir: str):
    from ppage_jax.config import ConfigError

    return lambda err: ConfigError(
        run_dir, "<run directory>", run_dir, f"must be written by ppage-jax run ({err})"
    )


def _policy(env, params, role: str, what: Any) -> Policy:
    from ppage_jax.policies import PREDATOR_POLICIES, PREY_POLICIES
    from ppage_jax.train.kit.roles import FrozenPolicy

    if isinstance(what, FrozenPolicy):
        return what.policy(env, params)
    table = PREDATOR_POLICIES if role == "predator" else PREY_POLICIES
    return table[what](env, params)


def play_all(
    env, params, options: dict, seed: int, episodes: int, max_steps: int | None
) -> dict[tuple[int, int], dict]:
    """Every (predator option, prey option) pairing on the held-out block, through one
    compiled program (the pairing is a traced choice): ``{(i, j): per-episode arrays}``."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    from ppage_jax.episodes import episode_keys, play_episodes

    is_predator = jnp.asarray(env.is_predator)
    branches = [[_policy(env, params, role, what) for _, what in options[role]] for role in ROLES]
    keys = episode_keys(seed, episodes)

    @jax.jit
    def run(choice):
        def act(key, obs, state):
            k_pred, k_prey = jax.random.split(key)
            pred = lax.switch(choice[0], branches[0], k_pred, obs, state)
            prey = lax.switch(choice[1], branches[1], k_prey, obs, state)
            return jnp.where(is_predator, pred, prey).astype(jnp.int32)

        return play_episodes(env, act, keys, params, max_steps)

    played = {}
    for i in range(len(options["predator"])):
        for j in range(len(options["prey"])):
            played[i, j] = jax.tree.map(
                np.asarray, jax.device_get(run(jnp.asarray([i, j], jnp.int32)))
            )
    return played


def table_rows(options: dict, played: dict, env, horizon: int) -> list[dict]:
    """One dict per pairing with the :data:`COLUMNS`."""
    from ppage_jax.episodes import summarize_episodes

    rows = []
    for (i, j), episodes in played.items():
        s = summarize_episodes(episodes, env, horizon=horizon)
        rows.append(
            {
                "predators": options["predator"][i][0],
                "prey": options["prey"][j][0],
                "episodes": s["episodes"],
                "capture_rate": s["capture_rate"],
                "km_median": s["km_median"],
                "km_median_low": s["km_median_ci"][0],
                "km_median_high": s["km_median_ci"][1],
                "rmst": s["rmst"],
                "rmst_low": s["rmst_ci"][0],
                "rmst_high": s["rmst_ci"][1],
                "truncated_share": s["truncated_share"],
            }
        )
    return rows


def _turns(value: float, cap: int) -> str:
    if not math.isfinite(value):
        return f">{cap}" if math.isinf(value) else "n/a"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def to_markdown(rows: list[dict], options: dict, cap: int, heading: str) -> str:
    """The pairing table and the RMST matrix (predators down, prey across)."""
    lines = [
        "# Cross-play",
        "",
        heading,
        "",
        f"| predators | prey | RMST (turns, <= {cap}) | 95 % CI | KM median | "
        f"capture rate | hit the step limit |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['predators']} | {r['prey']} | {r['rmst']:.1f} | "
            f"[{r['rmst_low']:.1f}, {r['rmst_high']:.1f}] | "
            f"{_turns(r['km_median'], cap)} | {100 * r['capture_rate']:.1f} % | "
            f"{100 * r['truncated_share']:.1f} % |"
        )
    prey = [name for name, _ in options["prey"]]
    rmst = {(r["predators"], r["prey"]): r["rmst"] for r in rows}
    lines += [
        "",
        f"RMST (mean turns to capture, censored at {cap}; lower is better for the predators):",
        "",
        "| predators \\ prey | " + " | ".join(prey) + " |",
        "|---" * (len(prey) + 1) + "|",
    ]
    for name, _ in options["predator"]:
        lines.append(f"| {name} | " + " | ".join(f"{rmst[name, p]:.1f}" for p in prey) + " |")
    return "\n".join(lines) + "\n"


def to_text(rows: list[dict], cap: int) -> str:
    """The printed table, one line per pairing."""
    pred_w = max(9, *(len(r["predators"]) for r in rows)) + 2
    prey_w = max(4, *(len(r["prey"]) for r in rows)) + 2
    header = (
        f"{'predators':<{pred_w}}{'prey':<{prey_w}}{'RMST':>7} {'95 % CI':>15}"
        f"{'KM med':>8}{'captured':>10}{'hit limit':>11}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        ci = f"[{r['rmst_low']:.1f}, {r['rmst_high']:.1f}]"
        lines.append(
            f"{r['predators']:<{pred_w}}{r['prey']:<{prey_w}}{r['rmst']:>7.1f} "
            f"{ci:>15}{_turns(r['km_median'], cap):>8}"
            f"{100 * r['capture_rate']:>9.1f}%{100 * r['truncated_share']:>10.1f}%"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from ppage_jax.config import ConfigError
    from ppage_jax.env import make
    from ppage_jax.train.run.experiment import load_run_config

    first = args.run_dirs[0]
    try:
        config = load_run_config(first, _not_a_run(first))
    except ConfigError as err:
        print(f"cannot cross-play: {err}", file=sys.stderr)
        return 2
    ev = dict(config["experiment"]["eval"])
    for key, value in (
        ("episodes", args.episodes),
        ("seed", args.seed),
        ("max_steps", args.max_steps),
    ):
        if value is not None:
            ev[key] = value
    out = prepare_output_dir(args.out, "--out directory")
    env = make(config)
    params = env.default_params
    cap = ev["max_steps"] or env.spec.max_steps
    assert cap is not None  # the config requires eval.max_steps when the env has no limit
    try:
        options = policy_options(list(args.run_dirs), config, env, args.policy_seed, args.greedy)
    except (ConfigError, ValueError) as err:
        print(f"cannot cross-play: {err}", file=sys.stderr)
        return 2
    if (
        not options["predator"][: -len(BASELINES["predator"])]
        and not options["prey"][: -len(BASELINES["prey"])]
    ):
        print("cannot cross-play: none of the runs trained a role", file=sys.stderr)
        return 2
    played = play_all(env, params, options, ev["seed"], ev["episodes"], cap)
    rows = table_rows(options, played, env, cap)
    mode = "greedy (argmax)" if args.greedy else "as trained (sampled when stochastic)"
    heading = (
        f"{ev['episodes']} held-out episodes per pairing (layouts of seeds "
        f"[{ev['seed']}, {ev['seed'] + ev['episodes']})), step limit {cap}; trained "
        f"policies act {mode}, training seed {args.policy_seed}; time to capture is "
        f"censored at the limit (RMST with 95 % bootstrap CI, Kaplan-Meier median)."
    )
    print(heading + "\n")
    print(to_text(rows, cap))
    write_text(out / CSV_FILE, to_csv(rows))
    write_text(out / MARKDOWN_FILE, to_markdown(rows, options, cap, heading))
    print(f"\nwrote {out / CSV_FILE} and {out / MARKDOWN_FILE}")
    return 0
