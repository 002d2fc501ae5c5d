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
network's MLP layers come after. A network input is ``float[..., F + extra]``: the scaled
observation of ``F = env.observation_size`` features (``obs_scale``, undone to read cell
offsets), then ``extra`` features such as the agent id. Every layer uses a scaled
truncated-normal initialisation: orthogonal initialisation needs a batched QR under ``vmap``, a
LAPACK kernel that can wedge XLA's CPU thread pool.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.config.hyperparams import NETWORKS
from ppage_jax.observations import ObservationBuilder, SlotGroup

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
        return InputSpec(network, observation.size, tuple(observation.shape))
    if network == "set":
        slots = observation.slots
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


class Encoder(nn.Module):
    """``x float[..., F + extra] -> float[..., D]`` for ``spec`` (``mlp``: ``x`` itself)."""

    spec: InputSpec
    width: int = 16
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        spec = self.spec
        if spec.network == "mlp":
            return x
        obs, extra = x[..., : spec.obs_size], x[..., spec.obs_size :]
        if spec.network == "cnn":
            image = obs.reshape((*obs.shape[:-1], *spec.shape))
            return jnp.concatenate([self._conv(image), extra], axis=-1)
        return jnp.concatenate(
            [obs[..., spec.header], extra, self._conv(window(spec, obs))], axis=-1
        )

    def _conv(self, image: jax.Array) -> jax.Array:
        h = activation_fn(self.activation)(_conv3x3(image, self.width, 2, "conv"))
        return h.reshape((*image.shape[:-3], -1))


def window(spec: InputSpec, obs: jax.Array) -> jax.Array:
    """The set encoder's egocentric window float[..., 2R+1, 2R+1, C] from scaled observations
    float[..., F]: each present slot's channels summed at the cell of its offset (cell
    [R + dy, R + dx]), then, with the observer's position, 1 where the cell is off the grid."""
    raw = obs / spec.scale
    lead, side = obs.shape[:-1], 2 * spec.radius + 1
    cells = jnp.arange(side) - spec.radius
    own = None if spec.own is None else jnp.round(raw[..., list(spec.own)]).astype(jnp.int32)
    planes = []
    for g in spec.groups:
        slots = raw[..., g.start : g.stop].reshape((*lead, g.count, g.width))
        present = (slots != 0).any(-1) if g.present is None else slots[..., g.present] != 0
        offset = jnp.round(slots[..., [g.x, g.y]]).astype(jnp.int32)
        if g.absolute:
            offset = offset - own[..., None, :]
        hit_x = (offset[..., 0, None] == cells) & present[..., None]  # [..., count, side]
        hit_y = (offset[..., 1, None] == cells).astype(obs.dtype)
        values = jnp.stack(
            [jnp.ones(slots.shape[:-1], obs.dtype) if c < 0 else slots[..., c] for c in g.channels],
            axis=-1,
        )  # [..., count, C]
        planes.append(
            jnp.einsum("...sx,...sy,...sc->...yxc", hit_x.astype(obs.dtype), hit_y, values)
        )
    if own is not None:
        x = own[..., 0, None] + cells
        y = own[..., 1, None] + cells
        inside = ((x >= 0) & (x < spec.size))[..., None, :] & ((y >= 0) & (y < spec.size))[
            ..., :, None
        ]
        planes.append((~inside).astype(obs.dtype)[..., None])
    return jnp.concatenate(planes, axis=-1)


def _conv3x3(x: jax.Array, features: int, stride: int, name: str) -> jax.Array:
    """A 3x3 convolution with zero ("SAME") padding over ``x float[..., H, W, C]``, written as
    a dense layer over the nine shifted views (im2col): under ``vmap`` over parameter sets it
    stays a batched matrix product, where XLA's CPU convolution with batched kernels is slow."""
    height, width = x.shape[-3], x.shape[-2]
    pad = [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)]
    padded = jnp.pad(x, pad)
    patches = jnp.concatenate(
        [
            padded[..., i : i + height : stride, j : j + width : stride, :]
            for i in range(3)
            for j in range(3)
        ],
        axis=-1,
    )  # [..., H', W', 9C]
    return nn.Dense(features, kernel_init=scaled_init(np.sqrt(2)), name=name)(patches)
