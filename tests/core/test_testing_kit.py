"""The user-facing test kit ``ppage_jax.testing``: each deliberately broken reward term,
potential or observation builder fails with its rule named; correct ones pass."""

from __future__ import annotations

import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.observations import ObservationBuilder
from ppage_jax.rewards import unregister_reward
from ppage_jax.testing import (
    OBSERVATION_RULES,
    REWARD_RULES,
    ContractError,
    check_observation_builder,
    check_reward_term,
    default_env,
    sample_substeps,
)


def agents(ctx) -> tuple[int]:
    return ctx.is_predator.shape


# ------------------------------------------------------------------ broken reward terms
def wrong_shape(ctx):
    """One column too many."""
    return jnp.zeros((*agents(ctx), 1), jnp.float32)


def scalar_potential(state, ctx):
    """A scalar, not one value per agent."""
    return jnp.float32(0.0)


def integer_values(ctx):
    """int32 distances."""
    return jnp.zeros(agents(ctx), jnp.int32)


def pays_nan(ctx):
    """NaN to the predators."""
    return jnp.where(ctx.is_predator, jnp.nan, 0.0).astype(jnp.float32)


_calls = itertools.count()


def hidden_counter(ctx):
    """Counts its calls in a Python global."""
    return jnp.full(agents(ctx), float(next(_calls) % 7), jnp.float32) * ctx.free_prey


def reads_the_clock(ctx):
    """Adds the wall clock."""
    return (
        jnp.full(agents(ctx), (time.perf_counter_ns() % 1_000_003) / 1e6, jnp.float32)
        * ctx.free_prey
    )


def mutates_params(ctx):
    """Writes into its params."""
    ctx.params["radius"] = ctx.params["radius"] + 1.0
    return jnp.zeros(agents(ctx), jnp.float32)


def mutates_state(ctx):
    """Overwrites the state's captured flags in place."""
    object.__setattr__(ctx.state, "captured", ~ctx.state.captured)
    return jnp.zeros(agents(ctx), jnp.float32)


def host_sync(ctx):
    """Reads the positions back to NumPy (fine eagerly, impossible under jit)."""
    positions = np.asarray(ctx.state.positions)
    return jnp.asarray(positions[:, 0] * 0, jnp.float32)


@jax.custom_batching.custom_vmap
def _drop_under_vmap(x):
    return x


@_drop_under_vmap.def_vmap
def _drop_rule(axis_size, in_batched, x):
    return jnp.zeros_like(x), in_batched[0]


def differs_under_vmap(ctx):
    """Pays survival, but a custom batching rule drops it under vmap."""
    return _drop_under_vmap(ctx.free_prey.astype(jnp.float32))


def pays_without_prey(ctx):
    """+1 to every predator, every sub-step, prey or no prey."""
    return ctx.is_predator.astype(jnp.float32)


def potential_without_prey(state, ctx):
    """phi = 1 for everyone, even at the end."""
    return jnp.ones(ctx.is_predator.shape, jnp.float32)


def undeclared_param(ctx):
    """Reads a param it never declared."""
    return jnp.where(ctx.free_prey, ctx.params["range"], 0.0).astype(jnp.float32)


def nan_for_other_params(ctx):
    """Finite at the default radius 1 only: log(2 - radius)."""
    return (jnp.log(2.0 - ctx.params["radius"]) * ctx.free_prey).astype(jnp.float32)


def no_docstring(ctx):
    return ctx.free_prey.astype(jnp.float32)


def raises(ctx):
    """Always fails."""
    raise ValueError("not implemented")


no_docstring.__doc__ = None

BROKEN_TERMS = [
    (wrong_shape, {}, False, "shape"),
    (scalar_potential, {}, True, "shape"),
    (integer_values, {}, False, "dtype"),
    (pays_nan, {}, False, "finite"),
    (hidden_counter, {}, False, "deterministic"),
    (reads_the_clock, {}, False, "deterministic"),
    (mutates_params, {"radius": 1.0}, False, "inputs_untouched"),
    (mutates_state, {}, False, "inputs_untouched"),
    (host_sync, {}, False, "jit"),
    (differs_under_vmap, {}, False, "vmap"),
    (pays_without_prey, {}, False, "zero_without_prey"),
    (potential_without_prey, {}, True, "zero_without_prey"),
    (undeclared_param, {}, False, "params"),
    (nan_for_other_params, {"radius": 1.0}, False, "params"),
    (no_docstring, {}, False, "docstring"),
    (raises, {}, False, "runs"),
]


@pytest.mark.parametrize(
    "fn,params,potential,rule", BROKEN_TERMS, ids=[case[0].__name__ for case in BROKEN_TERMS]
)
def test_broken_term_fails_its_rule(fn, params, potential, rule):
    before = pj.reward_terms()
    with pytest.raises(ContractError, match=f"'{rule}' rule") as err:
        check_reward_term(fn, params=params, potential=potential)
    assert err.value.rule == rule and isinstance(err.value, AssertionError)
    assert fn.__name__ in str(err.value)
    assert pj.reward_terms() == before  # the temporary registration is gone


def test_messages_say_what_was_wrong():
    with pytest.raises(ContractError) as err:
        check_reward_term(wrong_shape)
    assert str(err.value) == (
        "reward term 'wrong_shape' breaks the 'shape' rule: returns "
        "shape (4, 1) on sample 0; expected (4,)"
    )
    with pytest.raises(ContractError, match="reads param 'range', which it does not declare"):
        check_reward_term(undeclared_param)
    with pytest.raises(ContractError, match=r"pays 1\.0 to agent 0 on sample 0 once no "):
        check_reward_term(pays_without_prey)
    with pytest.raises(ContractError, match=r"non-finite values with radius=3\.0"):
        check_reward_term(nan_for_other_params, params={"radius": 1.0})


def test_a_skipped_rule_is_not_checked():
    checked = check_reward_term(pays_without_prey, skip=["zero_without_prey"])
    assert "zero_without_prey" not in checked.rules
    with pytest.raises(ValueError, match="cannot skip rule 'runs'"):
        check_reward_term(pays_without_prey, skip=["runs"])
    with pytest.raises(ValueError, match="cannot skip rule 'speed'.*'jit'"):
        check_reward_term(pays_without_prey, skip=["speed"])


@pytest.mark.parametrize("check", ["term", "builder"])
def test_a_non_finite_value_is_always_caught(check):
    # 'finite' cannot be skipped: a NaN term or builder never passes the kit.
    with pytest.raises(ValueError, match="cannot skip rule 'finite'"):
        if check == "term":
            check_reward_term(pays_nan, skip=["finite"])
        else:
            check_observation_builder(builder(3, nan_features), skip=["finite"])
    with pytest.raises(ContractError) as err:
        check_reward_term(pays_nan)
    assert err.value.rule == "finite"
    assert "returns nan at index (0, 0) on the sampled states" in str(err.value)


# ------------------------------------------------------------------ correct user terms
def crowding(ctx: pj.RewardContext) -> jax.Array:
    """Predators: -(other predators within `radius`, Manhattan)."""
    positions = ctx.state.positions
    dist = jnp.abs(positions[:, None, :] - positions[None, :, :]).sum(-1)
    both = ctx.is_predator[:, None] & ctx.is_predator[None, :]
    near = both & (dist <= ctx.params["radius"]) & ~jnp.eye(dist.shape[0], dtype=bool)
    return jnp.where(ctx.free_prey.any(), -near.sum(axis=1), 0).astype(jnp.float32)


def test_correct_user_term_passes_and_reports():
    checked = check_reward_term(crowding, params={"radius": 1.0})
    assert checked.subject == "reward term 'crowding'" and checked.rules == REWARD_RULES
    assert checked.values.shape == (8, 4) and checked.values.dtype == np.float32
    assert (checked.values[:, 2:] == 0).all()
    # 2 predators: -1 each when they stand within 1 cell of each other and some prey is free
    state = checked.samples.state
    positions = np.asarray(state.positions)
    near = np.abs(positions[:, 0] - positions[:, 1]).sum(-1) <= 1
    paid = -(near & ~np.asarray(state.captured)[:, 2:].all(-1)).astype(np.float32)
    np.testing.assert_array_equal(checked.values[:, :2], np.stack([paid, paid], axis=1))
    assert checked.values[:, :2].tolist() == [[0, 0]] * 4 + [[-1, -1]] + [[0, 0]] * 3
    assert not checked.values_without_prey.any()
    assert "crowding" not in pj.reward_terms()


def test_registered_term_by_name_or_function_on_a_given_env():
    unregister_reward("kit_crowding")
    pj.register_reward("kit_crowding", params={"radius": 2.0}, applies_to="predator")(crowding)
    try:
        env = pj.make(
            None,
            {
                "env.size": 6,
                "agents.predators.count": 3,
                "rewards.shaping": [
                    {"name": "kit_crowding", "weight": 1.0, "params": {"radius": 10.0}}
                ],
            },
        )
        by_name = check_reward_term("kit_crowding", env, samples=3)
        assert by_name.subject == "reward term 'kit_crowding'" and by_name.values.shape == (3, 6)
        state = by_name.samples.state  # the configured radius 10 reaches across the grid
        free_prey = (~env.is_predator & ~np.asarray(state.captured)).any(-1)
        np.testing.assert_array_equal(by_name.values, -2.0 * env.is_predator * free_prey[:, None])
        assert free_prey.any()
        by_function = check_reward_term(crowding, samples=3)
        assert by_function.subject == "reward term 'kit_crowding'"
        with pytest.raises(ValueError, match="registered with its own params"):
            check_reward_term(crowding, params={"radius": 1.0})
    finally:
        unregister_reward("kit_crowding")


def test_shipped_potential_and_unknown_name():
    assert (
        check_reward_term("potential_distance", samples=2).subject
        == "potential 'potential_distance'"
    )
    with pytest.raises(KeyError, match="known terms"):
        check_reward_term("no_such_term")


def test_sampled_substeps_are_cached_and_cover_captures():
    env = default_env()
    assert sample_substeps(env, 8, 0) is sample_substeps(env, 8, 0)
    some, none_left = sample_substeps(env, 8, 0)
    assert len(some) == 8 and some.one(3).state.positions.shape == (4, 2)
    assert np.asarray(some.events.num_captured).sum() > 0
    assert np.asarray(none_left.prev.captured)[:, 2:].all()
    assert not np.asarray(none_left.events.num_captured).any()


# ------------------------------------------------------------------ observation builders
def builder(size: int, fn, shape=None):
    """A factory ``factory(layout) -> ObservationBuilder`` named after ``fn``."""

    def factory(layout):
        return ObservationBuilder(fn.__name__, size, fn, shape)

    factory.__name__ = fn.__name__
    return factory


def positions_and_flag(state, params):
    return jnp.concatenate([state.positions, state.captured[:, None]], 1).astype(jnp.float32)


def one_feature_too_many(state, params):
    return jnp.zeros((state.positions.shape[0], 4), jnp.float32)


def drops_captured_agents(state, params):
    return state.positions[~state.captured].astype(jnp.float32)


def integer_features(state, params):
    return jnp.concatenate([state.positions, state.captured[:, None]], 1)


def nan_features(state, params):
    return positions_and_flag(state, params) / 0.0


_observe_calls = itertools.count()


def counted_features(state, params):
    return positions_and_flag(state, params) + float(next(_observe_calls))


def host_features(state, params):
    return jnp.asarray(np.asarray(positions_and_flag(state, params)))


def fails_to_build(layout, radius=1):
    raise ValueError("radius too small")


BROKEN_BUILDERS = [
    (builder(3, one_feature_too_many), "shape"),
    (builder(3, positions_and_flag, shape=(2, 2)), "shape"),
    (builder(3, drops_captured_agents), "shape"),
    (builder(3, integer_features), "dtype"),
    (builder(3, nan_features), "finite"),
    (builder(3, counted_features), "deterministic"),
    (builder(3, host_features), "jit"),
    (fails_to_build, "builds"),
]


@pytest.mark.parametrize(
    "factory,rule",
    BROKEN_BUILDERS,
    ids=[f"{case[0].__name__}-{i}" for i, case in enumerate(BROKEN_BUILDERS)],
)
def test_broken_builder_fails_its_rule(factory, rule):
    with pytest.raises(ContractError, match=f"'{rule}' rule") as err:
        check_observation_builder(factory)
    assert err.value.rule == rule
    assert str(err.value).startswith(f"observation builder {factory.__name__!r}")


def test_correct_builder_passes():
    checked = check_observation_builder(builder(3, positions_and_flag), samples=3)
    assert checked.rules == OBSERVATION_RULES and checked.values.shape == (3, 4, 3)
    np.testing.assert_array_equal(checked.values[..., :2], checked.samples.state.positions)
    np.testing.assert_array_equal(checked.values_without_prey[:, 2:, 2], 1.0)
    with pytest.raises(ContractError, match="'builds' rule: ValueError: .*unknown param"):
        check_observation_builder("local_only", params={"radius": 2})


# ------------------------------------------------------------------ docs/testing.md
@pytest.mark.slow  # runs the docs' examples
def test_docs_examples_run(repo_root, capsys):
    import re

    page = (repo_root / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    runnable = [b for b in blocks if "import my_terms" not in b]
    assert len(blocks) == 3 and len(runnable) == 2
    try:
        for block in runnable:
            exec(compile(block, "docs/testing.md", "exec"), {})
    finally:
        unregister_reward("crowding")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == str(REWARD_RULES) and printed[1] == "(8, 4)"
    assert printed[2] == "zero_without_prey"
    assert printed[3].startswith(
        "reward term 'always_pays' breaks the 'zero_without_prey' "
        "rule: pays 1.0 to agent 0 on sample 0"
    )
