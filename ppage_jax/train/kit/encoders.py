"""Encoders that fit the observation: the torso a network puts in front of its MLP layers.

``network`` (an algorithm parameter) picks one; ``null`` picks it from the observation:

- ``mlp``: no encoder, the flat observation goes straight into the MLP layers.
- ``cnn``: a small convolutional torso over a spatial observation (``grid``: its
  ``env.observation_shape``, (2R+1, 2R+1, channels)): a 3x3 convolution of ``encoder_width``
  channels with stride 2 (zero-padded: (R+1) x (R+1) positions, each seeing a 3x3 patch),
  flattened. One layer: on two CPU cores a second, full-resolution layer cost five times as
  much per step.
- ``set``: a permutation-invariant encoder over PPAGE's fixed slots (``local_radius``,
  ``absolute``, ``relative``: one slot per other agent and one per obstacle, in an order that
  carries no meaning). DeepSets with a positional embedding: every slot that is present adds
  its features (agents: present, prey, captured; obstacles: present) at the cell of an
  egocentric (2R+1) x (2R+1) window that its offset from the observer names, a sum over the
  slots (so the slot order cannot matter), then the same convolutional torso as ``cnn``. An
  ``outside the grid`` channel comes from the observer's own position where the observation
  has it. R is the view radius (``local_radius``) or the grid size - 1. A ``local_radius``
  slot is present when its ``present`` feature is set; an ``absolute`` or ``relative`` slot
  when any of its features is non-zero (a switched-off block is all zeros).

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
import inspect
from typing import TYPE_CHECKING

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.config.hyperparams import NETWORKS, SLOT_BUILDERS, network_error

if TYPE_CHECKING:
    from ppage_jax.env import GridWorld


def scaled_init(gain: float) -> nn.initializers.Initializer:
    """Truncated normal with variance ``gain**2 / fan_in`` (PureJaxRL's gains without QR)."""
    return nn.initializers.variance_scaling(gain * gain, "fan_in", "truncated_normal")


def activation_fn(name: str):
    """``"tanh"`` or ``"relu"`` as a function."""
    return nn.tanh if name == "tanh" else nn.relu


@dataclasses.dataclass(frozen=True)
class SlotGroup:
    """``count`` slots of ``width`` features starting at feature ``start``. A slot is present
    when its feature ``present`` is non-zero (None: when any feature is); its features ``x``,
    ``y`` are its position (an offset from the observer, or ``absolute`` grid coordinates) and
    ``channels`` the features it adds at that cell (-1: a constant 1)."""

    name: str
    start: int
    width: int
    count: int
    present: int | None
    x: int
    y: int
    channels: tuple[int, ...]
    absolute: bool = False

    @property
    def stop(self) -> int:
        return self.start + self.width * self.count


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


def slot_groups(builder: str, num_agents: int, num_obstacles: int) -> tuple[SlotGroup, ...]:
    """The slot groups of a PPAGE slot observation (layouts in ``docs/observations.md``)."""
    n, k = num_agents, num_obstacles
    if builder == "local_radius":
        # [x, y, radius, captured]; per agent [present, dx, dy, manhattan, type_id, captured];
        # per obstacle [present, dx, dy, manhattan]
        groups = (
            SlotGroup("agents", 4, 6, n, 0, 1, 2, (0, 4, 5)),
            SlotGroup("obstacles", 4 + 6 * n, 4, k, 0, 1, 2, (0,)),
        )
    elif builder in ("absolute", "relative"):
        # own 7; per other agent [x, y, dist, type_id, team_base, team_idx, captured];
        # per obstacle [x, y, dist]; x, y absolute or (other - self)
        absolute = builder == "absolute"
        groups = (
            SlotGroup("agents", 7, 7, n - 1, None, 0, 1, (-1, 3, 6), absolute),
            SlotGroup("obstacles", 7 + 7 * (n - 1), 3, k, None, 0, 1, (-1,), absolute),
        )
    else:
        raise ValueError(
            f"observation {builder!r} has no slots; the set encoder reads {list(SLOT_BUILDERS)}"
        )
    return tuple(g for g in groups if g.count > 0)


def default_network(builder: str, spatial: bool) -> str:
    """The encoder an observation gets when ``network`` is null: ``cnn`` for a spatial one
    (``grid``), ``set`` for PPAGE's slot observations, ``mlp`` otherwise."""
    if spatial:
        return "cnn"
    return "set" if builder in SLOT_BUILDERS else "mlp"


def view_radius(env: GridWorld) -> int:
    """The set encoder's window radius: the largest view radius of a ``local_radius``
    observation, else (and at most) the grid size - 1."""
    size = env.layout.size
    obs = env.config["observations"]
    if obs["type"] != "local_radius":
        return size - 1
    from ppage_jax.observations.builders import local_radius

    default = inspect.signature(local_radius).parameters["radius"].default
    radii = [(obs["params"] or {}).get("radius", default)]
    radii += [
        body["radius"]
        for body in (obs["per_agent"] or {}).values()
        if isinstance(body, dict) and "radius" in body
    ]
    return min(size - 1, max(radii))


def input_spec(env: GridWorld, network: str | None, scale: float = 1.0) -> InputSpec:
    """The :class:`InputSpec` of ``env``'s observation for ``network`` (None: the default);
    ``scale`` is the factor the network's observations were multiplied by."""
    builder, shape = env.observation.name, env.observation_shape
    network = default_network(builder, shape is not None) if network is None else network
    error = (
        f"must be one of {list(NETWORKS)}"
        if network not in NETWORKS
        else network_error(network, builder, shape is not None)
    )
    if error is not None:
        raise ValueError(f"network {network!r}: {error}")
    if network == "cnn":
        return InputSpec(network, env.observation_size, tuple(shape))
    if network == "set":
        layout = env.layout
        return InputSpec(
            network,
            env.observation_size,
            groups=slot_groups(builder, layout.num_agents, layout.num_obstacles),
            radius=view_radius(env),
            own=None if builder == "relative" else (0, 1),
            size=layout.size,
            scale=float(scale),
        )
    return InputSpec(network, env.observation_size)


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
