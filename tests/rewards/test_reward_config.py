"""rewards.yaml: every bad case is a clear error; the registry's own errors; the four PPAGE
ablation conditions under configs/ablation/, and the same ablation as one vmapped program."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import ppage_jax as pj
from ppage_jax.rewards.registry import get_term

ROOT = Path(__file__).resolve().parents[2]
ABLATION = ROOT / "configs" / "ablation"
CONDITIONS = {
    "base_only": ("base",),
    "predator_distance": ("base", "predator_distance"),
    "survival": ("base", "survival"),
    "both": ("base", "predator_distance", "survival"),
}


def load_rewards(tmp_path: Path, rewards: dict) -> pj.Config:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir(exist_ok=True)
    body = {"gamma": 0.99, "base": {"enabled": True, "weight": 1.0, "params": {}}}
    body.update(rewards)
    (config_dir / "rewards.yaml").write_text(yaml.safe_dump({"rewards": body}))
    return pj.load_config(config_dir)


def expect_error(tmp_path, rewards: dict, key: str, *phrases: str) -> pj.ConfigError:
    with pytest.raises(pj.ConfigError) as info:
        load_rewards(tmp_path, rewards)
    err = info.value
    message = str(err)
    assert err.key == key, message
    assert "rewards.yaml" in err.source, message
    for phrase in phrases:
        assert phrase in message, message
    return err


def test_base_under_shaping_explains_the_double_count(tmp_path):
    expect_error(
        tmp_path,
        {"shaping": [{"name": "survival"}, {"name": "base"}]},
        "rewards.shaping[1].name",
        "base.enabled",
        "twice",
    )


def test_unknown_term_lists_the_known_terms(tmp_path):
    err = expect_error(
        tmp_path,
        {"shaping": [{"name": "prey_distanse", "weight": 1.0}]},
        "rewards.shaping[0].name",
        "unknown reward term",
    )
    for name in (
        "predator_distance",
        "prey_distance",
        "capture_proximity",
        "potential_distance",
        "potential_prey_distance",
    ):
        assert name in str(err)


def test_unknown_param_lists_the_terms_params(tmp_path):
    expect_error(
        tmp_path,
        {"shaping": [{"name": "capture_proximity", "params": {"radious": 2.0}}]},
        "rewards.shaping[0].params.radious",
        "unknown param",
        "radius",
    )
    expect_error(
        tmp_path,
        {"base": {"enabled": True, "weight": 1.0, "params": {"capture_bonus": 5.0}}},
        "rewards.base.params.capture_bonus",
        "capture_reward",
    )
    expect_error(
        tmp_path,
        {"shaping": [{"name": "survival", "params": {"rate": 1.0}}]},
        "rewards.shaping[0].params.rate",
        "its params: []",
    )


@pytest.mark.parametrize("value", ["far", True, float("nan")])
def test_bad_param_values(tmp_path, value):
    expect_error(
        tmp_path,
        {"shaping": [{"name": "capture_proximity", "params": {"radius": value}}]},
        "rewards.shaping[0].params.radius",
        "finite number",
    )


def test_bad_credit_mode_lists_the_modes(tmp_path):
    expect_error(
        tmp_path,
        {"base": {"enabled": True, "weight": 1.0, "params": {"credit": "half"}}},
        "rewards.base.params.credit",
        "'full', 'split', 'team'",
    )


def test_bad_applies_to_lists_the_roles(tmp_path):
    expect_error(
        tmp_path,
        {"shaping": [{"name": "survival", "applies_to": "wolves"}]},
        "rewards.shaping[0].applies_to",
        "'predator', 'prey', 'all'",
    )


@pytest.mark.parametrize("weight", ["heavy", None, True, float("inf")])
def test_bad_weight(tmp_path, weight):
    expect_error(
        tmp_path,
        {"shaping": [{"name": "survival", "weight": weight}]},
        "rewards.shaping[0].weight",
        "finite number",
    )


def test_bad_shaping_entries(tmp_path):
    expect_error(
        tmp_path,
        {"shaping": [{"name": "survival", "scale": 2.0}]},
        "rewards.shaping[0].scale",
        "unknown key",
        "applies_to",
    )
    expect_error(tmp_path, {"shaping": ["survival"]}, "rewards.shaping[0]", "'name'")
    expect_error(
        tmp_path,
        {"shaping": [{"name": "survival"}, {"name": "survival"}]},
        "rewards.shaping[1].name",
        "twice",
    )
    expect_error(tmp_path, {"gamma": 1.5}, "rewards.gamma", "[0, 1]")


def test_good_rewards_yaml_reaches_the_traced_params(tmp_path):
    cfg = load_rewards(
        tmp_path,
        {
            "shaping": [
                {
                    "name": "capture_proximity",
                    "weight": -0.25,
                    "params": {"radius": 2},
                    "applies_to": "prey",
                },
                {"name": "potential_distance", "weight": 3},
            ]
        },
    )
    env = pj.make(cfg)
    assert env.reward_terms == ("base", "capture_proximity", "potential_distance")
    reward = env.default_params.reward
    np.testing.assert_allclose(reward.weights, [1.0, -0.25, 3.0])
    np.testing.assert_array_equal(reward.role_masks[1], ~env.is_predator)
    np.testing.assert_array_equal(reward.role_masks[2], env.is_predator)  # registered default
    assert float(reward.term_params["capture_proximity"]["radius"]) == 2.0
    assert int(reward.term_params["base"]["credit"]) == 0  # "full"


# ------------------------------------------------------------ the registry's own errors
def test_registering_a_name_twice_is_an_error():
    with pytest.raises(ValueError, match="'survival' is already registered"):
        pj.register_reward("survival")(lambda ctx: ctx.free_prey.astype(jnp.float32))
    with pytest.raises(ValueError, match="already registered"):
        pj.register_potential("potential_distance")(lambda state: state.positions[:, 0])
    assert get_term("survival").fn.__name__ == "survival"  # the original is kept


def test_registering_something_not_callable_is_an_error():
    with pytest.raises(TypeError, match="must be callable"):
        pj.register_reward("test_not_callable")(42)
    assert "test_not_callable" not in pj.reward_terms()
    with pytest.raises(ValueError, match="applies_to"):
        pj.register_reward("test_bad_role", applies_to="wolves")
    with pytest.raises(TypeError, match="default must be a number or a Choice"):
        pj.register_reward("test_bad_default", params={"radius": "far"})


def test_unknown_lookup_lists_known_terms():
    with pytest.raises(KeyError, match="known terms: .*'prey_distance'"):
        get_term("nope")


# ------------------------------------------------------------ PPAGE's four conditions
@pytest.fixture(scope="module")
def ablation_envs():
    return {name: pj.make(pj.load_config(ABLATION / name)) for name in CONDITIONS}


def test_ablation_dirs_are_full_configs_differing_only_in_rewards():
    default = sorted(p.name for p in (ROOT / "configs" / "default").glob("*.yaml"))
    for name in CONDITIONS:
        files = sorted(p.name for p in (ABLATION / name).glob("*.yaml"))
        assert files == default, name
        for file in files:
            if file != "rewards.yaml":
                assert (ABLATION / name / file).read_text() == (
                    ROOT / "configs" / "default" / file
                ).read_text(), (
                    f"configs/ablation/{name}/{file} differs from configs/default/{file}: copy it"
                )


def test_ablation_conditions_load_and_step_and_equal_one_vmapped_program(ablation_envs):
    both = ablation_envs["both"]
    key = jax.random.PRNGKey(4)
    _, state = jax.jit(both.reset)(key)  # the layout does not depend on the rewards
    actions = jnp.asarray(np.arange(both.num_agents) % both.num_actions, jnp.int32)
    # The four conditions as weight vectors of the `both` env: one compiled, vmapped step.
    stacked = jax.tree.map(
        lambda *x: jnp.stack(x),
        *[
            both.with_weights(
                both.default_params,
                predator_distance=0.5 * ("predator_distance" in terms),
                survival=1.0 * ("survival" in terms),
            )
            for terms in CONDITIONS.values()
        ],
    )
    vmapped = jax.jit(jax.vmap(both.step, in_axes=(None, None, None, 0)))(
        key, state, actions, stacked
    )
    for i, (name, terms) in enumerate(CONDITIONS.items()):
        env = ablation_envs[name]
        assert env.reward_terms == terms
        _, after, reward, terminated, truncated, info = jax.jit(env.step)(key, state, actions)
        assert info["reward_terms"].shape == (env.num_agents, len(terms))
        np.testing.assert_allclose(reward, vmapped[2][i], rtol=1e-6)
        np.testing.assert_array_equal(after.positions, vmapped[1].positions[i])
    assert not np.allclose(vmapped[2][0], vmapped[2][3])  # the conditions differ


def test_docs_reward_term_example_runs(capsys):
    import re

    page = (ROOT / "docs" / "rewards.md").read_text()
    example = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    ns: dict = {}
    try:
        exec(compile(example, "docs/rewards.md", "exec"), ns)
    finally:
        pj.rewards.unregister_reward("corner_fear")
    printed = capsys.readouterr().out
    assert "('base', 'predator_distance', 'corner_fear', 'potential_distance')" in printed
    env, state, terms = ns["env"], ns["state"], np.asarray(ns["info"]["reward_terms"])
    np.testing.assert_allclose(terms.sum(-1), ns["reward"], rtol=1e-6)
    # corner_fear (weight 2): -1 per sub-step for each free prey within 1 cell of two walls
    xy = np.asarray(state.positions)
    cornered = (np.minimum(xy, 5 - xy) <= 1).all(axis=1)
    free_prey = ~np.asarray(env.is_predator) & ~np.asarray(state.captured)
    speeds = np.asarray(env.default_params.speeds)
    np.testing.assert_array_equal(terms[:, 2], -2.0 * speeds * (free_prey & cornered))
    assert terms[:, 2].tolist() == [0, 0, 0, 0, 0, -6.0]  # prey_3 at (4, 1), speed 3


def test_with_rewards_gives_a_design_in_the_env_structure():
    """``env.with_rewards``: the env's own terms give its default reward; terms in another
    order land in the env's columns; a term missing or foreign is refused."""
    env = pj.make(pj.load_config(ABLATION / "both"))
    own = env.spec.rewards
    same = env.with_rewards(own, env.spec.gamma)
    for a, b in zip(jax.tree.leaves(same), jax.tree.leaves(env.default_params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    swapped = [pj.RewardTerm(t.name, 7.0 if t.name == "survival" else t.weight) for t in own]
    params = env.with_rewards(swapped[::-1], 0.5)
    assert params.structure == env.default_params.structure
    assert float(params.reward.weights[env.reward_terms.index("survival")]) == 7.0
    assert float(params.reward.gamma) == 0.5
    with pytest.raises(ValueError, match="do not match this env's terms"):
        env.with_rewards(own[:-1], 0.99)
    with pytest.raises(ValueError, match="do not match this env's terms"):
        env.with_rewards((*own, pj.RewardTerm("base")), 0.99)
