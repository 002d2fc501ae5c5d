"""Kickstarting (``teacher``): PPO learners imitate a baseline teacher, with a weight that
anneals to 0."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import loss_names, tiny_config, traced_train

from ppage_jax.config import ConfigError
from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import ippo as ppo
from ppage_jax.train.algorithms import mappo

PARAMS = {"num_steps": 16, "learning_rate": 3e-3, "update_epochs": 1, "num_minibatches": 2}


def test_teacher_weight_anneals_linearly_over_its_share_of_the_steps():
    hp = make_train_config(
        tiny_config("ippo", {"teacher": "greedy", "teacher_coef": 2.0, "teacher_fraction": 0.5})
    ).hp
    weights = [float(ppo.teacher_weight(hp, jnp.int32(s), 100)) for s in (0, 10, 25, 50, 80)]
    assert weights == pytest.approx([2.0, 1.6, 1.0, 0.0, 0.0])
    no_teacher = make_train_config(tiny_config("ippo")).hp
    assert float(ppo.teacher_weight(no_teacher, jnp.int32(0), 100)) == 0.0


def test_an_unknown_teacher_is_refused_in_one_line():
    allowed = r"teacher = 'oracle': must be a string one of \['greedy', 'intercept'\] \(or null\)"
    with pytest.raises(ConfigError, match=allowed):
        tiny_config("mappo", {"teacher": "oracle"})


@pytest.fixture(scope="module")
def kickstarted():
    """MAPPO with the greedy teacher on the tiny task, jitted once with its traced
    hyperparameters as an argument: (tc, run(teacher_coef) -> (runner, metrics))."""
    tc = make_train_config(
        tiny_config("mappo", dict(PARAMS, teacher="greedy"), total_timesteps=16 * 16 * 12)
    )
    run = traced_train(tc)
    return tc, lambda teacher_coef: run.with_values(teacher_coef=teacher_coef)


@pytest.fixture(scope="module")
def taught(kickstarted):
    tc, run = kickstarted
    return tc, run(5.0)


@pytest.mark.slow  # a kickstarted training run
def test_the_rollout_records_the_teachers_actions(taught):
    """Predators imitate the BFS chase: from (0, 0) and (1, 0) towards the prey at (3, 4)
    the chase moves +x or +y (discrete_5: 0 is +x, 1 is +y, 2 is -x, 3 is -y), never -x or
    -y."""
    tc, (runner, _) = taught
    _, trajectories, _ = jax.jit(mappo.rollout, static_argnums=1)(runner, tc, tc.env.default_params)
    taught_actions = np.asarray(trajectories["predator"].teacher_action)
    assert taught_actions.shape == (16, 16, 2)
    start = np.asarray(trajectories["predator"].x)[0, :, :, :2]  # scaled own x, y
    at_start = np.all(start * tc.env.layout.size == [[0, 0], [1, 0]], axis=(1, 2))
    assert at_start.any()
    assert set(np.unique(taught_actions[0][at_start])) <= {0, 1}


@pytest.mark.slow  # a kickstarted training run
def test_the_imitation_loss_falls_and_its_weight_is_traced(kickstarted, taught):
    tc, (_, metrics) = taught
    names = loss_names(("actor_loss", "value_loss", "entropy", "teacher_loss"))
    assert set(metrics["losses"]) == names
    imitation = np.asarray(metrics["losses"]["teacher_loss/predator"])  # [update]
    assert imitation[0] == pytest.approx(np.log(5.0), abs=0.05)  # a uniform policy
    assert imitation[-1] < 0.8 * imitation[0]
    # teacher_coef 0 runs in the same program (no new trace) and imitates less
    _, run = kickstarted
    _, untaught = run(0.0)
    unweighted = np.asarray(untaught["losses"]["teacher_loss/predator"])
    assert unweighted[0] == pytest.approx(np.log(5.0), abs=0.05)
    # (the reward alone also leads towards the chase's moves on this task, more slowly)
    assert unweighted.mean() > imitation.mean() + 0.03
