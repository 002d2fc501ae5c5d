"""Observation builders: exact vectors, sizes, slot identity, oracle agreement, errors.

Hand-built layout (size 5, y down), used by the exact-vector tests:

    predator_1 (0,0) corner, prey_1 (1,0) captured (next to it), prey_2 (4,4) free;
    obstacles (2,1) and (0,3). Default speeds: predators 1, prey 3.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.config import ConfigError
from ppage_jax.observations import builder_params, make_observation, slot_order
from ppage_jax.oracle.observations import reference_global_state, reference_observation
from ppage_jax.state import Layout

POSITIONS = [[0, 0], [1, 0], [4, 4]]
OBSTACLES = [[2, 1], [0, 3]]
CAPTURED = [False, True, False]


def make_env(
    builder: str,
    params: dict | None = None,
    per_agent: dict | None = None,
    *,
    n_predators: int = 1,
    n_prey: int = 2,
    size: int = 5,
    pct: float = 8.0,
):
    return pj.make(
        None,
        overrides={
            "env.size": size,
            "env.obstacle_percentage": pct,
            "agents.predators.count": n_predators,
            "agents.preys.count": n_prey,
            "observations.type": builder,
            "observations.params": params or {},
            "observations.per_agent": per_agent,
        },
    )


def hand_built(builder: str, params: dict | None = None, per_agent: dict | None = None):
    env = make_env(builder, params, per_agent)
    _, state = env.reset_to(jnp.array(POSITIONS), jnp.array(OBSTACLES))
    state = state.replace(captured=jnp.array(CAPTURED))
    obs = env.observe(state)
    assert obs.dtype == jnp.float32 and obs.shape == (3, env.observation_size)
    expected_oracle = reference_observation(
        builder,
        params,
        POSITIONS,
        OBSTACLES,
        CAPTURED,
        env.is_predator,
        5,
        speeds=np.asarray(env.default_params.speeds),
        per_agent=per_agent,
    )
    np.testing.assert_allclose(obs, expected_oracle, rtol=1e-6)
    return env, np.asarray(obs)


# ----------------------------------------------------------------------------- exact vectors
def test_local_only_exact():
    _, obs = hand_built("local_only")
    assert obs.tolist() == [[0, 0, 0], [1, 0, 1], [4, 4, 0]]


def test_default_exact():
    # [x, y, captured] + [int(euclid), captured] per other agent + int(euclid) per obstacle
    _, obs = hand_built("default")
    assert obs.tolist() == [
        [0, 0, 0, 1, 1, 5, 0, 2, 3],  # prey_1 at 1 (captured), prey_2 int(sqrt 32)=5
        [1, 0, 1, 1, 0, 5, 0, 1, 3],
        [4, 4, 0, 5, 0, 5, 1, 3, 4],
    ]


def test_local_radius_exact_corner_captured_neighbour_and_nobody_seen():
    env, obs = hand_built("local_radius", {"radius": 3})
    assert env.observation_size == 4 + 6 * 3 + 4 * 2
    zeros6, zeros4 = [0] * 6, [0] * 4
    assert obs[0].tolist() == (
        [0, 0, 3, 0] + zeros6 + [1, 1, 0, 1, 1, 1] + zeros6 + [1, 2, 1, 3] + [1, 0, 3, 3]
    )
    assert obs[1].tolist() == (
        [1, 0, 3, 1] + [1, -1, 0, 1, 0, 0] + zeros6 + zeros6 + [1, 1, 1, 2] + zeros4
    )
    # prey_2 in the far corner sees nobody within Manhattan 3: all slots zero
    assert obs[2].tolist() == [4, 4, 3, 0] + [0] * 26


def test_local_radius_include_flags_keep_zero_blocks():
    _, obs = hand_built(
        "local_radius", {"radius": 3, "include_agents": False, "include_obstacles": False}
    )
    assert obs[:, 4:].tolist() == [[0] * 26] * 3
    assert obs[:, :4].tolist() == [[0, 0, 3, 0], [1, 0, 3, 1], [4, 4, 3, 0]]


def test_absolute_exact():
    # own [x, y, type, team_base, team_idx, speed, captured]; other [x, y, dist, type,
    # team_base, team_idx, captured]; obstacle [x, y, dist]; Euclidean distances
    _, obs = hand_built("absolute")
    s = math.sqrt
    expected = [
        [0, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 4, 4, s(32), 1, 1, 2, 0, 2, 1, s(5), 0, 3, 3],
        [1, 0, 1, 1, 1, 3, 1, 0, 0, 1, 0, 0, 1, 0, 4, 4, 5, 1, 1, 2, 0, 2, 1, s(2), 0, 3, s(10)],
        [
            4,
            4,
            1,
            1,
            2,
            3,
            0,
            0,
            0,
            s(32),
            0,
            0,
            1,
            0,
            1,
            0,
            5,
            1,
            1,
            1,
            1,
            2,
            1,
            s(13),
            0,
            3,
            s(17),
        ],
    ]
    np.testing.assert_allclose(obs, expected, rtol=1e-6)


def test_relative_exact_with_walls():
    # like absolute with offsets (other - self), own position 0, Manhattan, then walls
    # [left x, right size-1-x, up y, down size-1-y]
    _, obs = hand_built("relative", {"include_walls": True})
    assert obs.tolist() == [
        [
            0,
            0,
            0,
            0,
            1,
            1,
            0,
            1,
            0,
            1,
            1,
            1,
            1,
            1,
            4,
            4,
            8,
            1,
            1,
            2,
            0,
            2,
            1,
            3,
            0,
            3,
            3,
            0,
            4,
            0,
            4,
        ],
        [
            0,
            0,
            1,
            1,
            1,
            3,
            1,
            -1,
            0,
            1,
            0,
            0,
            1,
            0,
            3,
            4,
            7,
            1,
            1,
            2,
            0,
            1,
            1,
            2,
            -1,
            3,
            4,
            1,
            3,
            0,
            4,
        ],
        [
            0,
            0,
            1,
            1,
            2,
            3,
            0,
            -4,
            -4,
            8,
            0,
            0,
            1,
            0,
            -3,
            -4,
            7,
            1,
            1,
            1,
            1,
            -2,
            -3,
            5,
            -4,
            -1,
            5,
            4,
            0,
            4,
            0,
        ],
    ]
    _, no_walls = hand_built("relative")
    assert no_walls[:, -4:].tolist() == [[0] * 4] * 3
    np.testing.assert_array_equal(no_walls[:, :-4], obs[:, :-4])


def test_grid_exact_corner_window():
    env, obs = hand_built("grid", {"radius": 1})
    assert env.observation_shape == (3, 3, 5) and env.observation_size == 45
    pred = obs[0].reshape(3, 3, 5)
    expected = np.zeros((3, 3, 5))
    expected[0, :, 0] = 1  # row y = -1 is outside
    expected[:, 0, 0] = 1  # column x = -1 is outside
    expected[1, 1, 2] = 1  # the predator itself at the centre
    expected[1, 2, 4] = 1  # captured prey_1 to the right (x + 1)
    np.testing.assert_array_equal(pred, expected)
    far = obs[2].reshape(3, 3, 5)
    expected = np.zeros((3, 3, 5))
    expected[2, :, 0] = 1
    expected[:, 2, 0] = 1
    expected[1, 1, 3] = 1  # free prey_2 itself; nobody else in view
    np.testing.assert_array_equal(far, expected)
    captured = obs[1].reshape(3, 3, 5)
    assert captured[1, 0, 2] == 1 and captured[1, 1, 4] == 1 and captured[2, 2, 1] == 1


def test_grid_per_role_radius_pads_to_largest():
    env, obs = hand_built("grid", {"radius": 1}, {"predator": {"radius": 2}})
    assert env.observation_shape == (5, 5, 5)
    prey = obs[2].reshape(5, 5, 5)
    ring = np.ones((5, 5), bool)
    ring[1:4, 1:4] = False
    assert (prey[ring] == 0).all()  # beyond its radius: zero, not "outside"
    assert prey[3, :, 0].tolist() == [0, 1, 1, 1, 0]  # y = 5 inside its own radius 1
    assert prey[1:4, 3, 0].tolist() == [1, 1, 1]  # x = 5
    pred = obs[0].reshape(5, 5, 5)
    assert pred[:2, :, 0].tolist() == [[1] * 5] * 2 and pred[:, :2, 0].all()
    assert pred[3, 4, 1] == 1 and pred[2, 3, 4] == 1  # obstacle (2,1); captured prey (1,0)
    assert pred[:, :, 1].sum() == 1  # obstacle (0,3) is 3 rows down


def test_local_radius_per_role_radius():
    env, obs = hand_built("local_radius", {"radius": 3}, {"prey": {"radius": 7}})
    assert env.observation_size == 30
    assert obs[:, 2].tolist() == [3, 7, 7]
    assert obs[1, 4 + 12] == 1 and obs[1, 4 + 12 : 4 + 18].tolist() == [1, 3, 4, 7, 1, 0]
    assert obs[2, 4 + 6 : 4 + 12].tolist() == [1, -3, -4, 7, 1, 1]  # sees captured prey_1


def test_global_state_exact():
    env = make_env("local_only")
    _, state = env.reset_to(jnp.array(POSITIONS), jnp.array(OBSTACLES))
    state = state.replace(captured=jnp.array(CAPTURED))
    g = np.asarray(env.global_state(state))
    assert g.shape == (env.global_state_size,) == (4 * 3 + 25,)
    assert g[:12].tolist() == [0, 0, 1, 0, 1, 0, 0, 1, 4, 4, 0, 0]
    assert np.flatnonzero(g[12:]).tolist() == [1 * 5 + 2, 3 * 5 + 0]
    np.testing.assert_array_equal(
        g, reference_global_state(POSITIONS, OBSTACLES, CAPTURED, env.is_predator, 5)
    )


# ----------------------------------------------------------------------------- sizes
SIZE_FORMULAS = {
    "local_only": lambda n, o: 3,
    "default": lambda n, o: 3 + 2 * (n - 1) + o,
    "local_radius": lambda n, o: 4 + 6 * n + 4 * o,
    "absolute": lambda n, o: 7 * n + 3 * o,
    "relative": lambda n, o: 7 * n + 3 * o + 4,
    "grid": lambda n, o: 7 * 7 * 5,
}


@pytest.mark.parametrize("n_pred,n_prey,n_obs", [(1, 1, 0), (3, 3, 20), (1, 1, 20), (12, 4, 7)])
def test_sizes(n_pred, n_prey, n_obs):
    layout = Layout(
        size=10,
        n_predators=n_pred,
        n_prey=n_prey,
        num_obstacles=n_obs,
        max_speed=1,
        allow_cell_sharing=True,
        block_agents_by_obstacles=True,
    )
    for name, formula in SIZE_FORMULAS.items():
        assert make_observation(name, layout).size == formula(n_pred + n_prey, n_obs), name


def test_shipped_configs_use_local_radius():
    env = pj.make("configs/default")  # 3v3, 10x10, 20 % -> 20 obstacles
    assert env.spec.observation_type == "local_radius"
    assert env.observation_size == 4 + 6 * 6 + 4 * 20 == 120
    assert pj.make(None).observation_size == 120
    assert builder_params("local_radius") == {  # package default params {} -> PPAGE's
        "radius": 3,
        "include_agents": True,
        "include_obstacles": True,
    }
    one = pj.make("configs/1v1")
    assert one.spec.observation_kwargs["radius"] == 8
    assert one.observation_size == 4 + 6 * 2 + 4 * 20 == 96
    assert env.observation_shape is None


# ----------------------------------------------------------------------------- slot order
def test_slot_order_sorts_names_as_strings():
    layout = Layout(
        size=8,
        n_predators=11,
        n_prey=2,
        num_obstacles=0,
        max_speed=1,
        allow_cell_sharing=True,
        block_agents_by_obstacles=True,
    )
    names = [layout.agent_names[i] for i in slot_order(layout)]
    assert names[:4] == ["predator_1", "predator_10", "predator_11", "predator_2"]
    assert names[-2:] == ["prey_1", "prey_2"]


def test_slot_identity_moving_in_and_out_of_view():
    env = make_env("local_radius", {"radius": 2}, n_predators=11, n_prey=2, size=9, pct=0.0)
    observe = jax.jit(
        lambda pos, cap: env.observe(env.reset_to(pos, jnp.zeros((0, 2)))[1].replace(captured=cap))
    )
    base = np.array([[8, 8]] * 11 + [[0, 0], [8, 0]])
    base[4] = [4, 4]  # observer: predator_5 (row 4)
    captured = jnp.array([False] * 12 + [True])
    out_view = np.asarray(observe(jnp.array(base), captured))
    moved = base.copy()
    moved[9] = [5, 5]  # predator_10 (row 9, slot rank 1) steps into view
    in_view = np.asarray(observe(jnp.array(moved), captured))
    slot = 4 + 6 * 1
    changed = np.flatnonzero(out_view[4] != in_view[4])
    assert changed.min() >= slot and changed.max() < slot + 6
    assert out_view[4, slot] == 0 and in_view[4, slot] == 1
    assert in_view[4, slot : slot + 6].tolist() == [1, 1, 1, 2, 0, 0]
    # the captured prey_2 (slot rank 12) at (8, 0) enters view: its captured flag shows
    moved[12] = [4, 2]
    seen = np.asarray(observe(jnp.array(moved), captured))
    assert seen[4, 4 + 6 * 12 : 4 + 6 * 13].tolist() == [1, 0, -2, 2, 1, 1]
    assert seen[4, 4 + 6 * 4 : 4 + 6 * 5].tolist() == [0] * 6  # own slot (rank 4) stays zero


# ----------------------------------------------------------------------------- oracle
ORACLE_CASES = [
    ("default", {}, None),
    ("local_only", {}, None),
    ("local_radius", {"radius": 3}, None),
    ("local_radius", {"radius": 2, "include_obstacles": False}, None),
    ("local_radius", {"radius": 3}, {"predator": {"radius": 4}, "prey": {"radius": 1}}),
    ("absolute", {}, None),
    ("absolute", {"distance_type": "manhattan", "include_agents": False}, None),
    ("relative", {}, None),
    (
        "relative",
        {"include_walls": True, "distance_type": "euclidean", "include_obstacles": False},
        None,
    ),
    ("grid", {"radius": 2}, None),
    ("grid", {"radius": 1}, {"prey": {"radius": 3}}),
]
ORACLE_LAYOUTS = [(11, 2, 8, 10.0), (1, 1, 6, 0.0)]  # predators, prey, size, obstacle %
BATCH = 24


def random_states(env, rng, batch):
    size, n, k = env.layout.size, env.num_agents, env.layout.num_obstacles
    positions, obstacles, captured, speeds = [], [], [], []
    for _ in range(batch):
        cells = rng.permutation(size * size)[: n + k]
        xy = np.stack([cells % size, cells // size], axis=1)
        pos = xy[:n].copy()
        stacked = rng.random(n) < 0.3  # some agents share a cell
        pos[stacked] = pos[rng.integers(0, n, stacked.sum())]
        positions.append(pos)
        obstacles.append(xy[n:])
        captured.append(~env.is_predator & (rng.random(n) < 0.5))
        speeds.append(rng.integers(1, 4, n))
    return [np.asarray(a) for a in (positions, obstacles, captured, speeds)]


@pytest.mark.parametrize("layout", ORACLE_LAYOUTS, ids=lambda lay: f"{lay[0]}v{lay[1]}")
@pytest.mark.parametrize(
    "name,params,per_agent", ORACLE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(ORACLE_CASES)]
)
def test_jit_vmap_matches_oracle(layout, name, params, per_agent):
    n_pred, n_prey, size, pct = layout
    env = make_env(name, params, per_agent, n_predators=n_pred, n_prey=n_prey, size=size, pct=pct)

    @jax.jit
    @jax.vmap
    def observe(pos, obstacles, captured, speeds):
        params_ = env.default_params.replace(speeds=speeds)
        _, state = env.reset_to(pos, obstacles, params_)
        return env.observe(state.replace(captured=captured), params_)

    rng = np.random.default_rng(hash((name, str(params), layout)) % 2**32)
    positions, obstacles, captured, speeds = random_states(env, rng, BATCH)
    obs = np.asarray(observe(positions, obstacles, captured, speeds))
    assert obs.shape == (BATCH, env.num_agents, env.observation_size)
    for b in range(BATCH):
        expected = reference_observation(
            name,
            params,
            positions[b],
            obstacles[b],
            captured[b],
            env.is_predator,
            size,
            speeds[b],
            per_agent,
        )
        np.testing.assert_allclose(obs[b], expected, rtol=1e-6, atol=0)


def test_global_state_vmap_matches_oracle():
    env = make_env("local_only", n_predators=11, n_prey=2, size=8, pct=10.0)
    rng = np.random.default_rng(3)
    positions, obstacles, captured, _ = random_states(env, rng, 8)
    fn = jax.jit(
        jax.vmap(lambda p, o, c: env.global_state(env.reset_to(p, o)[1].replace(captured=c)))
    )
    got = np.asarray(fn(positions, obstacles, captured))
    for b in range(8):
        np.testing.assert_array_equal(
            got[b],
            reference_global_state(positions[b], obstacles[b], captured[b], env.is_predator, 8),
        )


# ----------------------------------------------------------------------------- errors
def test_unknown_builder():
    with pytest.raises(ConfigError) as err:
        pj.load_config(None, {"observations.type": "egocentric"})
    assert err.value.key == "observations.type" and "local_radius" in err.value.allowed
    with pytest.raises(KeyError, match="known"):
        make_observation("egocentric", pj.make(None).layout)


@pytest.mark.parametrize("radius", [-1, 2.5, True, "3"])
def test_bad_radius(radius):
    with pytest.raises(ConfigError) as err:
        pj.load_config(None, {"observations.params": {"radius": radius}})
    assert err.value.key == "observations.params.radius" and err.value.value == radius
    assert ">= 0" in err.value.allowed or "integer" in err.value.allowed


def test_bad_radius_in_file_names_the_file(tmp_path):
    (tmp_path / "observations.yaml").write_text(
        "observations:\n  type: grid\n  params: {radius: -2}\n"
    )
    with pytest.raises(ConfigError) as err:
        pj.load_config(tmp_path)
    assert err.value.source.endswith("observations.yaml")
    assert "observations.params.radius = -2" in str(err.value)


def test_unknown_param():
    with pytest.raises(ConfigError) as err:
        pj.load_config(None, {"observations.params": {"radius": 3, "fov": 90}})
    assert err.value.key == "observations.params.fov"
    assert "include_agents" in err.value.allowed and "radius" in err.value.allowed
    with pytest.raises(ConfigError, match="distance_type"):
        pj.load_config(
            None,
            {
                "observations.type": "absolute",
                "observations.params": {"distance_type": "chebyshev"},
            },
        )
    with pytest.raises(ValueError, match="radius"):
        make_observation("local_radius", pj.make(None).layout, {"radius": -1})


@pytest.mark.parametrize(
    "per_agent,key",
    [
        ({"wolf": {"radius": 2}}, "observations.per_agent.wolf"),
        ({"prey": {"radius": -1}}, "observations.per_agent.prey.radius"),
        ({"prey": {"radius": 1.5}}, "observations.per_agent.prey.radius"),
        ({"prey": {"include_agents": False}}, "observations.per_agent.prey.include_agents"),
        ({"prey": 2}, "observations.per_agent.prey"),
    ],
)
def test_bad_per_agent(per_agent, key):
    with pytest.raises(ConfigError) as err:
        pj.load_config(None, {"observations.per_agent": per_agent})
    assert err.value.key == key


def test_per_agent_rejected_for_builder_without_radius(tmp_path):
    (tmp_path / "observations.yaml").write_text(
        "observations:\n  type: absolute\n  params: {}\n  per_agent: {predator: {radius: 4}}\n"
    )
    with pytest.raises(ConfigError) as err:
        pj.load_config(tmp_path)
    assert err.value.key == "observations.per_agent"
    assert err.value.source.endswith("observations.yaml") and "grid" in err.value.allowed
