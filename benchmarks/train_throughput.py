"""Training throughput: ppage_jax's PPO trainer against a minimal PureJaxRL-structured loop
(``benchmarks/pjrl_ippo.py``) on the same environment, network, hyperparameters and batch.

Three things are timed over the same N updates, in one process, compile excluded (each is
compiled and run once before the timed blocks):

- A, compiled update: ppage_jax's update loop (``loop.run_updates`` over the algorithm's
  ``update``, the program ``ppage-jax run`` compiles per chunk) jitted over N updates;
- A, end to end: ``run_training`` as ``ppage-jax run`` calls it (one seed, chunks of updates,
  the host's divergence checks between them), timed from the end of its first chunk to the
  end of its last, as the CLI's progress bar measures its rate (with a single chunk: the
  run's time outside its compile); the CLI's ``env_steps_per_second`` (summary.json: compile
  included) is reported beside it;
- B, the reference: PureJaxRL's structure, its update step jitted in a ``lax.scan`` over N
  updates. The network is ppage_jax's own (``ippo.network(tc)``); the bootstrap is
  PureJaxRL's (the next observation's value, one extra pass on the last observation).

Blocks are interleaved A B B A (round r runs the modes in order, round r + 1 in reverse), each
block continues from the state the last one left. Reported: env-steps/s of each mode (median,
min, max over the blocks) and the ratio A / B of env-steps/s per round (> 1: ppage_jax is
faster), its median, min and max.

``--split`` adds a per-update split of ppage_jax's update into separately jitted pieces, each
timed on a stored rollout: the env step (``num_steps`` batched auto-reset steps with the
rollout's actions), the policy forward and sampling, the bootstrap (the value passes the
rollout needs, timed apart: per role, one pass after the scan on the last observations and
the final observations every step gathered, at most ``ippo.truncated_grids`` grids a step,
and a pass on every grid on each step that truncated more grids than that), the learning
phase (GAE and the epochs of minibatch steps), the rest of the compiled update, and the
host's share (end to end minus compiled). ppage_jax's whole rollout is timed too, beside
its env step and forward.

    python benchmarks/train_throughput.py                          # configs/default, IPPO
    python benchmarks/train_throughput.py --updates 48 --blocks 6 --split --json out.json
    python benchmarks/train_throughput.py --algorithm mappo --network mlp
    python benchmarks/train_throughput.py --set env.size=5 --num-envs 4 --num-steps 4 \\
        --updates 2 --blocks 1                                     # does it run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pjrl_ippo import critic_fn, make_parts  # noqa: E402

from ppage_jax.bench.throughput import device_info  # noqa: E402
from ppage_jax.config import load_config, parse_override  # noqa: E402
from ppage_jax.train import algorithm, make_train_config  # noqa: E402
from ppage_jax.train.algorithms import ippo  # noqa: E402
from ppage_jax.train.config import TrainConfig  # noqa: E402
from ppage_jax.train.kit import networks, pg, roles  # noqa: E402
from ppage_jax.train.kit.loop import run_updates  # noqa: E402
from ppage_jax.train.kit.rollout import env_step  # noqa: E402
from ppage_jax.train.run.runner import chunk_size, run_training  # noqa: E402

COMPILED, END_TO_END, REFERENCE = "ppage_jax compiled update", "ppage_jax end to end", "reference"
MIN_BLOCKS = 4  # fewer blocks: the run checks that the script works, it is not a result


# --------------------------------------------------------------------------- config
def train_config(args: argparse.Namespace) -> tuple[TrainConfig, int]:
    """The TrainConfig of ``args`` (the config with its overrides, one seed, and a budget of
    exactly ``args.updates`` updates) and the updates per chunk ``ppage-jax run`` would
    compile for the config's own budget."""
    overrides = dict(parse_override(text) for text in args.overrides)
    if args.algorithm is not None:
        overrides["experiment.algorithm.name"] = args.algorithm
    if args.network is not None:
        overrides["experiment.algorithm.params.network"] = args.network
    if args.num_envs is not None:
        overrides["experiment.num_envs"] = args.num_envs
    if args.num_steps is not None:
        overrides["experiment.algorithm.params.num_steps"] = args.num_steps
    probe = make_train_config(load_config(args.config, overrides))  # the run as configured
    cli_chunk = chunk_size(probe.num_updates)
    overrides["experiment.num_seeds"] = 1
    overrides["experiment.episodes"] = None
    overrides["experiment.total_timesteps"] = args.updates * probe.env_steps_per_update
    tc = make_train_config(load_config(args.config, overrides), env=probe.env)
    if tc.algorithm not in ("ippo", "mappo"):
        raise SystemExit(f"--algorithm: ippo or mappo, the config has {tc.algorithm!r}")
    if not tc.learning_roles:
        raise SystemExit("no role learns in this config (experiment.roles)")
    assert tc.num_updates == args.updates, (tc.num_updates, args.updates)
    return tc, cli_chunk


# --------------------------------------------------------------------------- timing
def _seconds(fn: Callable, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - start


def _compile(fn: Callable, *args: Any) -> tuple[Callable, float]:
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def _stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


class Modes:
    """The three timed loops, compiled, each holding the state its last block left."""

    def __init__(self, tc: TrainConfig, seed: int, end_to_end: bool, chunk: int):
        self.tc, self.seed, self.end_to_end = tc, seed, end_to_end
        # run_training's chunks: the largest divisor of N that is at most ``chunk``
        self.target_chunks = -(-tc.num_updates // chunk)
        self.chunk_updates = chunk_size(tc.num_updates, self.target_chunks)
        self.params = tc.env.default_params
        self.module = algorithm(tc.algorithm)
        key = jax.random.PRNGKey(seed)
        n = tc.num_updates
        self.compile_seconds = {}

        # A: ppage_jax's update loop over N updates (the program of one runner chunk)
        runner = jax.jit(self.module.init)(key, tc, self.params)
        module = self.module

        def chunk(runner, params):
            return run_updates(module.update, runner, tc, params, n)

        self.chunk, self.compile_seconds[COMPILED] = _compile(chunk, runner, self.params)
        (self.runner_a, _), _ = _seconds(self.chunk, runner, self.params)  # warm-up

        # B: the reference's update step in a scan over N updates
        self.parts = make_parts(tc, self.params)
        runner = jax.jit(self.parts.init)(key)
        parts = self.parts

        def reference(runner):
            return jax.lax.scan(parts.update_step, runner, None, n)

        self.reference, self.compile_seconds[REFERENCE] = _compile(reference, runner)
        (self.runner_b, _), _ = _seconds(self.reference, runner)  # warm-up

        if end_to_end:  # warm-up; every run compiles its chunk again (not timed)
            self.compile_seconds[END_TO_END] = self.run(END_TO_END)["compile_seconds"]

    @property
    def names(self) -> list[str]:
        return [COMPILED] + ([END_TO_END] if self.end_to_end else []) + [REFERENCE]

    def run(self, name: str) -> dict:
        """One timed block of ``name``: its seconds and env steps (end to end also the run's
        time without its compile and the CLI's summary.json figure)."""
        env_steps = self.tc.num_updates * self.tc.env_steps_per_update
        if name == COMPILED:
            (self.runner_a, _), seconds = _seconds(self.chunk, self.runner_a, self.params)
            return {"seconds": seconds, "env_steps": env_steps}
        if name == REFERENCE:
            (self.runner_b, _), seconds = _seconds(self.reference, self.runner_b)
            return {"seconds": seconds, "env_steps": env_steps}
        marks = []  # (time, env steps done) at the end of each chunk, as the CLI's bar sees it

        def on_chunk(metrics, done, runner):
            marks.append((time.perf_counter(), done))

        result = run_training(
            self.tc, self.params, self.seed, 1, on_chunk, target_chunks=self.target_chunks
        )
        outside_compile = result.seconds - result.compile_seconds
        if len(marks) >= 2:  # the CLI's rate: from the end of the first chunk to the last
            seconds, steps = marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1]
        else:
            seconds, steps = outside_compile, result.env_steps
        return {
            "seconds": seconds,
            "env_steps": steps,
            "seconds_outside_compile": outside_compile,
            "compile_seconds": result.compile_seconds,
            "summary_env_steps_per_second": result.env_steps / result.seconds,
        }


def time_blocks(modes: Modes, blocks: int, say: Callable[[str], None]) -> dict:
    """``blocks`` rounds of every mode, A B B A; seconds per block and ratios per round."""
    rows = {name: [] for name in modes.names}
    for r in range(blocks):
        order = modes.names if r % 2 == 0 else modes.names[::-1]
        for name in order:
            row = modes.run(name)
            row["env_steps_per_second"] = row["env_steps"] / row["seconds"]
            rows[name].append(row)
        say(
            f"  round {r + 1}/{blocks}: "
            + ", ".join(f"{n} {rows[n][-1]['env_steps_per_second']:,.0f}" for n in order)
            + " env-steps/s"
        )
    out = {"blocks": rows, "modes": {}, "ratios": {}}
    for name, block in rows.items():
        per_update = [b["seconds"] * modes.tc.env_steps_per_update / b["env_steps"] for b in block]
        out["modes"][name] = {
            "env_steps_per_second": _stats([b["env_steps_per_second"] for b in block]),
            "seconds_per_update": _stats(per_update),
        }
        if name == END_TO_END:
            out["modes"][name]["summary_env_steps_per_second"] = _stats(
                [b["summary_env_steps_per_second"] for b in block]
            )
    reference = [b["env_steps_per_second"] for b in rows[REFERENCE]]
    for name in modes.names:
        if name != REFERENCE:
            mine = [b["env_steps_per_second"] for b in rows[name]]
            out["ratios"][name] = _stats([a / b for a, b in zip(mine, reference, strict=True)])
    return out


# --------------------------------------------------------------------------- split
def _timed_piece(fn: Callable, args: tuple, repeats: int) -> float:
    """Median seconds of ``repeats`` runs of ``jit(fn)(*args)`` after a compile and a warm-up."""
    compiled, _ = _compile(fn, *args)
    _seconds(compiled, *args)
    return statistics.median(_seconds(compiled, *args)[1] for _ in range(repeats))


def split(modes: Modes, timing: dict, repeats: int) -> dict:
    """ms per update of ppage_jax's update, by separately jitted pieces on a stored rollout,
    and the reference's rollout and learning phase."""
    tc, params, hp = modes.tc, modes.params, modes.tc.hp
    critic = critic_fn(tc.algorithm)
    runner = modes.runner_a
    key = jax.random.PRNGKey(modes.seed + 1)

    # a stored rollout of the current policy: the trajectories and the actions taken
    _, trajectories, _ = jax.jit(ippo.rollout, static_argnums=3)(runner, tc, params, critic)
    actions = jax.vmap(lambda per_role: pg.role_actions(tc, per_role, runner.env.obs))(
        {role: t.action for role, t in trajectories.items()}
    )  # [T, E, A]

    def env_steps(env, key, actions, keep_inputs=False):
        def body(carry, a):
            env, key = carry
            key, k_fixed, k_env = jax.random.split(key, 3)
            a = roles.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, a)
            after, step = env_step(tc, k_env, env, a, params, hp.gamma)
            return (after, key), ((env.obs, env.state, step) if keep_inputs else step)

        return jax.lax.scan(body, (env, key), actions)[1]

    obs, states, steps = jax.jit(env_steps, static_argnums=3)(runner.env, key, actions, True)

    def forward(learners, key, obs, states):
        def body(key, inp):
            key, k = jax.random.split(key)
            return key, ippo.policy_actions(tc, learners, k, inp[0], inp[1], critic)

        return jax.lax.scan(body, key, (obs, states))[1]

    def bootstrap(learners, final_obs, final_states):
        def body(_, inp):
            final_obs, final_state = inp
            values = {}
            for role, learner in learners.items():
                x = networks.role_input(tc, role, final_obs)
                c = None if critic is None else critic(tc, role, final_state)
                values[role] = learner.apply_fn(learner.params, x, c)[1]
            return None, values

        return jax.lax.scan(body, None, (final_obs, final_states))[1]

    def learn(learners, trajectories, key):
        return {
            role: ippo.learn(
                learner,
                trajectories[role],
                hp,
                jax.random.fold_in(key, i),
                ippo.anneal_steps(tc),
                ippo.optimiser_steps(tc),
            )
            for i, (role, learner) in enumerate(learners.items())
        }

    def rollout(runner):
        return ippo.rollout(runner, tc, params, critic)

    learners = runner.learners
    # Value passes of every role, as the rollout runs them: after the scan, one pass on the
    # last observations and the final observations every step gathered (at most `some` grids
    # a step); during it, a pass on every grid on each step that truncated more than `some`.
    some = ippo.truncated_grids(tc.num_envs)
    full_pass = _timed_piece(bootstrap, (learners, steps.final_obs, steps.final_state), repeats)
    full_pass /= hp.num_steps
    after_scan = jax.tree.map(  # [1, E + T * some]: one pass on as many rows
        lambda a: np.concatenate([a[0], a[:, :some].reshape((-1,) + a.shape[2:])])[None],
        (steps.final_obs, steps.final_state),
    )
    after_scan_pass = _timed_piece(bootstrap, (learners, *after_scan), repeats)
    cut = np.zeros(actions.shape[:2], dtype=bool)  # grids truncated per step: [T, E]
    for t in trajectories.values():
        cut |= np.asarray((t.episode_end & ~t.agent_terminal).any(axis=2))
    wave_steps = int(np.count_nonzero(cut.sum(axis=1) > some))
    bootstrap_seconds = after_scan_pass + wave_steps * full_pass
    seconds = {
        "env_step": _timed_piece(env_steps, (runner.env, key, actions), repeats),
        "policy_forward": _timed_piece(forward, (learners, key, obs, states), repeats),
        "bootstrap": bootstrap_seconds,
        "learning": _timed_piece(learn, (learners, trajectories, key), repeats),
    }
    rollout_seconds = _timed_piece(rollout, (runner,), repeats)

    parts = modes.parts
    ref_runner, ref_traj, ref_last = jax.jit(parts.rollout)(modes.runner_b)
    reference = {
        "rollout": _timed_piece(parts.rollout, (modes.runner_b,), repeats),
        "learning": _timed_piece(parts.learn, (ref_runner, ref_traj, ref_last), repeats),
    }

    ms = {name: 1000 * s for name, s in seconds.items()}
    compiled = 1000 * timing["modes"][COMPILED]["seconds_per_update"]["median"]
    ms["rest_of_compiled"] = compiled - sum(ms.values())
    ms["compiled_update"] = compiled
    if END_TO_END in timing["modes"]:
        end_to_end = 1000 * timing["modes"][END_TO_END]["seconds_per_update"]["median"]
        ms["host"] = end_to_end - compiled
        ms["end_to_end_update"] = end_to_end
    return {
        "ms_per_update": ms,
        "share_of_compiled": {k: ms[k] / compiled for k in seconds}
        | {"rest_of_compiled": ms["rest_of_compiled"] / compiled},
        "value_pass_ms": 1000 * full_pass,
        "after_scan_pass_ms": 1000 * after_scan_pass,
        "gathered_grids": some,
        "bootstrap_wave_steps": wave_steps,
        "rollout_ms": 1000 * rollout_seconds,
        "rollout_minus_env_and_forward_ms": 1000
        * (rollout_seconds - seconds["env_step"] - seconds["policy_forward"]),
        "reference_ms_per_update": {
            **{k: 1000 * v for k, v in reference.items()},
            "compiled_update": 1000 * timing["modes"][REFERENCE]["seconds_per_update"]["median"],
        },
        "num_steps": hp.num_steps,
        "repeats": repeats,
    }


SPLIT_LABELS = {
    "env_step": "env step (num_steps auto-reset steps, the rollout's actions)",
    "policy_forward": "policy forward + sampling (one pass per step)",
    "bootstrap": "bootstrap value passes (last obs + truncated grids)",
    "learning": "learning phase (GAE + epochs x minibatches)",
    "rest_of_compiled": "rest of the compiled update (compiled - the above)",
    "compiled_update": "compiled update",
    "host": "host (end to end - compiled)",
    "end_to_end_update": "end-to-end update",
}


def split_lines(result: dict) -> list[str]:
    ms, share = result["ms_per_update"], result["share_of_compiled"]
    lines = [
        f"per-update split (separately jitted pieces, median of {result['repeats']} runs; "
        f"ms per update, share of the compiled update):"
    ]
    for key, label in SPLIT_LABELS.items():
        if key in ms:
            pct = f"{100 * share[key]:6.1f} %" if key in share else ""
            lines.append(f"  {label:<62} {ms[key]:10.2f} ms {pct}")
    ref = result["reference_ms_per_update"]
    lines.append(
        f"  bootstrap: every role's pass after the scan (last observations and at most "
        f"{result['gathered_grids']} gathered grids a step) {result['after_scan_pass_ms']:.3f} "
        f"ms, and {result['bootstrap_wave_steps']} full-batch passes on steps with more "
        f"truncations ({result['value_pass_ms']:.3f} ms each; a pass on every step would cost "
        f"{result['value_pass_ms'] * result['num_steps']:.2f} ms)"
    )
    lines.append(
        f"  ppage_jax rollout alone {result['rollout_ms']:.2f} ms (minus env step and forward: "
        f"{result['rollout_minus_env_and_forward_ms']:.2f} ms); reference rollout "
        f"{ref['rollout']:.2f} ms, learning {ref['learning']:.2f} ms, compiled update "
        f"{ref['compiled_update']:.2f} ms"
    )
    return lines


# --------------------------------------------------------------------------- output
def write_json(path: Path, results: dict) -> None:
    """``results`` as JSON, written to a temporary file in the same folder, then moved."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, indent=2, default=float) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--config", default="configs/default", help="config directory")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (value read as YAML), e.g. --set env.size=5",
    )
    p.add_argument("--algorithm", choices=("ippo", "mappo"), default=None, help="default: config")
    p.add_argument("--network", choices=("set", "mlp"), default=None, help="default: config")
    p.add_argument("--num-envs", type=int, default=None, help="default: config")
    p.add_argument("--num-steps", type=int, default=None, help="default: config")
    p.add_argument("--updates", type=int, default=24, help="N: updates per timed block")
    p.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="end to end: updates per compiled chunk (at most; a divisor of N); default: the "
        "chunk ppage-jax run uses for the config's budget",
    )
    p.add_argument("--blocks", type=int, default=MIN_BLOCKS, help="timed blocks of each mode")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--no-end-to-end",
        dest="end_to_end",
        action="store_false",
        help="skip the end-to-end mode (run_training; it compiles its chunk every block)",
    )
    p.add_argument("--split", action="store_true", help="add the per-update split")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the results")
    return p


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; print it and return the results (as ``--json`` writes them)."""
    args = parser().parse_args(argv)
    if args.updates < 1 or args.blocks < 1 or (args.chunk is not None and args.chunk < 1):
        raise SystemExit("--updates, --blocks and --chunk must be >= 1")
    tc, cli_chunk = train_config(args)
    chunk = cli_chunk if args.chunk is None else args.chunk
    hp = tc.hp
    device = jax.devices()[0]
    network = ippo.network(tc)
    network_name = (
        "mlp" if network.spec is None or network.spec.network == "mlp" else (network.spec.network)
    )
    env_steps = tc.num_updates * tc.env_steps_per_update
    plays = ", ".join(f"{r}s {p}" for r, p in zip(("predator", "prey"), tc.roles, strict=True))
    print(
        f"train throughput: {args.config}, {tc.algorithm} ({plays}; learning: "
        f"{', '.join(tc.learning_roles)}), network {network_name}, device {device} "
        f"({device.platform})"
    )
    print(
        f"batch {tc.num_envs} grids x {hp.num_steps} steps = {tc.env_steps_per_update:,} env "
        f"steps per update, {hp.update_epochs} epochs x {hp.num_minibatches} minibatches; "
        f"N = {tc.num_updates} updates ({env_steps:,} env steps) per block, {args.blocks} "
        f"blocks of each mode (A B B A)"
    )
    if args.blocks < MIN_BLOCKS:
        print(f"note: fewer than {MIN_BLOCKS} blocks: a check that this runs, not a result")
    modes = Modes(tc, args.seed, args.end_to_end, chunk)
    if args.end_to_end:
        how = (
            "its rate is timed from the end of the first chunk to the end of the last, as "
            "the CLI's bar does"
            if tc.num_updates // modes.chunk_updates >= 2
            else "one chunk: its rate is the run's time outside its compile"
        )
        print(
            f"end to end: run_training in chunks of {modes.chunk_updates} updates (ppage-jax "
            f"run compiles chunks of {cli_chunk} for this config's budget); {how}"
        )
    print(
        "compile (not timed): "
        + ", ".join(f"{name} {s:.1f} s" for name, s in modes.compile_seconds.items())
    )
    timing = time_blocks(modes, args.blocks, print)

    print(f"{'mode':<28} {'median':>14} {'min':>14} {'max':>14}  env-steps/s")
    for name, row in timing["modes"].items():
        s = row["env_steps_per_second"]
        print(f"{name:<28} {s['median']:>14,.0f} {s['min']:>14,.0f} {s['max']:>14,.0f}")
    if END_TO_END in timing["modes"]:
        s = timing["modes"][END_TO_END]["summary_env_steps_per_second"]
        print(
            f"{'  (summary.json style)':<28} {s['median']:>14,.0f} {s['min']:>14,.0f} "
            f"{s['max']:>14,.0f}  incl. each run's compile"
        )
    for name, r in timing["ratios"].items():
        print(
            f"ratio A/B ({name} / reference, env-steps/s; > 1: ppage_jax faster): "
            f"median {r['median']:.3f}, min {r['min']:.3f}, max {r['max']:.3f}"
        )

    results = {
        "config": args.config,
        "overrides": args.overrides,
        "algorithm": tc.algorithm,
        "network": network_name,
        "learning_roles": list(tc.learning_roles),
        "roles": list(tc.roles),
        "device": {"name": str(device), **device_info()},
        "num_envs": tc.num_envs,
        "num_steps": hp.num_steps,
        "env_steps_per_update": tc.env_steps_per_update,
        "update_epochs": hp.update_epochs,
        "num_minibatches": hp.num_minibatches,
        "updates": tc.num_updates,
        "blocks": args.blocks,
        "env_steps_per_block": env_steps,
        "end_to_end_chunk_updates": modes.chunk_updates if args.end_to_end else None,
        "cli_chunk_updates": cli_chunk,
        "compile_seconds": modes.compile_seconds,
        "modes": timing["modes"],
        "ratio": timing["ratios"][COMPILED],
        "ratios": timing["ratios"],
        "block_rows": timing["blocks"],
    }
    if args.split:
        results["split"] = split(modes, timing, max(args.blocks, 3))
        print("\n".join(split_lines(results["split"])))
    if args.json is not None:
        write_json(args.json, results)
        print(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
