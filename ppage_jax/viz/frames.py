"""Pictures of the grid: a pure-JAX RGB renderer, episode rollouts to frames, and GIFs.

``render(env, state)`` draws one state as ``uint8[H_px, W_px, 3]`` with array ops over a
static pixel grid, so it runs under ``jit`` and ``vmap`` (a batch of states gives a batch of
frames) and never leaves the device. Each cell is ``cell_px`` pixels with 1-pixel grid lines
on every cell boundary, so ``H_px = W_px = size * cell_px + 1`` and cell ``(x, y)`` covers
rows ``y*cell_px+1 .. (y+1)*cell_px-1`` and columns ``x*cell_px+1 .. (x+1)*cell_px-1``.

Drawing, bottom to top: white background, grid lines, dark obstacles, a cross over the
diagonals of every cell holding a captured prey, then one disc per occupied cell for its
topmost agent (predators above free prey above captured prey; within a role the later row)
with the agent's 1-based index within its role (``predator_2`` shows ``2``) in a 3x5 bitmap
font, and, on a cell holding several agents, a yellow badge with their count in the top-right
corner. Predators are red, free prey green, captured prey pale green with a dark index.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.defaults import DEFAULT_CELL_PX
from ppage_jax.env import GridWorld
from ppage_jax.episodes.play import record_one
from ppage_jax.policies import Policy, random_policy
from ppage_jax.state import EnvParams, State

# RGB colours of every element (tests read these).
COLOURS: dict[str, tuple[int, int, int]] = {
    "background": (255, 255, 255),
    "grid": (170, 170, 170),
    "obstacle": (60, 60, 60),
    "predator": (210, 40, 40),
    "prey": (30, 140, 60),
    "captured_prey": (175, 215, 180),
    "captured_mark": (30, 90, 45),
    "label": (255, 255, 255),
    "captured_label": (20, 20, 20),
    "stack_badge": (255, 215, 64),
    "stack_count": (0, 0, 0),
}

# 3x5 bitmaps of the digits 0-9 (rows top to bottom, "#" = ink).
_DIGIT_ROWS = (
    ("###", "#.#", "#.#", "#.#", "###"),
    (".#.", "##.", ".#.", ".#.", "###"),
    ("###", "..#", "###", "#..", "###"),
    ("###", "..#", "###", "..#", "###"),
    ("#.#", "#.#", "###", "..#", "..#"),
    ("###", "#..", "###", "..#", "###"),
    ("###", "#..", "###", "#.#", "###"),
    ("###", "..#", ".#.", ".#.", ".#."),
    ("###", "#.#", "###", "#.#", "###"),
    ("###", "#.#", "###", "..#", "###"),
)
DIGIT_FONT = np.array(
    [[[c == "#" for c in row] for row in digit] for digit in _DIGIT_ROWS], dtype=bool
)  # bool[10, 5, 3]


def frame_shape(env: GridWorld, cell_px: int = DEFAULT_CELL_PX) -> tuple[int, int, int]:
    """Shape of one rendered frame: (H_px, W_px, 3)."""
    side = env.layout.size * cell_px + 1
    return side, side, 3


def _label_digits(n: int) -> int:
    return len(str(max(n, 1)))


def _cell_stencils(cell_px: int, n_digits: int) -> dict[str, np.ndarray]:
    """Static per-pixel masks and font lookups within one cell (local coords 0..cell_px-1)."""
    local = np.arange(cell_px)
    ly, lx = np.meshgrid(local, local, indexing="ij")
    centre = cell_px / 2.0
    radius = 0.40 * cell_px
    disc = (ly + 0.5 - centre) ** 2 + (lx + 0.5 - centre) ** 2 <= radius**2
    thickness = max(1, cell_px // 12)
    cross = (np.abs(ly - lx) < thickness) | (np.abs(ly + lx - (cell_px - 1)) < thickness)
    scale = max(1, (cell_px + 4) // 14)  # 2 at the default 32 px, 1 below 24 px
    glyph_w, glyph_h, gap = 3 * scale, 5 * scale, scale
    label_w = n_digits * glyph_w + (n_digits - 1) * gap
    top = int(round(centre - glyph_h / 2.0))
    left = int(round(centre - label_w / 2.0))
    ry, rx = ly - top, lx - left
    in_box = (ry >= 0) & (ry < glyph_h) & (rx >= 0) & (rx < label_w)
    slot = np.where(in_box, rx // (glyph_w + gap), 0)
    col_in_slot = rx - slot * (glyph_w + gap)
    in_glyph = in_box & (col_in_slot < glyph_w) & (col_in_slot >= 0)
    # Stack badge: a 1-scale digit in a box in the top-right corner (cells with 2+ agents).
    by, bx = ly - 1, lx - (cell_px - 6)
    badge_box = (by >= 0) & (by < 7) & (bx >= 0) & (bx < 5)
    badge_glyph = (by >= 1) & (by < 6) & (bx >= 1) & (bx < 4)
    return {
        "disc": disc,
        "cross": cross,
        "in_glyph": in_glyph,
        "slot": slot.astype(np.int32),
        "font_row": np.clip(ry // scale, 0, 4).astype(np.int32),
        "font_col": np.clip(col_in_slot // scale, 0, 2).astype(np.int32),
        "badge_box": badge_box,
        "badge_glyph": badge_glyph,
        "badge_row": np.clip(by - 1, 0, 4).astype(np.int32),
        "badge_col": np.clip(bx - 1, 0, 2).astype(np.int32),
    }


def render(env: GridWorld, state: State, cell_px: int = DEFAULT_CELL_PX) -> jax.Array:
    """Draw one state as ``uint8[size*cell_px+1, size*cell_px+1, 3]`` (pure JAX).

    ``env`` and ``cell_px`` are static; jit with ``jax.jit(lambda s: render(env, s))`` and
    vmap over a batch of states for a batch of frames.
    """
    size, n_agents = env.layout.size, env.num_agents
    n_digits = _label_digits(max(env.layout.n_predators, env.layout.n_prey))
    stencil = _cell_stencils(cell_px, n_digits)
    side = size * cell_px + 1
    # Static pixel -> (cell, local offset) maps; the last row/column is the closing grid line.
    pix = np.arange(side)
    cell_of = np.minimum(pix // cell_px, size - 1)
    local_of = np.where(pix == side - 1, 0, pix % cell_px)
    cy, cx = cell_of[:, None], cell_of[None, :]
    ly, lx = local_of[:, None], local_of[None, :]
    grid_line = (ly == 0) | (lx == 0)

    is_predator = np.asarray(env.is_predator)
    role_index = (
        np.where(is_predator, np.arange(n_agents), np.arange(n_agents) - env.layout.n_predators) + 1
    )
    positions = jnp.asarray(state.positions, jnp.int32)
    captured = jnp.asarray(state.captured, bool)
    x, y = positions[:, 0], positions[:, 1]

    # Per cell: the topmost agent (z-order) and whether a captured prey lies there.
    z = jnp.where(jnp.asarray(is_predator), 2 * n_agents, jnp.where(captured, 0, n_agents))
    z = z + jnp.arange(n_agents) + 1
    top_z = jnp.zeros((size, size), jnp.int32).at[y, x].max(z)
    z_to_agent = jnp.zeros(3 * n_agents + 1, jnp.int32).at[z].set(jnp.arange(n_agents))
    top = z_to_agent[top_z]
    occupied = top_z > 0
    has_captured = jnp.zeros((size, size), bool).at[y, x].max(captured)
    stacked = jnp.minimum(jnp.zeros((size, size), jnp.int32).at[y, x].add(1), 9)

    kind = jnp.where(jnp.asarray(is_predator)[top], 0, jnp.where(captured[top], 2, 1))
    label = jnp.asarray(role_index, jnp.int32)[top]

    # Gather the per-cell facts onto pixels.
    occupied_px = occupied[cy, cx]
    kind_px = kind[cy, cx]
    obstacle_px = jnp.asarray(state.obstacle_map, bool)[cy, cx]
    captured_px = has_captured[cy, cx]
    disc_px = stencil["disc"][ly, lx] & occupied_px
    cross_px = stencil["cross"][ly, lx] & captured_px
    interior_px = ~grid_line
    slot = stencil["slot"][ly, lx]
    power = jnp.asarray(10 ** (n_digits - 1 - np.arange(n_digits)), jnp.int32)[slot]
    label_px = label[cy, cx]
    digit = (label_px // power) % 10
    leading_zero = (digit == 0) & (label_px < power)
    ink = jnp.asarray(DIGIT_FONT)[digit, stencil["font_row"][ly, lx], stencil["font_col"][ly, lx]]
    text_px = disc_px & stencil["in_glyph"][ly, lx] & ink & ~leading_zero
    stacked_px = stacked[cy, cx]
    badge_px = jnp.asarray(stencil["badge_box"])[ly, lx] & (stacked_px >= 2)
    badge_ink = jnp.asarray(DIGIT_FONT)[
        stacked_px, stencil["badge_row"][ly, lx], stencil["badge_col"][ly, lx]
    ]
    count_px = badge_px & stencil["badge_glyph"][ly, lx] & badge_ink

    colour = {name: jnp.asarray(rgb, jnp.uint8) for name, rgb in COLOURS.items()}
    agent_colour = jnp.stack([colour["predator"], colour["prey"], colour["captured_prey"]])
    label_colour = jnp.stack([colour["label"], colour["label"], colour["captured_label"]])

    image = jnp.broadcast_to(colour["background"], (side, side, 3))
    layers = (
        (grid_line, colour["grid"]),
        (obstacle_px & interior_px, colour["obstacle"]),
        (cross_px & interior_px, colour["captured_mark"]),
        (disc_px & interior_px, agent_colour[kind_px]),
        (text_px & interior_px, label_colour[kind_px]),
        (badge_px & interior_px, colour["stack_badge"]),
        (count_px & interior_px, colour["stack_count"]),
    )
    for mask, rgb in layers:  # a fixed handful of layers, not a loop over cells or agents
        image = jnp.where(jnp.asarray(mask)[..., None], rgb, image)
    return image.astype(jnp.uint8)


def rollout_states(
    env: GridWorld,
    key: jax.Array,
    policy: Policy | None = None,
    params: EnvParams | None = None,
    max_steps: int = 100,
) -> tuple[State, jax.Array]:
    """One episode of up to ``max_steps`` turns: (states stacked [max_steps+1], done bool[..]).

    The episode of :func:`ppage_jax.episodes.play_episodes` for ``key`` (so a run's GIF shows
    episode 0 of its evaluation block): state 0 is the reset state. ``done[t]`` is True from
    the state that ends the episode (terminated or truncated) on; states after the end repeat
    the final one. ``max_steps`` only stops the recording (it does not truncate). Jittable
    with ``env``, ``policy`` and ``max_steps`` static.
    """
    params = env.default_params if params is None else params
    policy = random_policy(env) if policy is None else policy
    start, (after, ended) = record_one(
        env,
        policy,
        key,
        params,
        max_steps,
        lambda turn: (turn.next_state, turn.terminated | turn.truncated),
    )
    states = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]), start, after)
    done = jnp.concatenate([jnp.zeros((1,), bool), jnp.cumsum(ended) > 0])
    last = jnp.where(done.any(), jnp.argmax(done), max_steps)  # the state that ends it
    index = jnp.minimum(jnp.arange(max_steps + 1), last)  # skipped turns hold zeros
    return jax.tree.map(lambda x: x[index], states), done


@functools.lru_cache(maxsize=16)
def _episode_program(env: GridWorld, policy: Policy | None, max_steps: int, cell_px: int):
    """Jitted (key, params) -> (frames, dones), cached so repeated episodes reuse it."""

    @jax.jit
    def run(key, params):
        states, dones = rollout_states(env, key, policy, params, max_steps)
        return jax.vmap(lambda s: render(env, s, cell_px))(states), dones

    return run


def render_episode(
    env: GridWorld,
    key: jax.Array,
    policy: Policy | None = None,
    params: EnvParams | None = None,
    max_steps: int = 100,
    cell_px: int = DEFAULT_CELL_PX,
) -> np.ndarray:
    """Frames of one episode: ``uint8[T, H_px, W_px, 3]`` from the reset state to the end.

    ``policy(key, obs, state) -> int32[A]`` (default: uniformly random actions). The episode
    stops at termination, truncation or after ``max_steps`` turns, whichever comes first.
    """
    run = _episode_program(env, policy, max_steps, cell_px)
    frames, dones = run(key, env.default_params if params is None else params)
    dones = np.asarray(dones)
    length = int(np.argmax(dones)) + 1 if dones.any() else len(dones)
    return np.asarray(frames[:length])


def write_gif(
    path, frames: Sequence[np.ndarray] | np.ndarray, fps: float = 4.0, hold_last: int = 4
) -> None:
    """Write frames (``uint8[T, H, W, 3]``) as a looping animated GIF.

    The last frame stays ``hold_last`` frame-times longer so the end of the episode is seen.
    Consecutive identical frames are merged into one longer frame by the GIF encoder.
    """
    import imageio.v3 as iio

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8[T>0, H, W, 3], got {frames.dtype} {frames.shape}")
    frame_ms = 1000.0 / fps
    durations = [frame_ms] * (len(frames) - 1) + [frame_ms * (1 + hold_last)]
    from ppage_jax.artifacts import write_bytes

    # encoded in memory, then written atomically: a full disk is one OSError naming the
    # path (imageio writing to the disk itself retries the write when collected, and fails
    # again there)
    data = iio.imwrite("<bytes>", frames, extension=".gif", duration=durations, loop=0)
    write_bytes(path, data)
