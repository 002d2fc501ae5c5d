"""Encoders that fit the observation: the torso a network puts in front of its MLP layers.

``network`` (an algorithm parameter) picks one; ``null`` picks it from what the observation
builder declares (:class:`~ppage_jax.observations.ObservationBuilder`):

- ``mlp``: no encoder, the flat observation goes straight into the MLP layers.
- ``cnn``: a small convolutional torso over a spatial observation (one that declares a
  ``shape``, e.g. ``grid``: (2R+1, 2R+1, channels)): a 3x3 convolution of ``encoder_width``
  channels with stride 2 (zero-padded: (R+1) x (R+1) positions, each seeing a 3x3 patch),
  flattened. One layer: on two CPU cores a second, full-resolution layer cost five times as
  much per step.
- ``set``: a permutation-invariant encoder over an observation's fixed slots (one that
  declares ``slots``, e.g. PPAGE's ``local_radius``, ``absolute``, ``relative``: one slot per
  other agent and one per obstacle, in an order that carries no meaning). DeepSets with a
  positional embedding: every slot that is present adds its features (agents: present, prey,
  captured; obstacles: present) at the cell of an egocentric (2R+1) x (2R+1) window that its
  offset from the observer names, a sum over the slots (so the slot order cannot matter),
  then the same convolutional torso as ``cnn``. An ``outside the grid`` channel comes from
  the observer's own position where the observation has it. R is the window radius the
  slots declare (``local_radius``: its largest view radius; ``absolute``, ``relative``: the
  grid size - 1). A slot is present when its ``present`` feature is set (``local_radius``),
  or when any of its features is non-zero (``absolute``, ``relative``: a switched-off block
  is all zeros).

The features outside the slots (the observer's own block, the wall distances) and whatever
follows the observation (the one-hot agent id) pass through beside the encoder's output; the
network's MLP layers come after. The ``set`` window and its 3x3 patches have no parameters:
:func:`prepare` builds them once per observation (:class:`SetInput`), so a PPO rollout stores
them and its update epochs read them back instead of rebuilding them per minibatch (on two
CPU cores that rebuild was about a third of a minibatch step). A slot's channels are 0/1
flags, so the patches hold counts and are stored exactly as ``uint8``.

A network input is ``float[..., F + extra]``: the scaled observation of
``F = env.observation_size`` features (``obs_scale``, undone to read cell offsets), then
``extra`` features such as the agent id. Every layer uses a scaled
truncated-normal initialisation: orthogonal initialisation needs a batched QR under ``vmap``, a
LAPACK kernel that can wedge XLA's CPU thread pool.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ppage_jax.config.experiment.ppo import NETWORKS
from ppage_jax.observations import ObservationBuilder, SlotGroup
from ppage_jax.types import Replaceable

if TYPE_CHECKING:
    from ppage_jax.env import GridWorld


def scaled_init(gain: float) -> nn.initializers.Initializer:
    """Truncated normal with variance ``gain**2 / fan_in`` (PureJaxRL's gains without QR)."""
    return nn.initializers.variance_scaling(gain * gain, "fan_in", "truncated_normal")


def activation_fn(name: str):
    """``"tanh"`` or ``"relu"`` as a function."""
    return nn.tanh if name == "tanh" else nn.relu


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """How an encoder reads a network input: the ``network`` kind and the observation's
    ``obs_size`` features at the front; ``shape`` (cnn: the spatial observation's shape);
    for ``set``: the slot ``groups``, the window ``radius``, the observer's own absolute
    position features ``own`` (None when the observation lacks them), the grid ``size`` and
    the ``scale`` the observation was multiplied by."""

    network: str
    obs_size: int
    shape: tuple[int, ...] | None = None
    groups: tuple[SlotGroup, ...] = ()
    radius: int = 0
    own: tuple[int, int] | None = None
    size: int = 0
    scale: float = 1.0

    @property
    def header(self) -> np.ndarray:
        """int indices of the observation features outside every slot group."""
        inside = np.zeros(self.obs_size, bool)
        for group in self.groups:
            inside[group.start : group.stop] = True
        return np.flatnonzero(~inside)

    @property
    def patch_dtype(self) -> jnp.dtype:
        """How :class:`SetInput` stores the patches: ``uint8`` while every window cell's count
        (at most the number of slots) fits, else float32."""
        return jnp.uint8 if sum(g.count for g in self.groups) <= 255 else jnp.float32

    @property
    def window_shape(self) -> tuple[int, int, int]:
        """(2R+1, 2R+1, channels) of the set encoder's egocentric window."""
        width = 2 * self.radius + 1
        channels = sum(len(g.channels) for g in self.groups) + (self.own is not None)
        return width, width, channels


def default_network(observation: ObservationBuilder) -> str:
    """The encoder an observation gets when ``network`` is null: ``cnn`` for a spatial one
    (it declares a ``shape``: ``grid``), ``set`` for one that declares ``slots`` (PPAGE's
    slot observations), ``mlp`` otherwise."""
    if observation.shape is not None:
        return "cnn"
    return "set" if observation.slots is not None else "mlp"


def reading_error(network: str, observation: ObservationBuilder) -> str | None:
    """Why encoder ``network`` cannot read ``observation`` (None when it can)."""
    if network not in NETWORKS:
        return f"must be one of {list(NETWORKS)}"
    if network == "cnn" and observation.shape is None:
        return (
            f"cnn needs a spatial observation (one that declares a shape); the observation "
            f"is {observation.name!r}"
        )
    if network == "set" and observation.slots is None:
        return (
            f"set needs a slot observation (one that declares slots); the observation is "
            f"{observation.name!r}"
        )
    return None


def input_spec(env: GridWorld, network: str | None, scale: float = 1.0) -> InputSpec:
    """The :class:`InputSpec` of ``env``'s observation for ``network`` (None: the default);
    ``scale`` is the factor the network's observations were multiplied by."""
    observation = env.observation
    network = default_network(observation) if network is None else network
    error = reading_error(network, observation)
    if error is not None:
        raise ValueError(f"network {network!r}: {error}")
    if network == "cnn":
        assert observation.shape is not None  # reading_error checked it
        return InputSpec(network, observation.size, tuple(observation.shape))
    if network == "set":
        slots = observation.slots
        assert slots is not None  # reading_error checked it
        return InputSpec(
            network,
            observation.size,
            groups=tuple(g for g in slots.groups if g.count > 0),
            radius=slots.radius,
            own=slots.own,
            size=env.layout.size,
            scale=float(scale),
        )
    return InputSpec(network, observation.size)


@struct.dataclass
class SetInput(Replaceable):
    """A ``set`` encoder's input with its parameter-free part done (:func:`prepare`): what a
    rollout stores, so the learning phase does not rebuild the window every epoch.

    ``side`` float[..., S]: the features outside the slots, then the extra ones (agent id);
    ``patches`` [..., P, P, 9C]: the window's 3x3 neighbourhoods at the convolution's
    stride-2 positions (:func:`patches3x3`): float32 as :func:`prepare` builds them, in
    :attr:`InputSpec.patch_dtype` as a rollout stores them (:func:`compact`: counts of 0/1
    flags, exact in ``uint8``, a quarter of the float bytes to store and shuffle)."""

    side: jax.Array
    patches: jax.Array


def prepare(spec: InputSpec, x: jax.Array) -> jax.Array | SetInput:
    """What a network reads for ``x float[..., F + extra]``: ``x`` itself, except for ``set``,
    whose window and patches (no parameters) are built here once (:class:`SetInput`, float32
    patches; :func:`compact` gives the stored form)."""
    if spec.network != "set":
        return x
    obs, extra = x[..., : spec.obs_size], x[..., spec.obs_size :]
    side = jnp.concatenate([obs[..., spec.header], extra], axis=-1)
    return SetInput(side, patches3x3(window(spec, obs), 2))


def compact(spec: InputSpec, prepared: jax.Array | SetInput) -> jax.Array | SetInput:
    """``prepared`` as a rollout stores it: a :class:`SetInput`'s patches in
    :attr:`InputSpec.patch_dtype` (the counts, exactly), anything else as it is."""
    if not isinstance(prepared, SetInput) or spec.patch_dtype == jnp.float32:
        return prepared
    # counts >= 0: + 0.5 then truncation rounds them (cheaper than jnp.round on XLA's CPU)
    return prepared.replace(patches=(prepared.patches + 0.5).astype(spec.patch_dtype))


class Encoder(nn.Module):
    """``x float[..., F + extra] -> float[..., D]`` for ``spec`` (``mlp``: ``x`` itself); a
    ``set`` encoder also takes the :class:`SetInput` that :func:`prepare` made of ``x``."""

    spec: InputSpec
    width: int = 16
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array | SetInput) -> jax.Array:
        spec = self.spec
        if spec.network == "set":
            inp = x if isinstance(x, SetInput) else prepare(spec, x)
            assert isinstance(inp, SetInput)  # prepare makes one for the set encoder
            return jnp.concatenate([inp.side, self._conv(inp.patches.astype(jnp.float32))], -1)
        assert not isinstance(x, SetInput), "a SetInput is the set encoder's input"
        if spec.network == "mlp":
            return x
        assert spec.shape is not None  # cnn: the spatial observation's shape
        obs, extra = x[..., : spec.obs_size], x[..., spec.obs_size :]
        image = obs.reshape((*obs.shape[:-1], *spec.shape))
        return jnp.concatenate([self._conv(patches3x3(image, 2)), extra], axis=-1)

    def _conv(self, patches: jax.Array) -> jax.Array:
        """A 3x3 convolution with zero ("SAME") padding, as a dense layer over its
        :func:`patches3x3` (im2col): under ``vmap`` over parameter sets it stays a batched
        matrix product, where XLA's CPU convolution with batched kernels is slow."""
        dense = nn.Dense(self.width, kernel_init=scaled_init(np.sqrt(2)), name="conv")
        h = activation_fn(self.activation)(dense(patches))
        return h.reshape((*patches.shape[:-3], -1))


def window(spec: InputSpec, obs: jax.Array) -> jax.Array:
    """The set encoder's egocentric window float[..., 2R+1, 2R+1, C] from scaled observations
    float[..., F]: each present slot's channels summed at the cell of its offset (cell
    [R + dy, R + dx]), then, with the observer's position, 1 where the cell is off the grid.

    One scatter-add of every slot into its cell (a slot outside the window, or absent, goes
    to a spare cell that is dropped): on two CPU cores about 0.6x the time of the one-hot
    products it replaced (768 observations of ``configs/default``)."""
    lead, side = obs.shape[:-1], 2 * spec.radius + 1
    raw = obs.reshape(-1, obs.shape[-1]) / spec.scale
    rows = jnp.arange(raw.shape[0])[:, None]
    own = None if spec.own is None else jnp.round(raw[:, list(spec.own)]).astype(jnp.int32)
    flags = sum(len(g.channels) for g in spec.groups)
    grid = jnp.zeros((raw.shape[0], side * side + 1, flags), obs.dtype)  # + the spare cell
    first = 0
    for g in spec.groups:
        slots = raw[:, g.start : g.stop].reshape(-1, g.count, g.width)
        present = (slots != 0).any(-1) if g.present is None else slots[..., g.present] != 0
        offset = jnp.round(slots[..., [g.x, g.y]]).astype(jnp.int32)
        if g.absolute:
            assert own is not None  # absolute slots come with the observer's own position
            offset = offset - own[:, None, :]
        seen = present & (jnp.abs(offset) <= spec.radius).all(-1)
        cell = (offset[..., 1] + spec.radius) * side + offset[..., 0] + spec.radius
        values = jnp.stack(
            [jnp.ones(slots.shape[:-1], obs.dtype) if c < 0 else slots[..., c] for c in g.channels],
            axis=-1,
        )  # [n, count, C]
        stop = first + len(g.channels)
        grid = grid.at[rows, jnp.where(seen, cell, side * side), first:stop].add(values)
        first = stop
    planes = [grid[:, :-1].reshape(-1, side, side, flags)]
    if own is not None:
        cells = jnp.arange(side) - spec.radius
        x = own[:, 0, None] + cells
        y = own[:, 1, None] + cells
        inside = ((x >= 0) & (x < spec.size))[:, None, :] & ((y >= 0) & (y < spec.size))[:, :, None]
        planes.append((~inside).astype(obs.dtype)[..., None])
    out = jnp.concatenate(planes, axis=-1)
    return out.reshape((*lead, *out.shape[1:]))


def patches3x3(image: jax.Array, stride: int) -> jax.Array:
    """The 3x3 neighbourhoods of ``image float[..., H, W, C]`` (zero beyond its edge) at every
    ``stride``-th position: ``[..., H', W', 9C]``, tap (i, j) in channels ``(3i + j) C ...``.
    One gather with a static index (a zero appended for the taps beyond the edge)."""
    height, width, channels = image.shape[-3:]
    flat = image.reshape((*image.shape[:-3], height * width * channels))
    flat = jnp.concatenate([flat, jnp.zeros((*flat.shape[:-1], 1), flat.dtype)], axis=-1)
    return flat[..., _patch_index(height, width, channels, stride)]


@functools.cache
def _patch_index(height: int, width: int, channels: int, stride: int) -> np.ndarray:
    """int32[H', W', 9C]: where :func:`patches3x3` reads each entry in the flattened image
    (``H * W * C``: the appended zero)."""
    taps = np.arange(3) - 1
    y = (np.arange(0, height, stride)[:, None] + taps)[:, None, :, None]  # [H', 1, 3, 1]
    x = (np.arange(0, width, stride)[:, None] + taps)[None, :, None, :]  # [1, W', 1, 3]
    inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)  # [H', W', 3, 3]
    cell = ((y * width + x) * channels)[..., None] + np.arange(channels)
    index = np.where(inside[..., None], cell, height * width * channels).astype(np.int32)
    return index.reshape(*inside.shape[:2], 9 * channels)
