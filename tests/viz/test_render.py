"""Renderer: exact colours at the cells of a hand-built layout, jit, vmap, episodes, GIFs."""

import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.viz.frames import COLOURS, frame_shape, render, render_episode, write_gif

C = 32  # default cell size in pixels


def px(cell_x, cell_y, local_x, local_y):
    """(row, col) of a pixel at a local offset inside cell (cell_x, cell_y)."""
    return cell_y * C + local_y, cell_x * C + local_x


@pytest.fixture(scope="module")
def env():
    # 5x5, 2 predators vs 3 prey, floor(0.12 * 25) = 3 obstacles.
    return pj.make(
        None,
        {
            "env.size": 5,
            "env.obstacle_percentage": 12.0,
            "agents.predators.count": 2,
            "agents.preys.count": 3,
        },
    )


@pytest.fixture(scope="module")
def layout_state(env):
    positions = [
        [0, 0],
        [3, 1],  # predator_1, predator_2
        [4, 4],
        [1, 3],
        [3, 1],
    ]  # prey_1 free, prey_2 captured, prey_3 captured
    obstacles = [[2, 2], [0, 4], [4, 0]]  # under predator_2
    _, state = jax.jit(env.reset_to)(jnp.asarray(positions), jnp.asarray(obstacles))
    return state.replace(captured=jnp.array([False, False, False, True, True]))


@pytest.fixture(scope="module")
def jit_render(env):
    return jax.jit(lambda s: render(env, s))


def test_exact_colours_of_a_hand_built_layout(env, layout_state, jit_render):
    img = np.asarray(jit_render(layout_state))
    assert img.shape == frame_shape(env) == (5 * C + 1, 5 * C + 1, 3)
    assert img.dtype == np.uint8
    expect = {
        # grid lines, including the closing line on the far edge
        (0, 0): "grid",
        (C, 10): "grid",
        (10, 2 * C): "grid",
        (5 * C, 7): "grid",
        (7, 5 * C): "grid",
        # an empty cell
        px(1, 1, 16, 16): "background",
        px(2, 4, 3, 29): "background",
        # obstacles fill their cell's interior (not the grid lines)
        px(2, 2, 1, 1): "obstacle",
        px(2, 2, 16, 16): "obstacle",
        px(0, 4, 31, 31): "obstacle",
        px(4, 0, 20, 5): "obstacle",
        # predator_1 at (0, 0): disc body, and the "1" glyph (font row 0 = ".#.")
        px(0, 0, 6, 16): "predator",
        px(0, 0, 15, 11): "label",
        px(0, 0, 13, 11): "predator",
        px(0, 0, 2, 2): "background",
        # predator_2 on top of captured prey_3 at (3, 1): "2" glyph (row 0 = "###"), and the
        # captured-prey cross visible in the cell's corners
        px(3, 1, 6, 16): "predator",
        px(3, 1, 13, 11): "label",
        px(3, 1, 18, 11): "label",
        px(3, 1, 2, 2): "captured_mark",
        px(3, 1, 2, 29): "captured_mark",
        px(3, 1, 8, 2): "background",
        # two agents share (3, 1): a badge with "2" in the top-right corner (rows 1-7,
        # columns 26-30; glyph row 0 "###" at row 2, row 1 "..#" at row 3)
        px(3, 1, 26, 1): "stack_badge",
        px(3, 1, 30, 7): "stack_badge",
        px(3, 1, 27, 2): "stack_count",
        px(3, 1, 29, 2): "stack_count",
        px(3, 1, 27, 3): "stack_badge",
        px(3, 1, 29, 3): "stack_count",
        px(0, 0, 28, 3): "background",  # a lone agent has no badge
        # prey_1 free at (4, 4): green disc and a white "1"
        px(4, 4, 6, 16): "prey",
        px(4, 4, 15, 11): "label",
        px(4, 4, 13, 11): "prey",
        # prey_2 captured at (1, 3): pale disc, dark "2", corner cross
        px(1, 3, 6, 16): "captured_prey",
        px(1, 3, 13, 11): "captured_label",
        px(1, 3, 2, 2): "captured_mark",
        px(1, 3, 29, 29): "captured_mark",
        px(1, 3, 8, 2): "background",
    }
    for (row, col), name in expect.items():
        assert tuple(img[row, col]) == COLOURS[name], (row, col, name, img[row, col])
    # the "2" of prey_2: font row 1 is "..#" (only the right column is inked)
    assert tuple(img[px(1, 3, 13, 13)]) == COLOURS["captured_prey"]
    assert tuple(img[px(1, 3, 17, 13)]) == COLOURS["captured_label"]
    # every pixel has one of the palette's colours
    palette = {tuple(c) for c in COLOURS.values()}
    assert {tuple(c) for c in img.reshape(-1, 3)} <= palette
    # counts of whole elements: 3 obstacle cells of 31x31 interior pixels
    assert (img == COLOURS["obstacle"]).all(-1).sum() == 3 * 31 * 31


def test_same_frame_under_jit(env, layout_state, jit_render):
    np.testing.assert_array_equal(
        np.asarray(jit_render(layout_state)), np.asarray(render(env, layout_state))
    )


def test_vmap_over_states_gives_a_batch_of_frames(env, layout_state, jit_render):
    keys = jax.random.split(jax.random.PRNGKey(7), 3)
    _, states = jax.jit(jax.vmap(env.reset))(keys)
    frames = jax.jit(jax.vmap(lambda s: render(env, s)))(states)
    assert frames.shape == (3,) + frame_shape(env) and frames.dtype == jnp.uint8
    for i in range(3):
        one = jax.tree.map(lambda x: x[i], states)
        np.testing.assert_array_equal(np.asarray(frames[i]), np.asarray(jit_render(one)))
    assert not np.array_equal(np.asarray(frames[0]), np.asarray(frames[1]))


def test_two_digit_labels_and_no_leading_zero():
    env = pj.make(
        None,
        {
            "env.size": 4,
            "env.obstacle_percentage": 0.0,
            "agents.predators.count": 12,
            "agents.preys.count": 1,
        },
    )
    positions = jnp.asarray([[i % 4, i // 4] for i in range(12)] + [[3, 3]])
    _, state = jax.jit(env.reset_to)(positions, jnp.zeros((0, 2), jnp.int32))
    img = np.asarray(jax.jit(lambda s: render(env, s))(state))
    # two 6-pixel glyphs with a 2-pixel gap centred: slots at cols 9..14 and 17..22, rows 11..20
    # predator_12 at (3, 2): "1" (row 0 ".#.") then "2" (row 0 "###")
    assert tuple(img[px(3, 2, 11, 11)]) == COLOURS["label"]
    assert tuple(img[px(3, 2, 9, 11)]) == COLOURS["predator"]
    assert tuple(img[px(3, 2, 17, 11)]) == COLOURS["label"]
    # predator_3 at (2, 0): the leading slot stays blank, the "3" is drawn
    assert not (img[11:21, 2 * C + 9 : 2 * C + 15] == COLOURS["label"]).all(-1).any()
    assert tuple(img[px(2, 0, 17, 11)]) == COLOURS["label"]


def test_render_episode_and_gif(env, jit_render, tmp_path):
    key = jax.random.PRNGKey(3)
    frames = render_episode(env, key, max_steps=12)
    assert frames.dtype == np.uint8 and frames.shape[1:] == frame_shape(env)
    assert 2 <= len(frames) <= 13
    # the first frame is the reset state drawn by render (play_episodes' reset key)
    _, state = jax.jit(env.reset)(jax.random.fold_in(key, 0))
    np.testing.assert_array_equal(frames[0], np.asarray(jit_render(state)))
    path = tmp_path / "episode.gif"
    write_gif(path, frames, fps=5, hold_last=2)
    back = iio.imread(path, index=None)
    changes = sum(not np.array_equal(a, b) for a, b in zip(frames[:-1], frames[1:], strict=False))
    assert back.shape[0] == changes + 1 and back.shape[1:3] == frames.shape[1:3]
    np.testing.assert_array_equal(back[0][..., :3], frames[0])
    np.testing.assert_array_equal(back[-1][..., :3], frames[-1])
    assert iio.immeta(path, index=len(back) - 1)["duration"] == 600


def test_episode_stops_at_the_end():
    # predator next to a prey that cannot move: the first step captures and ends the episode
    env = pj.make(
        None,
        {
            "env.size": 4,
            "env.obstacle_percentage": 0.0,
            "agents.predators.count": 1,
            "agents.preys.count": 1,
            "agents.preys.speed": 1,
            "agents.predators.speed": 1,
            "env.starts": [[0, 0], [1, 0]],
        },
    )
    right = int(np.flatnonzero((env.action_table == [1, 0]).all(1))[0])
    policy = lambda key, obs, state: jnp.array([right, env.noop_action], jnp.int32)
    frames = render_episode(env, jax.random.PRNGKey(0), policy=policy, max_steps=20)
    assert len(frames) == 2
    assert tuple(frames[1][px(1, 0, 6, 16)]) == COLOURS["predator"]
    assert tuple(frames[1][px(1, 0, 2, 2)]) == COLOURS["captured_mark"]
    assert tuple(frames[1][px(0, 0, 6, 16)]) == COLOURS["background"]


def test_bad_frames_rejected(tmp_path):
    with pytest.raises(ValueError, match="uint8"):
        write_gif(tmp_path / "x.gif", np.zeros((3, 4, 4), np.uint8))
