"""Divergence stops the run: a NaN or inf loss, return or parameter is an error naming the
update, the algorithm and the quantity; NaNs that mean "nothing to report" are not."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from cli_testing import write_run_config
from train_testing import make_train_config, tiny_config

from ppage_jax.cli.main import main
from ppage_jax.rewards.registry import register_reward, unregister_reward
from ppage_jax.train.run.divergence import DivergenceCheck, DivergenceError
from ppage_jax.train.run.runner import run_training

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def tc():
    return make_train_config(tiny_config("iql"))  # 2 predators, 1 prey, terms base, ...


def chunk(loss, returns=0.0, episodes=1, active=True):
    """Metrics of a chunk of 1 seed x len(loss) updates."""
    loss = np.asarray(loss, np.float32)[None]
    size = loss.shape[1]
    ret = np.zeros((1, size, 2, 3), np.float32)
    ret[...] = np.asarray(returns, np.float32).reshape(1, -1, 1, 1) if np.ndim(returns) else returns
    return {
        "active": np.full((1, size), active),
        "episodes": np.full((1, size), episodes),
        "returns": ret,
        "losses": {"td_error/predator": loss},
    }


def check(tc, params=None):
    state = {"q": jnp.ones((1, 4))} if params is None else params
    return DivergenceCheck(tc, lambda runner: runner), state


def test_a_loss_turning_nan_or_inf_is_divergence(tc):
    guard, state = check(tc)
    guard(chunk([NAN, NAN]), 0, state)  # not computed yet (DQN before its buffer)
    guard(chunk([1.0, 2.0]), 2, state)
    with pytest.raises(
        DivergenceError,
        match=r"^training diverged at update 6 of iql: loss "
        r"td_error/predator is nan \(seed 0\)$",
    ):
        guard(chunk([3.0, NAN]), 4, state)
    with pytest.raises(DivergenceError, match="at update 1 of iql: loss td_error/predator is inf"):
        check(tc)[0](chunk([INF]), 0, state)


def test_returns_are_checked_only_where_episodes_finished(tc):
    guard, state = check(tc)
    guard(chunk([1.0], returns=NAN, episodes=0), 0, state)  # no episode: NaN means none
    guard(chunk([1.0], returns=NAN, active=False), 1, state)  # skipped after the budget
    with pytest.raises(
        DivergenceError,
        match=r"at update 3 of iql: reward term 'base' \(return/predator/base\) is nan",
    ):
        guard(chunk([1.0], returns=NAN, episodes=2), 2, state)
    with pytest.raises(
        DivergenceError, match=r"reward term 'base' \(return/predator/base\) is -inf"
    ):
        guard(chunk([1.0], returns=-INF, episodes=0), 3, state)


def test_the_first_non_finite_reward_term_is_named_before_the_losses_it_spoils(tc):
    assert tc.env.reward_terms == ("base", "predator_distance", "survival")
    metrics = chunk([1.0, NAN, NAN], episodes=1)
    metrics["returns"][0, 1, :, 2] = NAN  # update 2: survival, both roles
    metrics["returns"][0, 1, 1, 1] = NAN  # update 2: predator_distance, prey
    metrics["returns"][0, 2, 0, 0] = INF  # update 3: base
    with pytest.raises(DivergenceError) as err:
        check(tc)[0](metrics, 0, {"q": jnp.ones((1, 4))})
    assert str(err.value) == (
        "training diverged at update 2 of iql: reward term 'predator_distance' "
        "(return/prey/predator_distance) is nan (seed 0)"
    )


def test_a_non_finite_parameter_is_divergence(tc):
    params = {
        "predator": {"q": jnp.array([[1.0, 2.0], [3.0, jnp.nan]])},
        "count": jnp.array([[1], [2]], jnp.int32),
    }  # 2 seeds; ints are skipped
    guard = DivergenceCheck(tc, lambda runner: runner)
    metrics = {
        k: np.repeat(v, 2, axis=0)
        if k != "losses"
        else {n: np.repeat(x, 2, axis=0) for n, x in v.items()}
        for k, v in chunk([1.0, 1.0]).items()
    }
    with pytest.raises(DivergenceError) as err:
        guard(metrics, 10, params)
    assert str(err.value) == (
        "training diverged at update 12 of iql: parameter predator/q is not finite (seed 1)"
    )


@pytest.mark.slow  # trains to a divergence
def test_a_diverging_run_stops_with_the_update_algorithm_and_quantity(tmp_path, capsys):
    config = write_run_config(
        tmp_path / "tiny",
        algorithm={"name": "dqn", "params": {"learning_rate": 1.0e30, "hidden_layers": [8]}},
    )
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: training diverged at update ")
    assert " of dqn: " in err and ("loss q_loss/" in err or "parameter " in err)
    update = int(err.split("at update ")[1].split()[0])
    kept = sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    assert kept and kept[-1] < update  # the last good checkpoint stays
    assert f"the last good checkpoint is update {kept[-1]}" in err
    rows = (out / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * update  # header + 2 seeds up to the update
    assert not (out / "summary.json").exists()


@pytest.mark.slow  # trains a few updates
def test_a_run_with_a_nan_reward_term_stops_naming_the_term():
    register_reward("nan_after_turn_3")(
        lambda ctx: jnp.where(ctx.state.turn >= 3, jnp.nan, 0.0) * jnp.ones(3, jnp.float32)
    )
    try:
        config = tiny_config(
            "iql",
            {"num_steps": 16, "table_size": 256},
            4 * 16 * 8,
            **{
                "experiment.num_envs": 4,
                "rewards.shaping": [{"name": "nan_after_turn_3", "weight": 1.0}],
            },
        )
        tc = make_train_config(config)
        with pytest.raises(DivergenceError) as err:
            run_training(tc, tc.env.default_params, 0, 1, target_chunks=8)
    finally:
        unregister_reward("nan_after_turn_3")
    assert str(err.value).startswith("training diverged at update ")
    assert str(err.value).endswith(
        " of iql: reward term 'nan_after_turn_3' (return/predator/nan_after_turn_3) is nan (seed 0)"
    )
