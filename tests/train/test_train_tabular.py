"""Tabular iql / cql / mixed: learn the tiny task, batched updates with exact values, hashing,
masking of captured prey, and vmap over seeds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import (
    assert_learned,
    assert_seeds_kept_apart,
    loss_names,
    tiny_config,
    train_seeds,
)

from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import tabular
from ppage_jax.train.algorithms import tabular as iql

PARAMS = {"table_size": 4096}


@pytest.fixture(scope="module")
def iql_run():
    tc = make_train_config(tiny_config("iql", PARAMS))
    return tc, train_seeds(tc)


@pytest.mark.slow  # learning runs
@pytest.mark.parametrize("algo", ["iql", "cql", "mixed"])
def test_tabular_algorithms_learn_the_tiny_task(algo, iql_run):
    if algo == "iql":
        tc, (runner, metrics) = iql_run
    else:
        tc = make_train_config(tiny_config(algo, PARAMS))
        runner, metrics = train_seeds(tc)
    kinds = {"iql": ("iql", "iql"), "cql": ("cql", "cql"), "mixed": ("cql", "iql")}[algo]
    shapes = {"iql": (2, 4096, 5), "cql": (4096, 25)}
    assert runner.tables["predator"].shape == (2,) + shapes[kinds[0]]
    # zero tables: every argmax is action 0 ("right"), which never reaches (3, 4)
    assert_learned(tc, tabular.policy_state(runner), metrics, loss_names(["td_error"]))


@pytest.mark.slow  # trains several seeds
def test_vmap_keeps_the_seeds_apart(iql_run):
    tc, (_, metrics) = iql_run
    assert_seeds_kept_apart(tc, metrics)


@pytest.mark.slow
def test_vmap_over_seeds_equals_separate_runs(iql_run):
    tc, (runner, metrics) = iql_run
    single_runner, single = jax.jit(iql.train)(jax.random.PRNGKey(1), tc, tc.env.default_params)
    for key in ("capture_rate", "episode_length", "episodes", "returns"):
        np.testing.assert_allclose(single[key], metrics[key][1], rtol=1e-6)
    np.testing.assert_allclose(
        single_runner.tables["predator"], runner.tables["predator"][1], rtol=1e-6, atol=1e-6
    )


def test_captured_prey_table_entries_receive_no_update(iql_run):
    """capture_threshold 2 (traced) with one prey: the episode goes on after the capture, and
    the prey's observation [3, 4, captured=1] never enters its table."""
    tc, _ = iql_run
    params = tc.env.default_params.replace(capture_threshold=jnp.int32(2))
    runner, metrics = train_seeds(tc, params=params)  # traced params: no recompile
    assert float(np.nanmean(metrics["capture_rate"])) == 0.0  # never terminates
    free, caught = tabular.hash_observation(jnp.array([[3.0, 4.0, 0.0], [3.0, 4.0, 1.0]]), 4096)
    assert int(free) != int(caught)
    table = np.asarray(runner.tables["prey"])  # [seed, 1, rows, actions]
    assert np.abs(table[:, 0, int(free)]).sum() > 0  # learned while free
    np.testing.assert_array_equal(table[:, 0, int(caught)], 0.0)  # never after capture


def test_iql_update_averages_same_entry_transitions_and_skips_masked_ones():
    table = jnp.zeros((1, 8, 5))
    batch = {
        "keys": jnp.array([[1], [1], [2]]),
        "next_keys": jnp.array([[3], [3], [3]]),
        "action": jnp.array([[0], [0], [3]]),
        "reward": jnp.array([[1.0], [3.0], [5.0]]),
        "terminal": jnp.ones((3, 1)),
        "valid": jnp.array([[1.0], [1.0], [0.0]]),
    }
    hp = iql.Hyperparams(alpha=0.1, gamma=0.9)
    new, error = tabular.td_update("iql", table, batch, hp, 5)
    expected = np.zeros((1, 8, 5))
    expected[0, 1, 0] = 0.1 * (1.0 + 3.0) / 2  # one averaged step for the shared entry
    np.testing.assert_allclose(new, expected)  # the masked (2, 3) stays 0
    assert float(error) == pytest.approx(2.0)  # mean |TD| over the valid two
    bootstrap = dict(batch, terminal=jnp.zeros((3, 1)))
    seeded = table.at[0, 3, 4].set(10.0)  # max Q(s') = 10, not terminal
    new, _ = tabular.td_update("iql", seeded, bootstrap, hp, 5)
    assert float(new[0, 1, 0]) == pytest.approx(0.1 * (2.0 + 0.9 * 10.0))


def test_cql_team_update_uses_the_joint_action_and_the_team_reward():
    table = jnp.zeros((4, 25))
    batch = {
        "keys": jnp.array([2, 0]),
        "next_keys": jnp.array([1, 1]),
        "action": jnp.array([[1, 3], [4, 4]]),
        "reward": jnp.array([[2.0, 5.0], [-1.0, 7.0]]),
        "terminal": jnp.array([[0.0, 1.0], [1.0, 1.0]]),
        "valid": jnp.array([[1.0, 0.0], [0.0, 0.0]]),
    }  # 2nd grid: whole team caught
    hp = iql.Hyperparams(alpha=0.5, gamma=0.9)
    new, _ = tabular.td_update("cql", table, batch, hp, 5)
    expected = np.zeros((4, 25))
    expected[2, 1 * 5 + 3] = 0.5 * 2.0  # only the uncaptured member's reward; not terminal
    np.testing.assert_allclose(new, expected)
    assert int(tabular.joint_index(jnp.array([1, 3]), 5)) == 8
    values = tabular.member_values("cql", jnp.arange(50.0).reshape(2, 25), jnp.array([1]), 2, 5)
    row = np.arange(25.0, 50.0).reshape(5, 5)  # [first member's action, second's]
    np.testing.assert_allclose(values[0], np.stack([row.mean(1), row.mean(0)]))


def test_hashing_is_deterministic_and_collision_rate_counts_shared_rows():
    obs = jnp.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [1.2, 1.8, 0.0], [0.0, 0.0, 1.0]])
    rows = np.asarray(tabular.hash_observation(obs, 1 << 20))
    assert int(rows[0]) == int(rows[2])  # features are rounded to integers
    assert len({int(r) for r in rows[[0, 1, 3]]}) == 3
    assert tabular.collision_rate(np.asarray(obs), 1) == {
        "distinct": 3,
        "rows": 1,
        "collision_rate": 1.0,
    }
    assert tabular.collision_rate(np.asarray(obs), 1 << 20)["collision_rate"] == 0.0


@pytest.mark.slow  # trains over stacked params
def test_reward_weights_are_traced_and_train_vmaps_over_env_params(iql_run):
    """A weight change reuses the compiled program, and train vmaps over stacked EnvParams
    (the sweep's use): each design's run equals the run with its params alone."""
    import chex

    tc, _ = iql_run
    base = tc.env.default_params
    designs = [base, tc.env.with_weights(base, predator_distance=0.0, survival=3.0)]
    once = jax.jit(chex.assert_max_traces(iql.train, n=1))
    singles = [once(jax.random.PRNGKey(0), tc, p)[1] for p in designs]  # one trace
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *designs)
    _, both = jax.jit(jax.vmap(iql.train, in_axes=(None, None, 0)))(
        jax.random.PRNGKey(0), tc, stacked
    )
    for i, single in enumerate(singles):
        np.testing.assert_allclose(both["returns"][i], single["returns"], rtol=1e-6)
    survival = tc.env.reward_terms.index("survival")
    prey_survival = np.nanmean(np.asarray(both["returns"])[:, :, 1, survival], axis=1)
    assert prey_survival[1] == pytest.approx(3.0 * prey_survival[0], rel=0.3)
    predator_distance = tc.env.reward_terms.index("predator_distance")
    assert np.nanmax(np.abs(np.asarray(both["returns"])[1, :, 0, predator_distance])) == 0.0
