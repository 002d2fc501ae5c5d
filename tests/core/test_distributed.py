"""Several processes through JAX's distributed runtime: settings from flags and environment,
the local launcher, and a 2-process rollout (2 CPU devices each, gloo) equal to the
single-process one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax import distributed
from ppage_jax.cli import launch
from ppage_jax.cli.main import main
from ppage_jax.distributed import Settings, settings
from ppage_jax.episodes.summary import rollout_summary
from ppage_jax.policies import random_policy

ROLLOUT = dict(num_envs=8, num_steps=12)
OVERRIDES = {"env.termination.max_steps": 5, "env.size": 6}

TWO_PROCESS_JOB = (
    textwrap.dedent("""
    import json
    import numpy as np
    from ppage_jax import distributed
    config = distributed.initialize()
    import jax
    import ppage_jax as pj
    from ppage_jax.episodes.summary import rollout_summary
    from ppage_jax.policies import random_policy
    from ppage_jax.sharding import gather_rows, make_mesh, process_rows, shard_global, to_host

    assert config.multi_process and jax.process_count() == 2, config
    assert jax.device_count() == 4 and jax.local_device_count() == 2
    mesh = make_mesh()
    me = jax.process_index()
    assert process_rows(8, mesh) == slice(4 * me, 4 * me + 4), process_rows(8, mesh)
    whole = np.arange(24).reshape(8, 3)
    placed = shard_global(whole, mesh)
    assert placed.shape == (8, 3) and not placed.is_fully_addressable
    np.testing.assert_array_equal(to_host(placed), whole)
    np.testing.assert_array_equal(gather_rows(np.full((2, 3), me)), [[0] * 3] * 2 + [[1] * 3] * 2)
    assert distributed.share({"mine": me}) == {"mine": 0}
    assert distributed.any_process(me == 1) and not distributed.any_process(False)

    env = pj.make("configs/1v1", OVERRIDES)
    r = rollout_summary(env, random_policy(env), jax.random.PRNGKey(3), **ROLLOUT)
    if distributed.is_writer():
        print("RESULT " + json.dumps({k: np.asarray(v).tolist() for k, v in r.items()}))
""")
    .replace("OVERRIDES", repr(OVERRIDES))
    .replace("**ROLLOUT", "num_envs=8, num_steps=12")
)


# ----------------------------------------------------------------------------- settings
def test_no_settings_means_one_process():
    assert settings(environ={}) == Settings()
    assert not Settings().multi_process
    assert settings(num_processes=1, environ={}) == Settings(None, 1, 0)


def test_flags_win_over_the_environment():
    env = {
        "JAX_COORDINATOR_ADDRESS": "10.0.0.1:99",
        "JAX_NUM_PROCESSES": "4",
        "JAX_PROCESS_ID": "3",
    }
    assert settings(environ=env) == Settings("10.0.0.1:99", 4, 3)
    assert settings("node0:1234", 2, 1, environ=env) == Settings("node0:1234", 2, 1)
    assert settings(environ=env).multi_process


def test_scheduler_with_several_tasks_lets_jax_detect_the_rest():
    assert settings(environ={"SLURM_NTASKS": "8"}) == Settings(None, 1, 0, auto=True)
    assert settings(environ={"SLURM_NTASKS": "1"}) == Settings()
    assert settings(environ={"OMPI_COMM_WORLD_SIZE": "2"}).auto


@pytest.mark.parametrize(
    "kwargs,env,message",
    [
        (
            {"num_processes": 2, "process_id": 2, "coordinator": "h:1"},
            {},
            r"--process-id must be in 0..1 \(or JAX_PROCESS_ID\), got 2",
        ),
        (
            {"num_processes": 2, "process_id": 0},
            {},
            r"--coordinator HOST:PORT \(or JAX_COORDINATOR_ADDRESS\) is needed with 2 processes",
        ),
        (
            {"num_processes": 2, "process_id": 0, "coordinator": "nohost"},
            {},
            r"--coordinator must be HOST:PORT, got 'nohost'",
        ),
        ({"num_processes": 0}, {}, r"--num-processes must be an integer >= 1"),
        ({}, {"JAX_NUM_PROCESSES": "two"}, r"JAX_NUM_PROCESSES must be an integer, got 'two'"),
        ({"coordinator": "h:1"}, {}, r"--num-processes must be an integer >= 1"),
    ],
)
def test_bad_settings_name_what_is_wrong(kwargs, env, message):
    with pytest.raises(ValueError, match=message):
        settings(environ=env, **kwargs)


def test_bad_flags_end_the_command_with_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--num-processes", "2", "--process-id", "5", "--coordinator", "h:1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == "ppage-jax: --process-id must be in 0..1 (or JAX_PROCESS_ID), got 5\n"


def test_initialize_is_a_no_op_for_one_process():
    assert distributed.initialize(Settings()) == Settings()
    assert not distributed.is_initialized() and distributed.is_writer()
    assert distributed.share({"chunks": [1, 2]}) == {"chunks": [1, 2]}
    assert distributed.any_process(True) and not distributed.any_process(False)


# ----------------------------------------------------------------------------- launcher
def test_process_environments_carry_the_coordinator_settings():
    envs = launch.process_environments(
        3, 4567, devices_per_process=2, base={"XLA_FLAGS": "--foo", "KEEP": "1"}
    )
    assert [e["JAX_PROCESS_ID"] for e in envs] == ["0", "1", "2"]
    assert {e["JAX_COORDINATOR_ADDRESS"] for e in envs} == {"127.0.0.1:4567"}
    assert {e["JAX_NUM_PROCESSES"] for e in envs} == {"3"}
    assert envs[1]["XLA_FLAGS"] == "--foo --xla_force_host_platform_device_count=2"
    assert envs[2]["KEEP"] == "1"
    assert settings(environ=envs[2]) == Settings("127.0.0.1:4567", 3, 2)


def test_launch_rejects_a_subcommand_that_runs_on_one_process_only(capsys):
    assert main(["launch", "-n", "2", "--", "render", "configs/1v1"]) == 2
    assert capsys.readouterr().err == (
        "ppage-jax launch: expected a subcommand after --, one of ['run', 'sweep', 'bench']; "
        "got 'render'\n"
    )
    assert main(["launch", "-n", "2"]) == 2
    assert capsys.readouterr().err.endswith("got nothing\n")


def test_launch_rejects_a_process_count_below_one(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["launch", "-n", "0", "--", "bench"])
    assert exit_.value.code == 2
    assert "must be an integer >= 1, got '0'" in capsys.readouterr().err


def test_wait_stops_the_others_when_one_process_fails():
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]),
        subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"]),
    ]
    assert launch.wait(procs, grace_s=5) == 3
    assert procs[0].returncode is not None and procs[0].returncode != 0


# ----------------------------------------------------------------------------- 2 processes
@pytest.mark.slow  # two processes
def test_two_process_rollout_equals_the_single_process_rollout(tmp_path):
    logs = [(tmp_path / f"out{i}.txt").open("w") for i in range(2)]
    envs = launch.process_environments(2, launch.free_port(), devices_per_process=2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESS_JOB], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        for env, log in zip(envs, logs, strict=True)
    ]
    status = launch.wait(procs, grace_s=5)
    for log in logs:
        log.close()
    out = [(tmp_path / f"out{i}.txt").read_text() for i in range(2)]
    assert status == 0, out[0][-3000:] + out[1][-3000:]
    lines = [line for line in out[0].splitlines() if line.startswith("RESULT")]
    assert len(lines) == 1 and "RESULT" not in out[1]  # only process 0 reports
    two = json.loads(lines[0].removeprefix("RESULT "))

    env = pj.make("configs/1v1", OVERRIDES)
    one = rollout_summary(env, random_policy(env), jax.random.PRNGKey(3), **ROLLOUT)
    assert set(two) == set(one) and two["episodes"] > ROLLOUT["num_envs"]
    for name in ("episodes", "terminated", "truncated", "captures", "length_sum"):
        assert two[name] == int(one[name]), name
    np.testing.assert_allclose(two["term_returns"], one["term_returns"], rtol=1e-6)


@pytest.mark.slow
def test_two_process_run_equals_the_single_process_run(tmp_path):
    # Each process trains one of the 2 seeds; process 0 alone writes the run directory.
    sets = [
        "--set",
        "env.size=5",
        "--set",
        "experiment.num_seeds=2",
        "--set",
        "experiment.num_envs=4",
        "--set",
        "experiment.total_timesteps=64",
        "--set",
        "experiment.algorithm={name: random, params: {num_steps: 8}}",
        "--set",
        "experiment.eval.episodes=4",
        "--no-progress",
    ]
    program = [sys.executable, "-c", "import sys; from ppage_jax.cli import main; sys.exit(main())"]
    two = subprocess.run(
        [*program, "launch", "-n", "2", "--", "run", "configs/1v1", "--out", str(tmp_path / "b")]
        + sets,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    assert two.stdout.count("run directory:") == 1  # only process 0 reports
    assert main(["run", "configs/1v1", "--out", str(tmp_path / "a"), *sets]) == 0
    one_rows = (tmp_path / "a" / "metrics.csv").read_text().splitlines()
    two_rows = (tmp_path / "b" / "metrics.csv").read_text().splitlines()
    assert len(one_rows) == len(two_rows) > 2 and one_rows == two_rows
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in "ab"]
    assert summaries[0]["evaluation"] == summaries[1]["evaluation"]
