"""GridWorld built from a typed EnvSpec: the same env as ``pj.make`` of the config it
translates, keyword fields, one-line refusals naming the spec field, and ``make`` unchanged."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.config import ConfigError
from ppage_jax.config.env_spec import EnvSpec, RewardTerm, SpecError, env_spec
from ppage_jax.observations import builder_params

# Three turns of actions for the 3v3 default (discrete_5: right, +y, left, -y, no-op).
ACTIONS = [[0, 1, 2, 3, 4, 0], [4, 4, 1, 1, 2, 2], [3, 0, 4, 1, 0, 2]]


def leaves_equal(a, b) -> bool:
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def rollout(env: pj.GridWorld, seed: int) -> list:
    """(reset obs, then every step's outputs) from PRNGKey(seed) with ACTIONS."""
    reset, step_fn = jax.jit(env.reset), jax.jit(env.step)  # one compile, not op by op
    obs, state = reset(jax.random.PRNGKey(seed))
    out = [obs, state]
    for t, actions in enumerate(ACTIONS):
        step = step_fn(jax.random.PRNGKey(t), state, jnp.asarray(actions, jnp.int32))
        state = step[1]
        out.append(step)
    return out


def test_spec_without_config_is_the_default_config_env():
    typed, made = pj.GridWorld(EnvSpec()), pj.make("default")
    assert typed.layout == made.layout
    assert typed.agent_names == made.agent_names
    assert typed.reward_terms == made.reward_terms == ("base", "predator_distance", "survival")
    assert typed.observation_size == made.observation_size == 120
    assert leaves_equal(typed.default_params, made.default_params)
    assert typed.default_params.structure == made.default_params.structure
    for seed in (0, 7):
        assert leaves_equal(rollout(typed, seed), rollout(made, seed))
    # The shipped default spells out local_radius's params; the spec leaves them to the builder.
    assert made.spec == EnvSpec(observation_params=builder_params("local_radius"))
    assert pj.GridWorld().spec == EnvSpec() == env_spec(pj.load_config(None))
    assert not hasattr(typed, "config")


@pytest.mark.slow  # every shipped config
def test_every_shipped_config_builds_the_same_env_from_its_spec():
    for name in ("1v1", "ablation/both"):
        made = pj.make(name)
        typed = pj.GridWorld(made.spec)
        assert typed.layout == made.layout and typed.reward_terms == made.reward_terms
        assert leaves_equal(typed.default_params, made.default_params)
        obs, _ = typed.reset(jax.random.PRNGKey(3))
        np.testing.assert_array_equal(obs, made.reset(jax.random.PRNGKey(3))[0])


def test_keyword_fields_override_the_spec():
    env = pj.GridWorld(size=12, n_prey=2, prey_speed=1, max_steps=None)
    assert env.layout.size == 12 and env.layout.n_prey == 2 and env.num_agents == 5
    assert env.spec == EnvSpec(size=12, n_prey=2, prey_speed=1, max_steps=None)
    made = pj.make(
        None,
        {
            "env.size": 12,
            "agents.preys.count": 2,
            "agents.preys.speed": 1,
            "env.termination.max_steps": None,
            "experiment.eval.max_steps": 100,
        },
    )
    assert env.spec == made.spec
    assert leaves_equal(env.default_params, made.default_params)
    base = EnvSpec(n_predators=1, n_prey=1)
    small = pj.GridWorld(base, size=5, obstacle_percentage=0.0)
    assert small.spec == dataclasses.replace(base, size=5, obstacle_percentage=0.0)
    assert small.layout.num_obstacles == 0 and small.spec.n_predators == 1


def test_spec_is_plain_hashable_data():
    spec = EnvSpec(
        size=5,
        n_predators=1,
        n_prey=1,
        fixed_map=["#....", ".....", ".....", ".....", "....#"],
        fixed_starts=[[1, 0], [3, 4]],
        observation_type="grid",
        observation_per_agent={"prey": {"radius": 2}, "predator": {"radius": 1}},
        rewards=[{"name": "base", "params": {"credit": "team", "capture_reward": 40}}],
    )
    assert spec.fixed_map == ("#....", ".....", ".....", ".....", "....#")
    assert spec.fixed_starts == ((1, 0), (3, 4))
    assert spec.observation_per_agent == (
        ("predator", (("radius", 1),)),
        ("prey", (("radius", 2),)),
    )
    assert spec.rewards == (RewardTerm("base", 1.0, (("capture_reward", 40), ("credit", "team"))),)
    assert spec.obstacle_percentage == 8.0  # the map's density: 2 of 25 cells
    assert spec.num_obstacles == 2 and spec.speeds == (1, 3) and spec.stamina == (None, None)
    same = EnvSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})
    assert same == spec and hash(same) == hash(spec) and same.digest() == spec.digest()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.size = 6  # type: ignore[misc]
    env = pj.GridWorld(spec)
    _, state = env.reset(jax.random.PRNGKey(0))
    assert np.asarray(state.positions).tolist() == [[1, 0], [3, 4]]
    assert env.observation.name == "grid"
    assert float(env.default_params.reward.term_params["base"]["capture_reward"]) == 40.0


def test_digest_without_rewards_ignores_reward_numbers():
    spec = EnvSpec()
    other = spec.replace(gamma=0.5, rewards=(RewardTerm("base", 2.0),))
    assert other.digest(rewards=False) == spec.digest(rewards=False)
    assert other.digest() != spec.digest()
    assert spec.replace(size=11).digest(rewards=False) != spec.digest(rewards=False)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"size": 1}, "EnvSpec.size = 1: must be an integer >= 2 and <= 4096"),
        ({"n_predators": 0, "n_prey": 0}, "EnvSpec.n_predators = 0: predators and prey"),
        ({"prey_speed": 0}, "EnvSpec.prey_speed = 0: must be an integer >= 1"),
        ({"gamma": 1.5}, "EnvSpec.gamma = 1.5: must be a number in [0, 1]"),
        ({"obstacle_percentage": 100}, "EnvSpec.obstacle_percentage = 100: must be a number"),
        ({"max_steps": 0}, "EnvSpec.max_steps = 0: must be an integer >= 1 (or None"),
        ({"prey_prefix": "predator"}, "EnvSpec.prey_prefix = 'predator': must differ"),
        ({"action_type": "hex"}, "EnvSpec.action_type = 'hex': unknown action table"),
        ({"fixed_starts": [[0, 0]]}, "EnvSpec.fixed_starts = [[0, 0]]: must be 6 (x, y) pairs"),
        ({"observation_type": "nope"}, "EnvSpec.observation_type = 'nope': unknown observation"),
        (
            {"rewards": [("base", float("inf"))]},
            "EnvSpec.rewards[0].weight = inf: must be a finite number in float32 range",
        ),
        ({"rewards": [("bonus",)]}, "EnvSpec.rewards[0].name = 'bonus': unknown reward term"),
        (
            {"rewards": [("base", 1.0, {"credit": "half"})]},
            "EnvSpec.rewards[0].params.credit = 'half': must be one of ['full', 'split', 'team']",
        ),
        (
            {"rewards": [("survival",), ("survival",)]},
            "EnvSpec.rewards[1].name = 'survival': is listed twice",
        ),
        (
            {"size": 4000, "obstacle_percentage": 50.0},
            "EnvSpec.size = 4000: the state (6 agents, 8000000 obstacles, 4000x4000 cells) "
            "would take 76.3 MiB per environment, above the limit of 64 MiB",
        ),
        (
            {"size": 2000},
            "EnvSpec.observation_type = 'local_radius': the observations (6 agents x 3200040 "
            "float32 features) would take 73.2 MiB",
        ),
    ],
)
def test_a_bad_spec_value_is_one_line_naming_the_field(fields, message):
    with pytest.raises(SpecError) as err:
        pj.GridWorld(**fields)
    text = str(err.value)
    assert isinstance(err.value, ValueError) and "\n" not in text
    assert text.startswith(message), text


def test_unknown_fields_and_configs_are_refused():
    with pytest.raises(TypeError, match="unknown EnvSpec field 'sise'; fields: "):
        pj.GridWorld(sise=12)
    with pytest.raises(TypeError, match=r"GridWorld takes an EnvSpec .* ppage_jax.make\(config\)"):
        pj.GridWorld(pj.load_config(None))  # type: ignore[arg-type]


def test_make_keeps_names_paths_configs_and_overrides():
    config = pj.load_config("configs/1v1")
    assert pj.make(config).spec == env_spec(config) == pj.make("1v1").spec
    assert pj.make("configs/1v1").spec == pj.make(config).spec
    assert pj.make(config, {"env.size": 8}).layout.size == 8
    assert pj.make("1v1", {"env.size": 8}).spec == env_spec(config).replace(size=8)
    assert pj.make(None).spec == EnvSpec()
    # The memory limits still name the config key and where it came from.
    with pytest.raises(ConfigError) as err:
        pj.make(None, {"env.size": 4000, "env.obstacle_percentage": 50.0})
    assert str(err.value).startswith("override env.size=4000: env.size = 4000: the state (6 agents")
    with pytest.raises(ConfigError) as err:
        pj.make(None, {"env.size": 2000})
    assert err.value.key == "observations.type" and err.value.source == "package defaults"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("env.size", 0, "env.size = 0: must be an integer >= 2 and <= 4096"),
        ("agents.preys.speed", 0, "agents.preys.speed = 0: must be an integer >= 1"),
        (
            "env.map",
            ["..", ".."],
            "env.map = ['..', '..']: must be 10 strings of 10 characters (env.size)",
        ),
        (
            "agents.naming.prey_prefix",
            "predator",
            "agents.naming.prey_prefix = 'predator': must differ from "
            "agents.naming.predator_prefix (agent names are unique)",
        ),
        (
            "rewards.shaping",
            [{"name": "survival", "weight": 1e39}],
            "rewards.shaping[0].weight = 1e+39: must be a finite number in float32 range",
        ),
    ],
)
def test_a_bad_env_value_reads_the_same_at_load_and_at_make(key, value, message):
    """The env's rules live in the EnvSpec: loading a config reports its refusal at the
    config key, as make does with a Config whose values skipped loading's checks."""
    with pytest.raises(ConfigError) as at_load:
        pj.load_config(None, {key: value})
    good = pj.load_config(None)
    data = good.to_dict()
    section, *path = key.split(".")
    node = data[section]
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    unchecked = pj.Config(data, {**good.sources, key: at_load.value.source})
    with pytest.raises(ConfigError) as at_make:
        pj.make(unchecked)
    assert str(at_load.value) == str(at_make.value)
    assert str(at_load.value).startswith(f"override {key}=")
    assert message in str(at_load.value), str(at_load.value)
