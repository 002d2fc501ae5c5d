"""Curricula: schedules of EnvParams leaves over env steps, applied inside the compiled update
loop; changing a schedule never recompiles."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import tiny_config

import ppage_jax as pj
from ppage_jax.config import ConfigError
from ppage_jax.train import algorithm, make_train_config
from ppage_jax.train.kit.loop import train_loop
from ppage_jax.train.kit.schedules import apply_curriculum, schedule_values
from ppage_jax.train.run.curriculum import config_curriculum, make_curriculum
from ppage_jax.train.run.runner import run_training

SCHEDULES = {
    "reward.weights.predator_distance": {
        "schedule": "linear",
        "from": 1.0,
        "to": 0.0,
        "begin": 100,
        "end": 300,
    },
    "reward.weights.survival": {"schedule": "cosine", "from": 2.0, "to": 0.0, "end": 400},
    "reward.term_params.base.step_cost": {
        "schedule": "step",
        "values": [0, 5, 7],
        "boundaries": [128, 256],
    },
    "max_steps": {"schedule": "constant", "value": 9},
}


def curriculum_config(schedules: dict, algo: str = "random", **overrides):
    return tiny_config(
        algo,
        {"num_steps": 8},
        total_timesteps=8 * 16 * 6,
        **{"experiment.curriculum": schedules, **overrides},
    )


def test_schedules_give_their_values_over_env_steps():
    config = curriculum_config(SCHEDULES)
    c = config_curriculum(config)
    assert c.keys == tuple(SCHEDULES)
    table = np.stack(
        [np.asarray(schedule_values(c, jnp.int32(t))) for t in (0, 100, 200, 256, 300, 400, 10_000)]
    )
    np.testing.assert_allclose(table[:, 0], [1, 1, 0.5, 0.22, 0, 0, 0], atol=1e-6)  # linear
    np.testing.assert_allclose(
        table[:, 1],
        [
            2,
            2 * np.cos(np.pi / 8) ** 2,
            1.0,
            2 * np.cos(np.pi * 0.32) ** 2,
            2 * np.cos(np.pi * 3 / 8) ** 2,
            0,
            0,
        ],
        atol=1e-5,
    )
    np.testing.assert_allclose(table[:, 2], [0, 0, 5, 7, 7, 7, 7])  # step
    np.testing.assert_allclose(table[:, 3], 9)  # constant


def test_apply_sets_the_leaves_and_rounds_integer_ones():
    config = curriculum_config(
        {
            "reward.weights.survival": {"schedule": "constant", "value": 0.25},
            "max_steps": {"schedule": "linear", "from": 4, "to": 20, "end": 100},
            "speeds.predators": {"schedule": "constant", "value": 1},
            "stamina.preys": {"schedule": "constant", "value": 3},
            "reward.gamma": {"schedule": "constant", "value": 0.5},
        }
    )
    env = pj.make(config)
    params, logged = apply_curriculum(config_curriculum(config), env.default_params, jnp.int32(50))
    weights = dict(zip(env.reward_terms, np.asarray(params.reward.weights).tolist(), strict=True))
    assert weights == {"base": 1.0, "predator_distance": 0.5, "survival": 0.25}
    assert int(params.max_steps) == 12 and params.max_steps.dtype == jnp.int32
    assert np.asarray(params.stamina).tolist() == [2**30, 2**30, 3]
    assert float(params.reward.gamma) == 0.5
    assert {k: float(v) for k, v in logged.items()} == {
        "curriculum/reward.weights.survival": 0.25,
        "curriculum/max_steps": 12.0,
        "curriculum/speeds.predators": 1.0,
        "curriculum/stamina.preys": 3.0,
        "curriculum/reward.gamma": 0.5,
    }
    assert apply_curriculum(None, env.default_params, jnp.int32(5)) == (env.default_params, {})


def test_nested_keys_are_read_as_dotted_ones():
    config = curriculum_config(
        {
            "max_steps": {"schedule": "constant", "value": 5},
            "reward": {"weights": {"survival": {"schedule": "constant", "value": 0}}},
        }
    )
    assert list(config["experiment"]["curriculum"]) == ["max_steps", "reward.weights.survival"]
    # a nested override edits one number of a schedule written with a dotted key
    edited = config.with_overrides({"experiment.curriculum.reward.weights.survival.value": 2})
    assert edited["experiment"]["curriculum"]["reward.weights.survival"] == {
        "schedule": "constant",
        "value": 2,
    }
    assert config_curriculum(curriculum_config({})) is None


@pytest.mark.parametrize(
    "schedules, message",
    [
        (
            {"reward.weights.nope": {"schedule": "constant", "value": 1}},
            "is not a schedulable leaf; allowed: ['capture_threshold'",
        ),
        ({"max_steps": {"schedule": "sine", "value": 1}}, "must be one of ['constant'"),
        ({"max_steps": {"schedule": "linear", "from": 1, "to": 2}}, "end = None: is required"),
        (
            {"max_steps": {"schedule": "linear", "from": 1, "to": 2, "end": 5, "value": 3}},
            "unknown key of a linear schedule",
        ),
        (
            {"max_steps": {"schedule": "linear", "from": 1, "to": 2, "begin": 9, "end": 5}},
            "must be an integer number of env steps >= 10",
        ),
        (
            {"max_steps": {"schedule": "step", "values": [1, 2], "boundaries": []}},
            "must be a list of len(values) - 1 = 1",
        ),
        (
            {"max_steps": {"schedule": "step", "values": [1, 2, 3], "boundaries": [9, 9]}},
            "must be strictly increasing",
        ),
        ({"max_steps": {"schedule": "constant", "value": 0}}, "must lie in [1, 2147483647]"),
        (
            {"speeds.preys": {"schedule": "constant", "value": 2}},
            "configure the fastest speed and schedule lower ones",
        ),
        ({"max_steps": {"value": 5}}, "must be a schedule mapping"),
    ],
)
def test_bad_schedules_are_config_errors(schedules, message):
    with pytest.raises(ConfigError) as err:
        curriculum_config(schedules)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def traced_training():
    """One compiled training loop (random actions), called with two curricula."""
    config = curriculum_config(SCHEDULES)
    tc = make_train_config(config)
    module = algorithm("random")

    @jax.jit
    @chex.assert_max_traces(n=1)
    def train(key, params, curriculum):
        return train_loop(module.init, module.update, key, tc, params, curriculum)

    return config, tc, train


def test_changing_a_schedule_never_recompiles(traced_training):
    config, tc, train = traced_training
    params = tc.env.default_params
    first = config_curriculum(config)
    other = dict(
        SCHEDULES,
        **{
            "reward.weights.predator_distance": {
                "schedule": "step",
                "values": [3, 0],
                "boundaries": [256],
            },
            "max_steps": {"schedule": "linear", "from": 4, "to": 12, "begin": 0, "end": 640},
        },
    )
    second = make_curriculum(curriculum_config(other)["experiment"]["curriculum"], config.data)
    _, m1 = train(jax.random.PRNGKey(0), params, first)
    _, m2 = train(jax.random.PRNGKey(0), params, second)  # no new trace
    steps = np.arange(6) * tc.env_steps_per_update  # 128 per update
    extras1, extras2 = m1["extras"], m2["extras"]
    np.testing.assert_allclose(
        extras1["curriculum/reward.weights.predator_distance"], [1, 0.86, 0.22, 0, 0, 0], atol=1e-6
    )
    np.testing.assert_allclose(
        extras2["curriculum/reward.weights.predator_distance"], np.where(steps >= 256, 0, 3)
    )
    np.testing.assert_allclose(extras1["curriculum/max_steps"], 9)
    np.testing.assert_allclose(extras2["curriculum/max_steps"], np.round(4 + steps / 80))
    # the schedules reach the environment: no episode outlives the scheduled step limit ...
    assert np.nanmax(m1["episode_length"]) <= 9
    # ... and a weight of 0 pays exactly nothing, 3 pays three times the unit distance
    paid = np.asarray(m2["returns"])[:, 0, 1]  # predator, predator_distance
    late = paid[4:][np.isfinite(paid[4:])]  # episodes begun at weight 0 (NaN: none)
    assert late.size and np.all(late == 0) and np.all(paid[:2] < 0)


def test_chunked_runner_applies_the_same_schedules(traced_training):
    config, tc, train = traced_training
    curriculum = config_curriculum(config)
    _, whole = train(jax.random.PRNGKey(3), tc.env.default_params, curriculum)
    result = run_training(tc, tc.env.default_params, 3, 1, target_chunks=3, curriculum=curriculum)
    for key in ("episode_length", "capture_rate"):
        np.testing.assert_array_equal(result.metrics[key][0], whole[key])
    np.testing.assert_array_equal(
        result.metrics["extras"]["curriculum/max_steps"][0], whole["extras"]["curriculum/max_steps"]
    )


def test_the_shipped_curriculum_anneals_the_default_shaping_to_zero():
    config = pj.load_config("curriculum")
    default = pj.load_config("default")
    for section in ("env", "agents", "observations", "rewards", "actions"):
        assert config[section] == default[section]
    assert config["experiment"] == dict(
        default["experiment"], curriculum=config["experiment"]["curriculum"]
    )
    c = config_curriculum(config)
    env = pj.make(config)
    for steps, weights in (
        (0, [1.0, 0.5, 1.0]),
        (1_000_000, [1.0, 0.25, 0.5]),
        (2_000_000, [1.0, 0.0, 0.0]),
        (3_000_000, [1.0, 0.0, 0.0]),
    ):
        params, _ = apply_curriculum(c, env.default_params, jnp.int32(steps))
        np.testing.assert_allclose(params.reward.weights, weights)  # base, distance, survival


def test_pj_train_agents_applies_a_configs_curriculum(traced_training):
    config, tc, train = traced_training
    _, direct = pj.train_agents(jax.random.PRNGKey(0), config)
    _, traced = train(jax.random.PRNGKey(0), tc.env.default_params, config_curriculum(config))
    assert sorted(direct["extras"]) == [f"curriculum/{k}" for k in sorted(SCHEDULES)]
    for key in ("episode_length", "capture_rate"):
        np.testing.assert_array_equal(direct[key], traced[key])


# --------------------------------------------------------------------------- hyperparameters
HYPER_SCHEDULES = {
    "epsilon": {"schedule": "linear", "from": 1.0, "to": 0.0, "end": 640},
    "alpha": {"schedule": "step", "values": [0.5, 0.1], "boundaries": [256]},
}


@pytest.fixture(scope="module")
def traced_iql():
    """Tabular Q-learning with epsilon held where it is put (no decay, no floor), its
    training loop compiled once for any schedules of epsilon and alpha."""
    config = tiny_config(
        "iql",
        {"num_steps": 8, "epsilon_decay": 1.0, "min_epsilon": 0.0, "table_size": 1024},
        total_timesteps=8 * 16 * 6,
        **{"experiment.curriculum": HYPER_SCHEDULES},
    )
    tc = make_train_config(config)
    module = algorithm("iql")

    @jax.jit
    @chex.assert_max_traces(n=1)
    def train(key, curriculum):
        return train_loop(module.init, module.update, key, tc, tc.env.default_params, curriculum)

    return config, train


def test_a_hyperparameter_schedule_reaches_the_learner_without_recompiling(traced_iql):
    config, train = traced_iql
    _, m1 = train(jax.random.PRNGKey(0), config_curriculum(config))
    other = {
        "epsilon": {"schedule": "constant", "value": 0.25},
        "alpha": {"schedule": "constant", "value": 1.0},
    }
    second = make_curriculum(
        config.with_overrides({"experiment.curriculum": other})["experiment"]["curriculum"],
        config.data,
    )
    _, m2 = train(jax.random.PRNGKey(0), second)  # no new trace
    np.testing.assert_allclose(m1["extras"]["curriculum/epsilon"], [1, 0.8, 0.6, 0.4, 0.2, 0])
    np.testing.assert_allclose(m1["extras"]["curriculum/alpha"], [0.5, 0.5, 0.1, 0.1, 0.1, 0.1])
    # the learner explores with the scheduled epsilon (its own extras column)
    np.testing.assert_allclose(m1["extras"]["epsilon"], m1["extras"]["curriculum/epsilon"])
    np.testing.assert_allclose(m2["extras"]["epsilon"], 0.25)
    np.testing.assert_allclose(m2["extras"]["curriculum/alpha"], 1.0)


@pytest.mark.parametrize(
    "schedules, message",
    [
        (
            {"learning_rate": {"schedule": "constant", "value": -1}},
            "its values must be a number > 0 for learning_rate",
        ),
        (
            {"gae_lambda": {"schedule": "linear", "from": 0.9, "to": 2, "end": 9}},
            "its values must be a number in [0, 1] for gae_lambda",
        ),
        ({"hidden_layers": {"schedule": "constant", "value": 8}}, "'ent_coef', 'gae_lambda'"),
    ],
)
def test_bad_hyperparameter_schedules_are_config_errors(schedules, message):
    with pytest.raises(ConfigError) as err:
        curriculum_config(schedules, "ippo")
    assert message in str(err.value)
    assert "\n" not in str(err.value)
