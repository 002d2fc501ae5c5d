"""Frozen opponents and `ppage-jax crossplay`: a role played by another run's policy keeps its
weights bit for bit through training, bad settings fail with one line, and cross-play of two
tiny runs writes its table."""

from __future__ import annotations

import csv

import jax
import numpy as np
import pytest
from train_testing import OPTIMAL_STEPS, tiny_config, train_seeds, untrained_policies

from ppage_jax.cli.main import main
from ppage_jax.config import ConfigError
from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import ippo, mappo
from ppage_jax.train.run import report
from ppage_jax.train.run.checkpoint import save_checkpoint


def frozen_prey(run_dir, **setting):
    return {
        "experiment.roles": {"predators": "learn", "preys": {"policy": str(run_dir), **setting}}
    }


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    """An IPPO run directory (both roles learn; 2 seeds, weights as initialised)."""
    path = tmp_path_factory.mktemp("run_a")
    config = tiny_config("ippo", {"num_steps": 16})
    tc = make_train_config(config)
    report.write_config(path, config)
    policies = untrained_policies(tc)
    save_checkpoint(path / report.CHECKPOINT_FILE, tc, policies)
    return path, tc, policies


@pytest.fixture(scope="module")
def run_b(run_a, tmp_path_factory):
    """MAPPO predators trained against run A's prey (seed 1 of its two), frozen."""
    a_path, _, a_policies = run_a
    checkpoint = (a_path / report.CHECKPOINT_FILE).read_bytes()
    config = tiny_config(
        "mappo", {"num_steps": 16}, total_timesteps=512, **frozen_prey(a_path, seed=1)
    )
    tc = make_train_config(config)
    frozen = tc.roles[1]
    before = jax.tree.map(np.array, frozen.weights)
    runner, metrics = train_seeds(tc)
    path = tmp_path_factory.mktemp("run_b")
    report.write_config(path, config)
    save_checkpoint(path / report.CHECKPOINT_FILE, tc, mappo.policy_state(runner))
    return path, tc, frozen, before, checkpoint, a_policies, runner, metrics


@pytest.mark.slow  # two runs
def test_a_frozen_opponent_keeps_its_weights_bit_for_bit(run_a, run_b):
    _, tc, frozen, before, checkpoint, a_policies, runner, metrics = run_b
    a_path = run_a[0]
    assert tc.learning_roles == ("predator",)
    assert frozen.startswith(f"policy {a_path} (seed 1, checkpoint ") and frozen.role == "prey"
    assert set(mappo.policy_state(runner)) == {"predator"}  # nothing of the prey trains here
    seed1 = jax.tree.map(lambda a: np.asarray(a[1]), a_policies)
    jax.tree.map(np.testing.assert_array_equal, before, seed1)  # loaded exactly
    jax.tree.map(np.testing.assert_array_equal, frozen.weights, before)  # untouched
    assert (a_path / report.CHECKPOINT_FILE).read_bytes() == checkpoint
    reloaded = make_train_config(
        tiny_config("mappo", {"num_steps": 16}, **frozen_prey(a_path, seed=1))
    ).roles[1]
    jax.tree.map(np.testing.assert_array_equal, reloaded.weights, before)
    assert reloaded == frozen and hash(reloaded) == hash(frozen)  # same jit constant
    assert np.isfinite(np.asarray(metrics["losses"]["actor_loss/predator"])).all()


@pytest.mark.slow  # two runs
def test_the_frozen_role_acts_as_its_run_trained_it(run_a, run_b):
    _, a_tc, _ = run_a
    _, tc, frozen, before, *_ = run_b
    params = tc.env.default_params
    obs, state = tc.env.reset(jax.random.PRNGKey(3), params)
    key = jax.random.PRNGKey(4)
    mine = frozen.policy(tc.env, params)(key, obs, state)
    theirs = ippo.sample_actions(a_tc, jax.tree.map(np.asarray, before), key, obs[None])[0]
    assert int(mine[2]) == int(theirs[2])  # the prey's row


@pytest.mark.slow  # two runs
def test_bad_frozen_settings_fail_with_one_line(run_a, run_b, tmp_path):
    a_path = run_a[0]
    with pytest.raises(
        ConfigError,
        match=r"roles.preys.policy = .*must be a run directory "
        r"written by ppage-jax run \(it lacks "
        r"\['config.yaml', 'checkpoint.msgpack'\]\)",
    ):
        tiny_config("ippo", **frozen_prey(tmp_path))
    with pytest.raises(
        ConfigError,
        match=r"roles.preys.sed = 1: unknown key; allowed keys: "
        r"\['greedy', 'policy', 'seed'\]",
    ):
        tiny_config("ippo", **frozen_prey(a_path, sed=1))
    with pytest.raises(ConfigError, match=r"roles.preys.seed = 2: must be in \[0, 2\)"):
        make_train_config(tiny_config("ippo", **frozen_prey(a_path, seed=2)))
    with pytest.raises(ConfigError, match="that run did not train its preys"):
        make_train_config(tiny_config("ippo", **frozen_prey(run_b[0])))
    bigger = tiny_config("ippo", **frozen_prey(a_path), **{"env.size": 6})
    with pytest.raises(ConfigError, match="that run's size is 5, this config's is 6"):
        make_train_config(bigger)


@pytest.mark.slow  # two runs
def test_crossplay_of_two_tiny_runs_writes_its_table(run_a, run_b, tmp_path, capsys):
    a, b = str(run_a[0]), str(run_b[0])
    assert main(["crossplay", a, b, "--episodes", "4", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "4 held-out episodes per pairing" in printed
    with open(tmp_path / "crossplay.csv") as handle:
        rows = list(csv.DictReader(handle))
    pairs = [(r["predators"], r["prey"]) for r in rows]
    predators = [a, b, "random", "greedy BFS chase"]  # run B froze its prey: not listed
    prey = [a, "random", "greedy BFS evade"]
    assert pairs == [(p, q) for p in predators for q in prey]
    for row in rows:
        assert int(row["episodes"]) == 4
        if row["predators"] == "greedy BFS chase":  # the prey cannot move: 6 turns
            assert float(row["rmst"]) == OPTIMAL_STEPS == float(row["km_median"])
            assert float(row["capture_rate"]) == 1.0 and float(row["truncated_share"]) == 0.0
    markdown = (tmp_path / "crossplay.md").read_text()
    assert f"| predators \\ prey | {a} | random | greedy BFS evade |" in markdown
    assert markdown.count("\n| ") == 2 * 1 + 12 + 4  # two header rows, pairings, matrix
    assert main(["crossplay", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "cannot cross-play" in capsys.readouterr().err


@pytest.mark.slow  # a run
def test_crossplay_out_that_is_a_file_fails_before_playing(run_a, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["crossplay", str(run_a[0]), "--out", str(taken)]) == 2
    assert "is an existing file, not a directory" in capsys.readouterr().err
