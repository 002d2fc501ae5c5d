"""`ppage-jax render` (random and --run) and the run directory's episode.gif."""

import imageio.v3 as iio
import jax
import numpy as np
import pytest

from ppage_jax.cli.main import main

SMALL = ["--set", "env.size=6", "--set", "env.obstacle_percentage=10.0"]
IPPO = SMALL + ["--set", "experiment.algorithm.name=ippo", "--set", "experiment.num_envs=4"]


def test_render_random_episode(tmp_path, capsys):
    out = tmp_path / "sub" / "ep.gif"
    assert (
        main(
            [
                "render",
                "configs/default",
                *SMALL,
                "--out",
                str(out),
                "--max-steps",
                "6",
                "--seed",
                "3",
                "--cell-px",
                "16",
            ]
        )
        == 0
    )
    frames = iio.imread(out, index=None)
    assert frames.shape == (1 + 6, 6 * 16 + 1, 6 * 16 + 1, 3)  # the reset, then 6 turns
    assert "7 frames (6 turns, random actions, seed 3)" in capsys.readouterr().out


def test_render_errors(tmp_path, capsys):
    assert (
        main(
            ["render", "configs/default", "--run", str(tmp_path), "--out", str(tmp_path / "x.gif")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "no checkpoint" in err and "config.yaml --run" in err
    with pytest.raises(SystemExit) as exit_:  # checked while the command line is parsed
        main(["render", "configs/default", "--max-steps", "0"])
    assert exit_.value.code == 2
    assert "argument --max-steps: must be an integer >= 1, got '0'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def untrained_ippo_run(tmp_path_factory):
    """A run directory holding an (untrained) IPPO checkpoint and its resolved config."""
    from ppage_jax.cli.args import load_cli_config
    from ppage_jax.cli.main import build_parser
    from ppage_jax.train import make_train_config
    from ppage_jax.train.run.checkpoint import save_checkpoint, template_policy
    from ppage_jax.train.run.report import CHECKPOINT_FILE, write_config

    run_dir = tmp_path_factory.mktemp("run")
    config = load_cli_config(build_parser().parse_args(["run", "configs/1v1", *IPPO]))
    tc = make_train_config(config)
    rng = np.random.default_rng(0)  # random network weights of the right shapes, one seed
    policies = jax.tree.map(
        lambda s: rng.normal(0.0, 0.5, s.shape).astype(s.dtype), template_policy(tc, num_seeds=1)
    )
    save_checkpoint(run_dir / CHECKPOINT_FILE, tc, policies)
    write_config(run_dir, config)
    return run_dir, tc, policies


@pytest.mark.slow  # a run through the CLI
def test_render_run_uses_the_checkpoint(untrained_ippo_run, tmp_path, capsys):
    from ppage_jax.train.run.policy import trained_policy
    from ppage_jax.viz.run_gif import write_run_gif

    run_dir, tc, policies = untrained_ippo_run
    out = tmp_path / "trained.gif"
    assert (
        main(
            [
                "render",
                str(run_dir / "config.yaml"),
                "--run",
                str(run_dir),
                "--out",
                str(out),
                "--max-steps",
                "8",
                "--seed",
                "5",
            ]
        )
        == 0
    )
    assert "trained policy of" in capsys.readouterr().out
    # the greedy policy is the network's argmax for the learning roles
    from ppage_jax.train import algorithm

    obs, state = jax.jit(tc.env.reset)(jax.random.PRNGKey(1))
    greedy = algorithm("ippo").greedy_actions(
        tc, jax.tree.map(lambda x: x[0], policies), jax.random.PRNGKey(2), obs[None]
    )[0]
    acts = trained_policy(tc, policies)(jax.random.PRNGKey(2), obs, state)
    np.testing.assert_array_equal(np.asarray(acts), np.asarray(greedy))
    # what `ppage-jax run` writes into its run directory: the same greedy episode
    path = write_run_gif(run_dir, tc.env, trained_policy(tc, policies), seed=5, max_steps=8)
    assert path == run_dir / "episode.gif"
    np.testing.assert_array_equal(iio.imread(path, index=None), iio.imread(out, index=None))
    # a checkpoint that does not fit the config is refused with a hint
    assert main(["render", "configs/default", "--run", str(run_dir)]) == 2
    assert "config.yaml --run" in capsys.readouterr().err


def test_sampled_policy_draws_from_the_learner_and_needs_a_run(untrained_ippo_run, capsys):
    from ppage_jax.train.run.policy import trained_policy

    _, tc, policies = untrained_ippo_run
    obs, state = jax.jit(tc.env.reset)(jax.random.PRNGKey(1))
    sampled = jax.jit(trained_policy(tc, policies, mode="sampled"))
    greedy = jax.jit(trained_policy(tc, policies))
    keys = jax.random.split(jax.random.PRNGKey(3), 32)
    draws = {tuple(np.asarray(sampled(k, obs, state))[:1]) for k in keys}
    argmax = {tuple(np.asarray(greedy(k, obs, state))[:1]) for k in keys}
    assert len(argmax) == 1 and len(draws) > 1  # the predator's action varies with the key
    with pytest.raises(ValueError, match="policy mode must be greedy or sampled, got 'mean'"):
        trained_policy(tc, policies, mode="mean")
    assert main(["render", "configs/1v1", "--policy", "sampled"]) == 2
    assert capsys.readouterr().err == "ppage-jax render: --policy sampled needs --run RUN_DIR\n"
