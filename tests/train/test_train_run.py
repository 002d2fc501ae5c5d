"""`ppage-jax run` / `ppage-jax evaluate` end to end on a tiny config, and experiment.yaml
validation."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from cli_testing import write_run_config

import ppage_jax as pj
from ppage_jax.cli.main import main
from ppage_jax.config import ConfigError
from ppage_jax.train import make_train_config
from ppage_jax.train.run.checkpoint import load_checkpoint
from ppage_jax.train.run.report import ARTIFACTS

# The tiny run of the command-line tests, on an episode budget instead of a step budget.
EPISODE_BUDGET = {
    "algorithm": {"name": "iql", "params": {"table_size": 4096}},
    "num_envs": 16,
    "total_timesteps": None,
    "episodes": 300,
    "eval": {"episodes": 8, "seed": 500, "max_steps": None},
    "checkpoint_every": None,
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    config_dir = write_run_config(tmp_path_factory.mktemp("tiny"), **EPISODE_BUDGET)
    out = tmp_path_factory.mktemp("runs") / "run"
    assert main(["run", str(config_dir), "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.mark.slow  # a full run
def test_run_writes_every_artifact(run_dir, capsys):
    for name in ARTIFACTS:
        assert (run_dir / name).is_file(), name
    config = pj.load_config(run_dir / "config.yaml")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["config_hash"] == config.hash()
    assert summary["version"] == pj.__version__
    assert config["experiment"]["algorithm"]["params"]["alpha"] == 0.1  # defaults resolved
    assert (run_dir / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    with open(run_dir / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {
        "seed",
        "update",
        "env_steps",
        "capture_rate",
        "episode_length",
        "steps_to_capture",
        "return/predator/base",
        "return/prey/survival",
        "loss/td_error/predator",
        "epsilon",
    } <= set(rows[0])
    assert {row["seed"] for row in rows} == {"0", "1"}
    tc = make_train_config(config)
    policies = load_checkpoint(run_dir / "checkpoint.msgpack", tc)
    assert policies["predator"].shape == (2, 2, 4096, 5)  # [seed, agent, ...]
    evaluation = summary["evaluation"]
    assert (evaluation["episodes"], evaluation["seed"], evaluation["max_steps"]) == (8, 500, 20)
    rows = evaluation["rows"]
    # iql is deterministic (no trained_greedy row); both roles learn: predator and prey rows
    assert list(rows) == ["trained", "random", "chase", "prey_random", "prey_evade"]
    trained = rows["trained"]
    assert trained["predators"] == trained["prey"] == "trained (greedy)"
    assert rows["chase"]["predators"] == "greedy BFS chase"
    assert rows["prey_evade"]["prey"] == "greedy BFS evade"
    assert trained["episodes"] == 16  # 8 x 2 seeds
    assert trained["capture_rate"] == 1.0 and trained["truncated_share"] == 0.0
    assert trained["km_median"] == trained["rmst"] == 6.0  # shortest path
    assert trained["rmst_ci"] == trained["km_median_ci"] == [6.0, 6.0]
    assert [s["rmst"] for s in trained["per_seed"]] == [6.0, 6.0]
    assert rows["chase"]["rmst"] == 6.0  # the BFS chase is optimal too (the prey can't move)
    random = rows["random"]
    assert random["rmst"] > 6.0 and random["rmst_ci"][0] <= random["rmst"] <= random["rmst_ci"][1]
    # uncaptured episodes count as censored at the limit: RMST >= mean over captured ones
    assert random["rmst"] == pytest.approx(random["episode_length"])
    if random["truncated_share"] > 0:
        assert random["rmst"] > random["steps_to_capture"]
    assert (run_dir / "capture_curves.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # a full run
def test_run_pictures_are_drawn_from_what_the_run_saved(run_dir, tmp_path):
    """learning_curves.png, episode.gif and episode.html come back the same from the run
    directory's metrics.csv, summary.json, config.yaml and checkpoint."""
    import imageio.v3 as iio

    from ppage_jax.cli.run import picture_label
    from ppage_jax.train.run.policy import load_run_policy
    from ppage_jax.viz.run_figures import plot_learning_curves, read_metrics
    from ppage_jax.viz.run_pictures import write_run_pictures

    again = tmp_path / run_dir.name  # same name: the page's title names the directory
    again.mkdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = read_metrics(run_dir / "metrics.csv")
    assert (rows[0]["seed"], rows[0]["update"], rows[0]["active"]) == (0, 1, True)
    curves = plot_learning_curves(
        again, rows, summary["algorithm"], summary["evaluation"]["rows"]["random"]
    )
    assert curves == again / "learning_curves.png"
    np.testing.assert_array_equal(iio.imread(curves), iio.imread(run_dir / "learning_curves.png"))

    config = pj.load_config(run_dir / "config.yaml")
    env = pj.make(config)
    policy = load_run_policy(config, run_dir, env=env, mode="sampled")
    seed = summary["evaluation"]["seed"]
    label = picture_label("iql", summary["evaluation"]["rows"]["trained"])
    assert label.startswith("iql: trained (greedy) predators vs trained (greedy) prey, seed 0;")
    assert label.endswith(f"RMST {summary['evaluation']['rows']['trained']['rmst']:.1f} turns")
    gif, page = write_run_pictures(again, env, policy, seed=seed, label=label)
    assert gif.read_bytes() == (run_dir / "episode.gif").read_bytes()
    assert page.read_text() == (run_dir / "episode.html").read_text()
    with pytest.raises(ValueError, match="seed index 2 is outside the run's 2 seeds"):
        load_run_policy(config, run_dir, seed_index=2)


@pytest.mark.slow  # a full run
def test_episode_budget_stops_the_run(run_dir):
    with open(run_dir / "metrics.csv") as handle:
        rows = [r for r in csv.DictReader(handle) if r["seed"] == "0"]
    active = [r["active"] == "True" for r in rows]
    episodes = np.cumsum([int(r["episodes"]) for r in rows])
    first_off = active.index(False) if False in active else len(active)
    assert episodes[first_off - 1] >= 300 > episodes[first_off - 2]  # stops right after
    assert not any(active[first_off:])


@pytest.mark.slow  # a second full run
def test_evaluate_reloads_the_checkpoint(run_dir, capsys):
    assert main(["evaluate", str(run_dir), "--episodes", "8", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results["rows"]["trained"]["rmst"] == 6.0
    assert results["rows"]["trained"]["km_median"] == 6.0
    assert main(["evaluate", str(run_dir), "--episodes", "8", "--max-steps", "4"]) == 0
    table = capsys.readouterr().out
    # every table says which column is which and against which opponent; RMST comes first
    assert "PREDATORS, each column against the same prey (trained (greedy))" in table
    assert "PREY, each column against the same predators (trained (greedy))" in table
    assert "  random         = random predators vs trained (greedy) prey" in table
    assert "  prey_evade     = trained (greedy) predators vs greedy BFS evade prey" in table
    metric_lines = [line for line in table.splitlines() if line.startswith(("RMST", "KM"))]
    assert metric_lines[0].startswith("RMST: mean turns to capture, <= 4")
    # capped at 4 turns the shortest path (6) never finishes: all censored, no KM median
    assert [line.split()[-3:] for line in metric_lines[1::2]] == [[">4"] * 3] * 2
    assert "hit the step limit uncaptured" in table and "100.0 %" in table
    assert (run_dir / "capture_curves.png").is_file()
    code = main(
        [
            "evaluate",
            str(run_dir),
            "--set",
            "agents.predators.count=1",
            "--set",
            "env.starts=[[0, 0], [3, 4]]",
        ]
    )
    assert code == 2
    assert "has shape (2, 2, 4096, 5), this config needs (2, 1, 4096, 5)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "overrides, key, message",
    [
        ({"experiment.algorithm.name": "ppo"}, "experiment.algorithm.name", "known: "),
        (
            {"experiment.algorithm.name": "dqn"},
            "experiment.algorithm.params.update_epochs",
            "unknown hyperparameter of 'dqn'",
        ),
        (
            {"experiment.algorithm": {"name": "dqn", "params": {"episodes": 10}}},
            "experiment.algorithm.params.episodes",
            "set experiment.episodes",
        ),
        (
            {"experiment.algorithm": {"name": "dqn", "params": {"lr": 0.1}}},
            "experiment.algorithm.params.lr",
            "its hyperparameters: ",
        ),
        (
            {"experiment.algorithm": {"name": "dqn", "params": {"gamma": 1.5}}},
            "experiment.algorithm.params.gamma",
            "in [0, 1]",
        ),
        (
            {"experiment.algorithm": {"name": "ippo", "params": {"action_dim": 9}}},
            "experiment.algorithm.params.action_dim",
            "'discrete_5', 5",
        ),
        (
            {"experiment.algorithm": {"name": "ippo", "params": {"num_minibatches": 3}}},
            "experiment.algorithm.params.num_minibatches",
            "must divide",
        ),
        (
            {"experiment.algorithm": {"name": "mixed", "params": {"prey_algo": "dqn"}}},
            "experiment.algorithm.params.prey_algo",
            "one of ['iql', 'cql']",
        ),
        (
            {"experiment.algorithm": {"name": "cql", "params": {}}, "agents.predators.count": 6},
            "experiment.algorithm.name",
            "15625 joint actions",
        ),
        ({"experiment.episodes": 100}, "experiment.episodes", "set exactly one"),
        (
            {"experiment.roles.preys": "chase"},
            "experiment.roles.preys",
            "['evade', 'noop', 'random']",
        ),
        ({"experiment.eval.seed": 40}, "experiment.eval.seed", "must not overlap"),
        ({"experiment.num_seeds": 0}, "experiment.num_seeds", ">= 1"),
        (
            {"experiment.eval": {"episodes": 10, "seed": 100, "max_steps": 0}},
            "experiment.eval.max_steps",
            ">= 1",
        ),
    ],
)
def test_bad_experiment_values_fail_clearly(overrides, key, message):
    with pytest.raises(ConfigError) as err:
        pj.load_config("configs/default", overrides)
    assert err.value.key == key
    assert message in str(err.value)


def test_experiment_defaults_are_filled_and_hashed():
    config = pj.load_config(
        "configs/1v1",
        {
            "experiment.algorithm": {
                "name": "dqn",
                "params": {"double_dqn": True, "learning_rate": 1},
            }
        },
    )
    params = config["experiment"]["algorithm"]["params"]
    assert params["learning_rate"] == 1.0 and isinstance(params["learning_rate"], float)
    assert params["double_dqn"] is True and params["dueling"] is False
    assert params["hidden_layers"] == [128, 128]
    tc = make_train_config(config)
    assert tc.hp.hidden_layers == (128, 128) and tc.num_envs == config["experiment"]["num_envs"]
    spelled_out = pj.load_config(
        "configs/1v1", {"experiment.algorithm": {"name": "dqn", "params": dict(params)}}
    )
    assert spelled_out.hash() == config.hash()


SHARDED = """
import sys, json, jax, numpy as np
sys.path.insert(0, "tests")
from train_testing import tiny_config
from ppage_jax.train import iql, make_train_config
tc = make_train_config(tiny_config("iql", {"table_size": 4096}, total_timesteps=4096))
runner, metrics = jax.jit(iql.train)(jax.random.PRNGKey(0), tc, tc.env.default_params)
print(json.dumps({"devices": jax.device_count(),
                  "sharded": len(runner.env.obs.sharding.device_set),
                  "length": np.asarray(metrics["episode_length"]).tolist(),
                  "td": np.asarray(metrics["losses"]["td_error/predator"]).tolist()}))
"""


@pytest.mark.slow  # two devices in a subprocess
def test_training_shards_grids_over_devices_with_single_device_results():
    import os
    import subprocess
    import sys

    runs = {}
    for n in (1, 4):
        env = dict(
            os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={n}"
        )
        out = subprocess.run(
            [sys.executable, "-c", SHARDED],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=os.getcwd(),
        )
        runs[n] = json.loads(out.stdout.strip().splitlines()[-1])
    assert runs[4]["devices"] == 4 and runs[4]["sharded"] == 4  # grids split over 4
    np.testing.assert_array_equal(runs[1]["length"], runs[4]["length"])
    np.testing.assert_allclose(runs[1]["td"], runs[4]["td"], rtol=1e-5)


def test_random_algorithm_through_the_top_level_train():
    """``pj.train_agents(key, Config)`` dispatches on experiment.algorithm.name; ``random``
    learns nothing and reports the same metrics (no losses)."""
    import jax
    from train_testing import tiny_config

    config = tiny_config("random", total_timesteps=16 * 32 * 3)
    runner, metrics = pj.train_agents(jax.random.PRNGKey(0), config)
    assert metrics["capture_rate"].shape == (3,) and metrics["losses"] == {}
    assert int(runner.progress.env_steps) == 16 * 32 * 3
    assert int(runner.progress.episodes) == int(np.asarray(metrics["episodes"]).sum()) > 0
