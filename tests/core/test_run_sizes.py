"""Sizes that run away are estimated before anything compiles: a batch whose states alone
exceed the machine's memory, a plan far above the budget or beyond the time limit, and
`ppage-jax launch -n` far above the CPU cores are refused in one line; large ones are
announced (docs/configuration.md, "Sizes")."""

from __future__ import annotations

import warnings

import pytest

import ppage_jax as pj
from ppage_jax.cli.args import UsageError
from ppage_jax.cli.launch import check_process_count
from ppage_jax.config import ConfigError, ConfigNotice

SOURCE = "configs/default/experiment.yaml"


@pytest.fixture
def four_gib(monkeypatch):
    monkeypatch.setattr("ppage_jax.config.experiment.section.physical_memory", lambda: 4 * 2**30)


def notices_of(overrides) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pj.load_config("configs/default", overrides)
    return [str(w.message) for w in caught if w.category is ConfigNotice]


def test_num_envs_far_above_the_budget_is_refused(four_gib):
    with pytest.raises(ConfigError) as err:
        pj.load_config("configs/default", {"experiment.num_envs": 10**7})
    assert str(err.value) == (
        f"{SOURCE}: experiment.total_timesteps = 3000000: is less than one update: the run "
        f"plans 1 update of 10000000 grids (experiment.num_envs) x 32 turns (num_steps) = "
        f"320,000,000 env steps per seed, 107x what was asked; set experiment.num_envs <= "
        f"93750 or raise experiment.total_timesteps"
    )
    assert notices_of({"experiment.num_envs": 64}) == []  # whole updates: nothing to say


def test_a_batch_that_cannot_fit_in_memory_is_refused_and_a_large_one_announced(four_gib):
    big = {"experiment.num_envs": 2 * 10**7, "experiment.total_timesteps": 2 * 10**9}
    with pytest.raises(ConfigError) as err:
        pj.load_config("configs/default", big)
    assert str(err.value) == (
        "override experiment.num_envs=20000000: experiment.num_envs = 20000000: 20,000,000 "
        "grids at once (experiment.num_seeds = 1 x experiment.num_envs) hold at least 6.59 GiB "
        "of state (354 bytes each; rollouts and networks need more), more than this machine's "
        "4 GiB of memory"
    )
    large = {"experiment.num_envs": 4 * 10**6, "experiment.total_timesteps": 2 * 10**9}
    assert notices_of(large)[1] == (
        "experiment.num_envs = 4000000: 4,000,000 grids at once (experiment.num_seeds = 1 x "
        "experiment.num_envs) hold at least 1.32 GiB of state (354 bytes each; rollouts and "
        "networks need more) of this machine's 4 GiB"
    )


def test_evaluation_episodes_beyond_memory_are_refused(four_gib):
    with pytest.raises(ConfigError) as err:
        pj.load_config("configs/default", {"experiment.eval.episodes": 10**9})
    assert str(err.value) == (
        "override experiment.eval.episodes=1000000000: experiment.eval.episodes = 1000000000: "
        "1,000,000,000 grids at once (experiment.num_seeds = 1 x experiment.eval.episodes, "
        "played together) hold at least 330 GiB of state (354 bytes each; rollouts and "
        "networks need more), more than this machine's 4 GiB of memory"
    )


def test_a_long_run_is_announced_and_one_beyond_the_time_limit_refused(four_gib):
    long = {"experiment.total_timesteps": 2 * 10**9, "experiment.num_seeds": 2}
    assert notices_of(long) == [
        "experiment.total_timesteps = 2000000000: the run (2 seed(s) x 244,140 updates x 8,192 "
        "env steps) plans 4e+09 env steps: at least 6.67 min even at 1e+07 env steps/s (a "
        "2-core CPU trains 4e+03 - 1.4e+04)"
    ]
    endless = {"experiment.total_timesteps": 2 * 10**9, "experiment.num_seeds": 20_000}
    with pytest.raises(ConfigError, match="at least 46.3 days .* at most 30 days is allowed$"):
        pj.load_config("configs/default", endless)


def test_launch_refuses_far_more_processes_than_cores_and_notes_a_shared_core(capsys):
    with pytest.raises(UsageError) as err:
        check_process_count(1000, 2)
    assert str(err.value) == (
        "ppage-jax launch: -n 1000 would start 1000 JAX processes on 2 CPU core(s); at most 8 "
        "(4 per core) are allowed, and 2 or fewer get a core each"
    )
    check_process_count(2, 2)
    assert capsys.readouterr().err == ""
    check_process_count(3, 2)
    assert capsys.readouterr().err == (
        "ppage-jax launch: 3 processes share 2 CPU core(s) (each is a whole JAX runtime); "
        "-n 2 or fewer give each a core\n"
    )


def test_the_launch_cli_refuses_before_starting_anything(capsys, monkeypatch):
    from ppage_jax.cli import launch
    from ppage_jax.cli.main import main

    monkeypatch.setattr(launch.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(launch, "start", lambda *a, **k: pytest.fail("started processes"))
    assert main(["launch", "-n", "1000", "--", "bench"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("at most 8 (4 per core) are allowed, and 2 or fewer get a core each")
    )


def test_one_grid_above_the_env_limit_is_left_to_make_and_its_own_estimate():
    from ppage_jax.config.experiment.section import GRID_STATE_LIMIT
    from ppage_jax.env.checks import MEMORY_LIMIT_BYTES

    assert GRID_STATE_LIMIT == MEMORY_LIMIT_BYTES
    config = pj.load_config(None, {"env.size": 4000, "env.obstacle_percentage": 50.0})
    with pytest.raises(ValueError, match=r"env\.size = 4000: the state \(6 agents"):
        pj.make(config)
