"""Episode statistics (per-term, per-role returns, length, captures, ending) and re-scoring."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reward_testing import env_b, with_terms

import ppage_jax as pj
from ppage_jax.policies import random_policy

# A fake layout: predator + prey, terms ("a", "b"); the info of four steps of one grid.
TINY = SimpleNamespace(num_agents=2, reward_terms=("a", "b"), is_predator=np.array([True, False]))
UNIT = np.array(
    [
        [[1.0, 2.0], [0.0, 4.0]],
        [[3.0, -1.0], [5.0, 0.0]],
        [[-2.0, 1.0], [1.0, 1.0]],
        [[0.5, 0.0], [2.0, -3.0]],
    ],
    np.float32,
)  # [step, A, T], per unit weight
WEIGHTS = np.array([2.0, 0.0], np.float32)  # term "b" is recorded with weight 0
CAPTURES = np.array([0, 1, 0, 1], np.int32)
TERMINATED = np.array([False, True, False, False])
TRUNCATED = np.array([False, False, False, True])
GAMMA = 0.5


def run_tiny(unit, captures, terminated, truncated):
    """jit + scan over the steps of one grid (or, vmapped, of several)."""

    def body(stats, xs):
        u, c, te, tr = xs
        info = {"reward_terms": u * WEIGHTS, "reward_terms_unit": u, "captures": c}
        return pj.episode_stats_update(stats, info, te, tr, GAMMA)

    return jax.lax.scan(body, pj.episode_stats_init(TINY), (unit, captures, terminated, truncated))


def test_episode_stats_by_hand():
    stats, finished = jax.jit(run_tiny)(UNIT, CAPTURES, TERMINATED, TRUNCATED)
    f = jax.tree.map(np.asarray, finished)
    assert f["done"].tolist() == [False, True, False, True]
    assert f["length"].tolist() == [0, 2, 0, 2]
    assert f["captures"].tolist() == [0, 1, 0, 1]
    assert f["terminated"].tolist() == [False, True, False, False]
    assert f["truncated"].tolist() == [False, False, False, True]
    # Episode 1 = steps 0, 1; episode 2 = steps 2, 3 (discount restarts at 1).
    np.testing.assert_allclose(f["unit_returns"][1], UNIT[0] + UNIT[1])
    np.testing.assert_allclose(f["unit_discounted_returns"][1], UNIT[0] + GAMMA * UNIT[1])
    np.testing.assert_allclose(f["unit_returns"][3], UNIT[2] + UNIT[3])
    np.testing.assert_allclose(f["unit_discounted_returns"][3], UNIT[2] + GAMMA * UNIT[3])
    np.testing.assert_allclose(f["returns"][3], (UNIT[2] + UNIT[3]) * WEIGHTS)
    np.testing.assert_allclose(f["discounted_returns"][1], (UNIT[0] + GAMMA * UNIT[1]) * WEIGHTS)
    for key in ("returns", "unit_returns", "discounted_returns"):
        assert not f[key][[0, 2]].any()  # zeros where no episode ended
    # The stats restart after each ending.
    assert int(stats.length) == 0 and float(stats.discount) == 1.0
    assert not np.asarray(stats.returns).any()


def test_episode_stats_vmap_over_grids_matches_one_by_one():
    terminated = np.stack([TERMINATED, np.zeros(4, bool), np.ones(4, bool)])
    truncated = np.stack([TRUNCATED, np.zeros(4, bool), np.zeros(4, bool)])
    unit = np.stack([UNIT, UNIT[::-1], -UNIT])
    captures = np.stack([CAPTURES] * 3)
    batched = jax.jit(jax.vmap(run_tiny))(unit, captures, terminated, truncated)
    for g in range(3):
        single = run_tiny(unit[g], captures[g], terminated[g], truncated[g])
        jax.tree.map(
            lambda b, s: np.testing.assert_allclose(np.asarray(b)[g], np.asarray(s)),
            batched,
            single,
        )
    still_running = jax.tree.map(lambda x: np.asarray(x)[1], batched[0])
    assert int(still_running.length) == 4 and int(still_running.captures) == 2
    np.testing.assert_allclose(still_running.discount, GAMMA**4)


def test_episode_stats_need_unit_terms():
    with pytest.raises(KeyError, match="reward_terms_unit"):
        pj.episode_stats_update(
            pj.episode_stats_init(TINY), {"reward_terms": UNIT[0]}, False, False, GAMMA
        )


def test_summarize_episodes_by_hand():
    # Two steps x two grids; three episodes ended.
    done = np.array([[True, False], [True, True]])
    returns = np.zeros((2, 2, 2, 2))
    returns[0, 0] = [[1.0, 2.0], [3.0, 4.0]]
    returns[1, 0] = [[5.0, 6.0], [7.0, 8.0]]
    returns[1, 1] = [[0.0, 3.0], [-1.0, 0.0]]
    returns[0, 1] = 99.0  # not done: ignored
    finished = {
        "done": done,
        "returns": returns,
        "discounted_returns": returns / 2,
        "length": np.array([[3, 0], [1, 2]]),
        "captures": np.array([[1, 0], [0, 2]]),
        "terminated": np.array([[True, False], [False, True]]),
        "truncated": np.array([[False, False], [True, True]]),
    }
    s = pj.summarize_episodes(finished, TINY, reps=0)
    assert s["episodes"] == 3
    assert s["episode_length"] == pytest.approx(2.0) and s["captures"] == pytest.approx(1.0)
    # lengths 3 (captured), 1 (truncated), 2 (captured; also truncated): a capture rate of 2/3,
    # one episode hit the limit uncaptured; KM: S(1) = 1 (censored), S(2) = 1/2, S(3) = 0
    assert s["capture_rate"] == pytest.approx(2 / 3)
    assert s["truncated_share"] == pytest.approx(1 / 3)
    assert s["km_median"] == 2.0 and s["horizon"] == 3.0
    assert s["rmst"] == pytest.approx(2 * 1.0 + 1 * 0.5)  # up to the longest episode
    assert s["steps_to_capture"] == pytest.approx(2.5)  # captured only: biased
    assert "rmst_ci" not in s  # reps=0: no bootstrap
    assert s["return/predator/a"] == pytest.approx(2.0)  # (1 + 5 + 0) / 3
    assert s["return/predator/b"] == pytest.approx(11 / 3)  # (2 + 6 + 3) / 3
    assert s["return/predator/total"] == pytest.approx(17 / 3)
    assert s["return/prey/a"] == pytest.approx(3.0)  # (3 + 7 - 1) / 3
    assert s["discounted_return/prey/b"] == pytest.approx(2.0)  # (4 + 8 + 0) / 3 / 2
    empty = pj.summarize_episodes(dict(finished, done=np.zeros((2, 2), bool)), TINY)
    assert empty["episodes"] == 0 and np.isnan(empty["return/prey/total"])
    assert np.isnan(empty["rmst"]) and np.isnan(empty["capture_rate"])


def test_rescore_by_hand():
    unit = jnp.asarray(UNIT[:2])  # [E=2, A=2, T=2]
    np.testing.assert_allclose(pj.rescore(unit, [1.0, -1.0]), [[-1.0, -4.0], [4.0, 5.0]])
    many = pj.rescore(unit, jnp.asarray([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])[:, None, :])
    assert many.shape == (3, 2, 2)
    np.testing.assert_allclose(many[2], UNIT[:2].sum(-1))
    # From returns paid under old weights: exact where the old weight was not 0.
    paid = unit * jnp.asarray([2.0, 4.0])
    np.testing.assert_allclose(
        pj.rescore(paid, [1.0, -1.0], old_weights=[2.0, 4.0]), [[-1.0, -4.0], [4.0, 5.0]]
    )
    # A term paid with weight 0 left no trace: NaN if it now counts, ignored if it does not.
    paid = unit * WEIGHTS
    assert np.isnan(pj.rescore(paid, [1.0, 1.0], old_weights=WEIGHTS)).all()
    np.testing.assert_allclose(
        pj.rescore(paid, [3.0, 0.0], old_weights=WEIGHTS), 3.0 * UNIT[:2, :, 0]
    )


# ------------------------------------------------------------ against a real re-simulation
@functools.cache
def ablation_rollout(env, num_envs, num_steps):
    """jit(vmap over stacked params) of rollout_episodes: several reward designs at once."""
    run = functools.partial(
        pj.rollout_episodes, env, random_policy(env), num_envs=num_envs, num_steps=num_steps
    )
    return jax.jit(jax.vmap(run, in_axes=(None, 0)))


@pytest.mark.slow  # resimulates
def test_rescore_matches_a_resimulation_with_the_new_weights():
    env = env_b()  # every shipped term; max_steps 8, two sub-steps per turn
    base = with_terms(env, env.default_params, capture_threshold=1)
    rng = np.random.default_rng(5)
    designs = [rng.normal(size=len(env.reward_terms)).astype(np.float32) for _ in range(3)]
    designs[0][[0, 2, 5]] = 0.0  # base, survival, potential_distance off in design 0
    stacked = jax.tree.map(
        lambda *x: jnp.stack(x),
        *[base.replace(reward=base.reward.replace(weights=jnp.asarray(w))) for w in designs],
    )
    f = jax.tree.map(np.asarray, ablation_rollout(env, 32, 20)(jax.random.PRNGKey(0), stacked))

    done = f["done"][0]
    assert 32 < done.sum() and f["terminated"][0].any() and (f["truncated"][0] & done).any()
    for key in ("done", "length", "captures", "terminated", "unit_returns"):
        np.testing.assert_array_equal(f[key][1], f[key][0])  # same episodes in every design
    for new in (1, 2):
        for paid, unit in (
            ("returns", "unit_returns"),
            ("discounted_returns", "unit_discounted_returns"),
        ):
            rescored = np.asarray(pj.rescore(f[unit][0], designs[new]))
            np.testing.assert_allclose(
                rescored[done], f[paid][new].sum(-1)[done], rtol=1e-4, atol=1e-3
            )
        # From paid returns and their (non-zero) weights: design 1 -> design 2.
        if new == 2:
            rescored = np.asarray(pj.rescore(f["returns"][1], designs[2], designs[1]))
            np.testing.assert_allclose(
                rescored[done], f["returns"][2].sum(-1)[done], rtol=1e-3, atol=1e-2
            )
    # Design 0 paid nothing for its zero-weight terms, yet its unit returns score them.
    assert not f["returns"][0][..., [0, 2, 5]].any() and f["unit_returns"][0][..., 0].any()

    summary = pj.summarize_episodes(jax.tree.map(lambda x: x[1], f), env)
    assert summary["episodes"] == done.sum()
    assert set(summary) >= {
        f"return/{r}/{t}" for r in ("predator", "prey") for t in env.reward_terms + ("total",)
    }
    predator_totals = f["returns"][1].sum(-1)[done][:, env.is_predator].mean(-1)
    assert summary["return/predator/total"] == pytest.approx(predator_totals.mean(), rel=1e-4)
    assert summary["episode_length"] == pytest.approx(f["length"][1][done].mean())


def test_comparison_groups_leave_out_a_row_facing_another_opponent():
    """When both roles learn, trained_greedy plays greedy prey: it is not "against the same
    prey" as the sampled rows, so the predator group leaves it out (and the table shows it
    under "other rows")."""
    from ppage_jax.episodes.summary import comparison_groups
    from ppage_jax.train.run.report import summary_table

    row = {"rmst": 5.0, "km_median": 4.0, "capture_rate": 1.0, "truncated_share": 0.0}
    sampled = "trained (sampled)"
    evaluation = {
        "trained": {**row, "predators": sampled, "prey": sampled, "episodes": 8},
        "trained_greedy": {**row, "predators": "trained (greedy)", "prey": "trained (greedy)"},
        "random": {**row, "predators": "random", "prey": sampled},
        "chase": {**row, "predators": "greedy BFS chase", "prey": sampled},
        "prey_evade": {**row, "predators": sampled, "prey": "greedy BFS evade"},
    }
    assert comparison_groups(evaluation) == [
        ("predators", ["trained", "random", "chase"], sampled),
        ("prey", ["trained", "prey_evade"], sampled),
    ]
    table = summary_table(evaluation, cap=10)
    predators = table.split("\n\n")[0]
    assert predators.startswith("PREDATORS, each column against the same prey (trained (sampled))")
    assert "trained_greedy" not in predators
    assert table.split("\n\n")[2].startswith("other rows;")
    assert "  trained_greedy = trained (greedy) predators vs trained (greedy) prey" in table
    # with prey that do not learn, trained_greedy faces the same prey and stays in the group
    evade = {name: {**r, "prey": "greedy BFS evade"} for name, r in evaluation.items()}
    del evade["prey_evade"]
    assert comparison_groups(evade) == [
        ("predators", ["trained", "trained_greedy", "random", "chase"], "greedy BFS evade")
    ]
