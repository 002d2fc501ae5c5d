"""Encoders: chosen per observation, the set encoder's window (the grid view rebuilt from the
slots), its permutation invariance and presence mask, the conv torso's reading of space, and
short IPPO runs with each that learn the tiny task where the untrained policy never
captures."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import assert_learned, seeds, tiny_config, train_seeds

import ppage_jax as pj
from ppage_jax.config import ConfigError
from ppage_jax.config.schema import OBSERVATION_READINGS
from ppage_jax.observations import observation_builders
from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import ippo
from ppage_jax.train.kit.encoders import (
    Encoder,
    SetInput,
    compact,
    input_spec,
    patches3x3,
    prepare,
    window,
)

OBSERVATIONS = {"set": "local_radius", "cnn": "grid"}


def small_env(observation: str, **params):
    return pj.make(
        pj.load_config("default", {"observations.type": observation, "observations.params": params})
    )


@pytest.mark.parametrize(
    "observation, network",
    [
        ("grid", "cnn"),
        ("local_radius", "set"),
        ("absolute", "set"),
        ("relative", "set"),
        ("local_only", "mlp"),
        ("default", "mlp"),
    ],
)
def test_the_default_encoder_follows_the_observation(observation, network):
    env = small_env(observation)
    spec = input_spec(env, None, 0.1)
    assert spec.network == network
    assert spec.obs_size == env.observation_size
    if network == "cnn":
        assert spec.shape == (7, 7, 5) == env.observation_shape
    if network == "set":  # 3 + 3 agents, 20 obstacles; everything else is the header
        widths = {"local_radius": (6, 4), "absolute": (7, 3), "relative": (7, 3)}[observation]
        counts = (6, 20) if observation == "local_radius" else (5, 20)
        assert [(g.width, g.count) for g in spec.groups] == list(zip(widths, counts, strict=True))
        header = {"local_radius": 4, "absolute": 7, "relative": 11}[observation]
        assert spec.header.size == header


def test_an_encoder_that_cannot_read_the_observation_is_refused():
    with pytest.raises(
        ConfigError,
        match=r"params.network = 'set': set needs a slot "
        r"observation; the observation 'local_only' is flat",
    ):
        tiny_config("ippo", {"network": "set"})
    with pytest.raises(ConfigError, match="cnn needs a spatial observation"):
        tiny_config("mappo", {"network": "cnn"}, **{"observations.type": "local_radius"})
    with pytest.raises(ConfigError, match=r"must be a string one of \['mlp', 'cnn', 'set'\]"):
        tiny_config("ippo", {"network": "gnn"})
    with pytest.raises(ValueError, match="set needs a slot observation"):
        input_spec(small_env("grid"), "set")


def test_the_config_check_agrees_with_what_the_builders_declare():
    """The config-time check reads each registration's ``reads_as``; every registered builder
    declares the matching metadata (a shape when spatial, slots when read as slots)."""
    for name in observation_builders():
        built = small_env(name).observation
        assert (OBSERVATION_READINGS[name] == "spatial") == (built.shape is not None), name
        assert (OBSERVATION_READINGS[name] == "slots") == (built.slots is not None), name
    assert OBSERVATION_READINGS["grid"] == "spatial" and OBSERVATION_READINGS["relative"] == "slots"


@pytest.mark.parametrize(
    "observation, channels",
    [("local_radius", (0, 1, 2, 3, 4)), ("absolute", (0, 1, 2, 3, 4)), ("relative", (0, 1, 2, 3))],
)
@pytest.mark.slow  # compiles each builder's window
def test_the_set_window_is_the_grid_view_rebuilt_from_the_slots(observation, channels):
    """Summing the slots at their offsets gives back the egocentric grid observation (within
    the view radius): others (present, prey, captured), obstacles and the grid's edge."""
    env = small_env(observation)
    obs, state = env.reset(jax.random.PRNGKey(3))
    spec = input_spec(env, "set", 0.1)
    r = spec.radius
    assert r == (3 if observation == "local_radius" else 9)
    win = np.asarray(window(spec, obs * 0.1))
    assert win.shape == (6, 2 * r + 1, 2 * r + 1, len(channels)) == (6, *spec.window_shape)
    grid = np.asarray(small_env("grid", radius=r).observe(state)).reshape(win.shape[:3] + (5,))
    me = np.zeros(win.shape[:3])
    me[:, r, r] = 1.0  # the grid view counts the observer itself
    is_prey = ~np.asarray(env.is_predator)[:, None, None]
    expected = {
        0: grid[..., 2:].sum(-1) - me,  # other agents
        1: grid[..., 3] + grid[..., 4] - me * is_prey,  # prey
        2: grid[..., 4],  # captured prey (nobody is captured at the start)
        3: grid[..., 1],  # obstacles
        4: grid[..., 0],  # off the grid
    }
    u, v = np.mgrid[-r : r + 1, -r : r + 1]
    seen = (abs(u) + abs(v) <= r) if observation == "local_radius" else np.ones_like(u, bool)
    for c in channels:
        np.testing.assert_allclose(
            win[..., c] * seen, expected[c] * seen, atol=1e-5, err_msg=f"channel {c}"
        )
    assert win[..., 3].sum() > 10  # many obstacles in view


@pytest.fixture(scope="module")
def set_encoder():
    env = small_env("local_radius")
    spec = input_spec(env, "set", 0.1)
    encoder = Encoder(spec, width=16)
    obs = env.observe(env.reset(jax.random.PRNGKey(3))[1]) * 0.1
    x = jnp.concatenate([obs, jnp.eye(6)], axis=-1)  # agent ids after the obs
    params = encoder.init(jax.random.PRNGKey(0), x)
    return spec, jax.jit(encoder.apply), params, np.asarray(x)


def permute_slots(x, group, order):
    x = x.copy()
    block = x[..., group.start : group.stop].reshape(x.shape[:-1] + (group.count, group.width))
    x[..., group.start : group.stop] = block[..., order, :].reshape(x.shape[:-1] + (-1,))
    return x


def test_the_set_encoder_is_invariant_to_the_order_of_the_slots(set_encoder):
    spec, apply, params, x = set_encoder
    agents, obstacles = spec.groups
    assert (x[:, obstacles.start : obstacles.stop : 4] > 0).sum() > 10  # many obstacles seen
    out = np.asarray(apply(params, x))
    assert out.shape == (6, 4 + 6 + 4 * 4 * 16)  # header, ids, 7x7 -> stride 2 -> 4x4x16
    rng = np.random.RandomState(0)
    shuffled = permute_slots(
        permute_slots(x, agents, rng.permutation(agents.count)),
        obstacles,
        rng.permutation(obstacles.count),
    )
    assert not np.array_equal(shuffled, x)
    np.testing.assert_allclose(np.asarray(apply(params, shuffled)), out, rtol=1e-6, atol=1e-6)
    # ... but not to moving an obstacle one cell: the encoder does read the slots
    moved = x.copy()
    seen = np.flatnonzero(x[0, obstacles.start : obstacles.stop : 4] > 0)[0]
    moved[0, obstacles.start + 4 * seen + 1] += 0.1
    assert not np.allclose(np.asarray(apply(params, moved))[0], out[0])


def test_slots_that_are_not_present_are_ignored(set_encoder):
    spec, apply, params, x = set_encoder
    agents, obstacles = spec.groups
    absent = np.flatnonzero(x[0, obstacles.start : obstacles.stop : 4] == 0)
    assert absent.size > 0 and x[0, agents.start] == 0  # own slot is absent too
    garbage = x.copy()
    for slot in absent:
        first = obstacles.start + 4 * slot
        garbage[0, first + 1 : first + 4] = [5.0, -7.0, 3.0]
    garbage[0, agents.start + 1 : agents.start + 6] = 9.0
    np.testing.assert_array_equal(np.asarray(apply(params, garbage)), np.asarray(apply(params, x)))


def test_patches3x3_are_the_zero_padded_neighbourhoods_at_the_stride():
    image = np.arange(2 * 5 * 6 * 2, dtype=np.float32).reshape(2, 5, 6, 2) + 1
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)])
    for stride in (1, 2, 3):
        got = np.asarray(patches3x3(jnp.asarray(image), stride))
        rows, cols = range(0, 5, stride), range(0, 6, stride)
        assert got.shape == (2, len(rows), len(cols), 18)
        for p, y in enumerate(rows):
            for q, x in enumerate(cols):  # tap (i, j) in channels (3i + j) * 2 ...
                want = padded[:, y : y + 3, x : x + 3, :].reshape(2, 18)
                np.testing.assert_array_equal(got[:, p, q], want)
    corner = np.asarray(patches3x3(jnp.asarray(image), 2))[0, 0, 0].reshape(3, 3, 2)
    assert not corner[0].any() and not corner[:, 0].any()  # beyond the edge: zero


def test_a_prepared_set_input_is_exact_and_gives_the_same_outputs(set_encoder):
    """The rollout stores what ``prepare`` builds (side features, uint8 patch counts); the
    encoder reads it to the same bits as the raw input."""
    spec, apply, params, x = set_encoder
    agents = spec.groups[0]
    x = x.copy()  # an agent that sees another sees it twice in one cell (its slot copied)
    blocks = x[:, agents.start : agents.stop].reshape(len(x), agents.count, agents.width)
    row = np.flatnonzero((blocks[..., 0] > 0).any(-1))[0]
    seen, free = np.flatnonzero(blocks[row, :, 0] > 0)[0], np.flatnonzero(blocks[row, :, 0] == 0)[0]
    blocks[row, free] = blocks[row, seen]
    x[:, agents.start : agents.stop] = blocks.reshape(len(x), -1)
    built = jax.jit(lambda x: prepare(spec, x))(x)
    inp = jax.jit(lambda x: compact(spec, prepare(spec, x)))(x)
    assert isinstance(inp, SetInput) and inp.patches.dtype == jnp.uint8 == spec.patch_dtype
    assert built.patches.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(built.patches), np.asarray(inp.patches, np.float32))
    np.testing.assert_array_equal(np.asarray(apply(params, built)), np.asarray(apply(params, x)))
    assert inp.patches.shape == (6, 4, 4, 9 * 5) and inp.side.shape == (6, 4 + 6)
    # the seen agent's cell counts 2 in the window and in the patch tap that covers it
    dx, dy = np.rint(blocks[row, seen, [agents.x, agents.y]] / spec.scale).astype(int)
    cy, cx = spec.radius + dy, spec.radius + dx
    win = np.asarray(window(spec, jnp.asarray(x[:, : spec.obs_size])))
    assert win[row, cy, cx, 0] == 2 and win[row, ..., 0].max() == 2
    tap = 3 * (cy - 2 * (cy // 2) + 1) + (cx - 2 * (cx // 2) + 1)  # at position (cy//2, cx//2)
    assert inp.patches[row, cy // 2, cx // 2, 5 * tap] == 2  # 5 channels per tap, channel 0
    np.testing.assert_array_equal(np.asarray(apply(params, inp)), np.asarray(apply(params, x)))
    flat = input_spec(small_env("local_only"), None)
    assert prepare(flat, x) is x and compact(flat, x) is x  # nothing to prepare


def test_the_conv_torso_sees_where_things_are():
    env = small_env("grid")
    spec = input_spec(env, None)
    encoder = Encoder(spec, width=8)
    obs = np.asarray(env.observe(env.reset(jax.random.PRNGKey(0))[1]))
    params = encoder.init(jax.random.PRNGKey(1), obs)
    out = np.asarray(jax.jit(encoder.apply)(params, obs))
    assert out.shape == (6, 4 * 4 * 8)  # 7x7 -> stride 2 -> 4x4, 8 channels
    flipped = obs.reshape(6, 7, 7, 5)[:, ::-1].reshape(6, -1)  # the same cells, mirrored
    assert not np.allclose(np.asarray(encoder.apply(params, flipped)), out)


def test_vmap_over_parameter_sets_equals_separate_applies(set_encoder):
    spec, apply, params, x = set_encoder
    stacked = jax.vmap(Encoder(spec, width=16).init, in_axes=(0, None))(seeds(3), x)
    together = jax.vmap(apply, in_axes=(0, None))(stacked, x)
    for i in range(3):
        alone = apply(jax.tree.map(lambda a, i=i: a[i], stacked), x)
        np.testing.assert_allclose(np.asarray(together[i]), np.asarray(alone), rtol=1e-6, atol=1e-6)


# The conv torso's run is slow; its reading of space is pinned above, on every run.
@pytest.fixture(scope="module", params=["set", pytest.param("cnn", marks=pytest.mark.slow)])
def trained(request):
    network = request.param
    tc = make_train_config(
        tiny_config(
            "ippo",
            {"num_steps": 16, "learning_rate": 3e-3, "network": network},
            total_timesteps=8_000,
            **{"observations.type": OBSERVATIONS[network], "observations.params": {}},
        )
    )
    return tc, train_seeds(tc)


@pytest.mark.slow  # trains each encoder
def test_each_encoder_learns_the_tiny_task(trained):
    tc, (runner, metrics) = trained
    params = ippo.policy_state(runner)["predator"]["params"]
    assert set(params) == {
        "encoder",
        "actor_0",
        "actor_1",
        "actor_out",
        "critic_0",
        "critic_1",
        "critic_out",
    }  # one encoder for both heads
    assert_learned(tc, ippo.policy_state(runner), metrics)
