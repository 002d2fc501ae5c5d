"""What a builder declares with itself: every registered builder has value bounds, a
consistent spatial shape or slot layout, and a NumPy mirror with the same params; and a
builder registered in one place gets bounded adapter spaces and the set and mlp encoders."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.compat.bounds import observation_bounds
from ppage_jax.config import schema
from ppage_jax.observations import (
    Bounds,
    ObservationBuilder,
    SlotGroup,
    Slots,
    builder_params,
    make_observation,
    observation_builders,
    register_observation,
    registry,
)
from ppage_jax.oracle import observations as oracle
from ppage_jax.oracle.observations import (
    mirror,
    mirror_params,
    mirrored_builders,
    reference_observation,
)
from ppage_jax.state import EnvParams, Layout, State
from ppage_jax.train.kit.encoders import Encoder, input_spec, window

LAYOUT = Layout(
    size=6,
    n_predators=2,
    n_prey=3,
    num_obstacles=4,
    max_speed=2,
    allow_cell_sharing=True,
    block_agents_by_obstacles=True,
)


def test_every_shipped_builder_is_registered_with_its_mirror():
    assert set(observation_builders()) == set(mirrored_builders())
    for name in observation_builders():
        assert builder_params(name) == mirror_params(name), name


@pytest.mark.parametrize("name", observation_builders())
def test_every_builder_declares_bounds_and_how_encoders_read_it(name):
    built = make_observation(name, LAYOUT)
    low, high = (np.broadcast_to(b, (5, built.size)) for b in built.bounds())
    assert np.isfinite(low).all() and np.isfinite(high).all() and (low <= high).all()
    if built.shape is not None:
        assert built.slots is None and int(np.prod(built.shape)) == built.size
    if built.slots is not None:
        taken = np.zeros(built.size, int)
        for group in built.slots.groups:
            assert max(group.present or 0, group.x, group.y, *group.channels) < group.width
            taken[group.start : group.stop] += 1
            for c in group.channels:  # 0/1 flags: the set encoder stores their sums as uint8
                if c >= 0:
                    feature = np.arange(group.start + c, group.stop, group.width)
                    assert (low[:, feature] >= 0).all() and (high[:, feature] <= 1).all()
        assert taken.max() == 1  # the groups do not overlap
        own = built.slots.own
        assert own is None or not taken[list(own)].any()  # own position: outside the slots
        assert 0 <= built.slots.radius <= LAYOUT.size - 1


# ----------------------------------------------------------------------------- a toy builder
@pytest.fixture
def toy(monkeypatch):
    """Registers ``toy_offsets`` (own [x, y], then [1, dx, dy] per other agent in row order)
    and its NumPy mirror for one test; everything it feeds is declared here and nowhere
    else."""
    monkeypatch.setattr(registry, "_BUILDERS", dict(registry._BUILDERS))
    monkeypatch.setattr(oracle, "_MIRRORS", dict(oracle._MIRRORS))
    monkeypatch.setattr(schema, "OBSERVATION_READINGS", dict(schema.OBSERVATION_READINGS))

    @register_observation("toy_offsets", reads_as="slots")
    def toy_offsets(layout: Layout) -> ObservationBuilder:
        n, s1 = layout.num_agents, layout.size - 1
        others = np.array([[j for j in range(n) if j != i] for i in range(n)]).reshape(n, n - 1)

        def build(state: State, params: EnvParams) -> jax.Array:
            delta = state.positions[others] - state.positions[:, None, :]  # [A, A-1, 2]
            slots = jnp.concatenate([jnp.ones_like(delta[..., :1]), delta], -1)
            return jnp.concatenate([state.positions, slots.reshape(n, -1)], 1).astype(float)

        def bounds() -> Bounds:
            low = np.concatenate([[0, 0], np.tile([1, -s1, -s1], n - 1)])
            high = np.concatenate([[s1, s1], np.tile([1, s1, s1], n - 1)])
            return low, high

        slots = Slots((SlotGroup("agents", 2, 3, n - 1, 0, 1, 2, (0,)),), radius=s1, own=(0, 1))
        return ObservationBuilder("toy_offsets", 2 + 3 * (n - 1), build, bounds=bounds, slots=slots)

    @mirror("toy_offsets")
    def toy_offsets_mirror(i, p, positions, obstacles, captured, names, slots, size, *_):
        x, y = positions[i]
        others = [j for j in range(len(positions)) if j != i]
        return [x, y] + [v for j in others for v in (1, positions[j][0] - x, positions[j][1] - y)]

    observations = {"type": "toy_offsets", "params": {}, "per_agent": None}
    return pj.make(
        None,
        {
            "env.size": 5,
            "env.obstacle_percentage": 0.0,
            "agents.predators.count": 2,
            "agents.preys.count": 1,
            "observations": observations,
        },
    )


def test_a_builder_in_one_file_with_its_mirror_is_bounded_encoded_and_mirrored(toy):
    env = toy
    assert "toy_offsets" in observation_builders()
    low, high = observation_bounds(env)  # the always-1 present flags are widened to [0, 1]
    assert low.tolist() == [0, 0, 0, -4, -4, 0, -4, -4]
    assert high.tolist() == [4, 4, 1, 4, 4, 1, 4, 4]
    obs, _ = env.reset_to(jnp.array([[0, 0], [4, 1], [2, 3]]), jnp.zeros((0, 2), jnp.int32))
    obs = np.asarray(obs)
    assert obs[0].tolist() == [0, 0, 1, 4, 1, 1, 2, 3]
    assert ((obs >= low) & (obs <= high)).all()
    assert set(observation_builders()) == set(mirrored_builders())  # with its mirror
    positions = [[0, 0], [4, 1], [2, 3]]
    mirrored = reference_observation("toy_offsets", {}, positions, [], [0, 0, 0], [1, 1, 0], 5)
    assert mirrored.tolist() == obs.tolist()

    spec = input_spec(env, None, 0.5)  # slots declared: the set encoder by default
    assert (spec.network, spec.radius, spec.own, spec.header.tolist()) == ("set", 4, (0, 1), [0, 1])
    win = np.asarray(window(spec, jnp.asarray(obs) * 0.5))
    assert win.shape == (3, 9, 9, 2)  # present, off the grid
    assert win[0, 4 + 1, 4 + 4, 0] == 1 and win[0, 4 + 3, 4 + 2, 0] == 1  # at (dy, dx)
    assert win[0, ..., 0].sum() == 2 and win[0, :4, :, 1].all() and not win[0, 4:, 4:, 1].any()
    x = jnp.concatenate([jnp.asarray(obs) * 0.5, jnp.eye(3)], -1)
    encoder = Encoder(spec, width=4)
    out = encoder.apply(encoder.init(jax.random.PRNGKey(0), x), x)
    assert out.shape == (3, 2 + 3 + 5 * 5 * 4)  # header, ids, 9x9 -> stride 2 -> 5x5x4

    mlp = input_spec(env, "mlp")
    assert (mlp.network, mlp.obs_size) == ("mlp", 8)
    assert Encoder(mlp).apply({}, x) is x
    with pytest.raises(ValueError, match="cnn needs a spatial observation"):
        input_spec(env, "cnn")
    # the config check reads the registration: set loads, cnn is refused before any work
    base = {"observations.type": "toy_offsets", "experiment.algorithm.name": "ippo"}
    pj.load_config("default", {**base, "experiment.algorithm.params.network": "set"})
    with pytest.raises(pj.ConfigError, match="cnn needs a spatial observation"):
        pj.load_config("default", {**base, "experiment.algorithm.params.network": "cnn"})


def test_a_registration_that_contradicts_its_builder_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_BUILDERS", dict(registry._BUILDERS))
    monkeypatch.setattr(schema, "OBSERVATION_READINGS", dict(schema.OBSERVATION_READINGS))

    @register_observation("flat_but_spatial")
    def flat_but_spatial(layout: Layout) -> ObservationBuilder:
        return ObservationBuilder(
            "flat_but_spatial", 4, lambda s, p: jnp.zeros((2, 4)), shape=(2, 2, 1)
        )

    with pytest.raises(TypeError, match="registered reads_as='flat' but its builder declares"):
        registry.make_observation("flat_but_spatial", LAYOUT)
    with pytest.raises(ValueError, match="reads_as must be one of"):
        register_observation("odd", reads_as="graph")
