"""Write one episode as an animated GIF, or as a self-contained HTML inspector page when
`--out` ends in .html (replay with a step slider, per-term rewards and returns of every agent):
random actions, or the greedy trained policy of a run (`--run RUN_DIR`, a directory written by
`ppage-jax run`). CONFIG_DIR may be the run's own resolved config:
`ppage-jax render RUN_DIR/config.yaml --run RUN_DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppage_jax.artifacts import check_output_file, prepare_output_dir
from ppage_jax.cli.args import (
    add_config_arguments,
    add_import_argument,
    float_in,
    import_user_modules,
    int_at_least,
    load_cli_config,
    positive_int,
    seed_number,
)
from ppage_jax.defaults import DEFAULT_CELL_PX

# A GIF stores each frame's time in hundredths of a second (at most 655.35 s; the last
# frame is held 5 times as long); pixels per cell and a frame's side are capped so that a
# typo never asks for gigabytes of frames.
MIN_FPS, MAX_FPS = 0.01, 100.0
MAX_CELL_PX = 256
MAX_FRAME_PX = 4096


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    add_import_argument(parser)
    parser.add_argument(
        "--run",
        metavar="RUN_DIR",
        default=None,
        help="act with the trained policy saved in this run directory "
        "(default: uniformly random actions)",
    )
    parser.add_argument(
        "--policy",
        choices=("greedy", "sampled"),
        default="greedy",
        help="with --run: the argmax action (greedy, the default), or actions sampled as the "
        "learner acts in training and in the held-out evaluation (sampled; a deterministic "
        "learner stays greedy)",
    )
    parser.add_argument(
        "--out",
        default="episode.gif",
        help="output path: *.html writes the episode inspector page, anything "
        "else an animated GIF (default episode.gif)",
    )
    parser.add_argument(
        "--seed", type=seed_number, default=None, help="episode seed (default: experiment.seed)"
    )
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        default=100,
        help="stop after this many turns if the episode has not ended (100)",
    )
    parser.add_argument(
        "--fps",
        type=float_in(MIN_FPS, MAX_FPS),
        default=4.0,
        help=f"frames per second, {MIN_FPS:g} to {MAX_FPS:g} (4; the page's initial playback "
        f"speed; a GIF stores frame times in hundredths of a second)",
    )
    parser.add_argument(
        "--cell-px",
        type=int_at_least(8, MAX_CELL_PX),
        default=DEFAULT_CELL_PX,
        help=f"pixels per grid cell of the GIF, 8 to {MAX_CELL_PX} ({DEFAULT_CELL_PX}); a "
        f"frame side (env.size x cell px) may be at most {MAX_FRAME_PX}",
    )


def main(args: argparse.Namespace) -> int:
    prepare_output_dir(Path(args.out).parent, "--out directory")  # OutputError: exit 2
    check_output_file(args.out, "--out")
    import_user_modules(args.imports)
    config = load_cli_config(args)
    from ppage_jax.config.env_spec import env_spec

    size = env_spec(config).size  # before the env is built: a bad --cell-px fails fast
    side = size * args.cell_px
    if side > MAX_FRAME_PX and Path(args.out).suffix.lower() not in (".html", ".htm"):
        print(
            f"ppage-jax render: --cell-px {args.cell_px} makes {side} px frames for a "
            f"{size}x{size} grid; a frame side may be at most {MAX_FRAME_PX} px (use "
            f"--cell-px {max(8, MAX_FRAME_PX // size)} or less)",
            file=sys.stderr,
        )
        return 2
    if args.policy != "greedy" and args.run is None:
        print(f"ppage-jax render: --policy {args.policy} needs --run RUN_DIR", file=sys.stderr)
        return 2
    import jax

    from ppage_jax.env import make
    from ppage_jax.viz.frames import render_episode, write_gif
    from ppage_jax.viz.inspector import write_episode_html

    env = make(config)
    policy, source = None, "random actions"
    if args.run is not None:
        from ppage_jax.train.run.checkpoint import NonFiniteCheckpointError

        try:
            policy, source = run_policy(config, env, Path(args.run), args.policy)
        except NonFiniteCheckpointError as err:  # no other config would help
            print(f"ppage-jax render: {err}", file=sys.stderr)
            return 2
        except (OSError, ValueError) as err:  # missing files, checkpoints that do not fit
            print(
                f"ppage-jax render: {err}\n(to render a run with the config it was trained "
                f"with: ppage-jax render {Path(args.run) / 'config.yaml'} --run {args.run})",
                file=sys.stderr,
            )
            return 2
    seed = config["experiment"]["seed"] if args.seed is None else args.seed
    if Path(args.out).suffix.lower() in (".html", ".htm"):
        title = f"{args.config}: {source}, seed {seed}"
        record = write_episode_html(
            args.out,
            env,
            jax.random.PRNGKey(seed),
            policy,
            max_steps=args.max_steps,
            title=title,
            fps=args.fps,
        )
        print(f"wrote {args.out}: inspector page, {record.turns} turns ({source}, seed {seed})")
        return 0
    frames = render_episode(
        env, jax.random.PRNGKey(seed), policy, max_steps=args.max_steps, cell_px=args.cell_px
    )
    write_gif(args.out, frames, fps=args.fps)
    print(
        f"wrote {args.out}: {len(frames)} frames ({len(frames) - 1} turns, {source}, seed {seed})"
    )
    return 0


def run_policy(config, env, run_dir: Path, mode: str = "greedy"):
    """A trained run's policy, greedy or sampled: (policy(key, obs, state) -> int32[A],
    description)."""
    from ppage_jax.train.run.policy import load_run_policy

    policy = load_run_policy(config, run_dir, env=env, mode=mode)
    return policy, f"trained policy of {run_dir} ({mode})"
