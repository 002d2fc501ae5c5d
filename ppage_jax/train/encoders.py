"""Encoders that fit the observation: the torso a network puts in front of its MLP layers.

``network`` (an algorithm parameter) picks one; ``null`` picks it from the observation:

- ``mlp``: no encoder, the flat observation goes straight into the MLP layers.
- ``cnn``: a small convolutional torso over a spatial observation (``grid``: its
  ``env.observation_shape``, (2R+1, 2R+1, channels)): a 3x3 convolution, a strided 3x3
  convolution (both zero-padded), flattened.
- ``set``: a permutation-invariant encoder over PPAGE's fixed slots (``local_radius``,
  ``absolute``, ``relative``: one slot per other agent and one per obstacle, in an order that
  carries no meaning). DeepSets: each group of slots (agents, obstacles) goes through its own
  embedding, shared by the group's slots (a ReLU layer of ``encoder_width`` units), and the
  embeddings are summed over the slots that are present (a ``local_radius`` slot is present
  when its ``present`` feature is non-zero; ``absolute`` and ``relative`` slots always are),
  divided by the group's slot count, beside the share of slots present. A ReLU unit over a
  slot's offsets is a detector ("an obstacle right of me"), so the sum counts what lies where,
  whatever the slot order. The features outside the slots (the observer's own block, the wall
  distances) and whatever follows the observation (the one-hot agent id) pass through
  unchanged; the network's MLP layers come after.

A network input is ``float[..., F + extra]``: the (scaled) observation of ``F =
env.observation_size`` features, then ``extra`` features such as the agent id. Every layer uses
a scaled truncated-normal initialisation: orthogonal initialisation needs a batched QR under
``vmap``, a LAPACK kernel that can wedge XLA's CPU thread pool.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.train.hyperparams import NETWORKS, SLOT_BUILDERS, network_error

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
    """``count`` slots of ``width`` features starting at feature ``start``; a slot is present
    when its feature ``present`` is non-zero (``None``: every slot is)."""

    name: str
    start: int
    width: int
    count: int
    present: int | None

    @property
    def stop(self) -> int:
        return self.start + self.width * self.count


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """How an encoder reads a network input: the ``network`` kind, the observation's
    ``obs_size`` features at the front, its spatial ``shape`` (cnn) or slot ``groups`` (set)."""

    network: str
    obs_size: int
    shape: tuple[int, ...] | None = None
    groups: tuple[SlotGroup, ...] = ()

    @property
    def header(self) -> np.ndarray:
        """int indices of the observation features outside every slot group."""
        inside = np.zeros(self.obs_size, bool)
        for group in self.groups:
            inside[group.start : group.stop] = True
        return np.flatnonzero(~inside)


def slot_groups(builder: str, num_agents: int, num_obstacles: int) -> tuple[SlotGroup, ...]:
    """The slot groups of a PPAGE slot observation (layouts in ``docs/observations.md``)."""
    n, k = num_agents, num_obstacles
    if builder == "local_radius":  # [x, y, radius, captured], 6 per agent, 4 per obstacle
        groups = (SlotGroup("agents", 4, 6, n, 0), SlotGroup("obstacles", 4 + 6 * n, 4, k, 0))
    elif builder in ("absolute", "relative"):  # own 7, 7 per other agent, 3 per obstacle
        groups = (
            SlotGroup("agents", 7, 7, n - 1, None),
            SlotGroup("obstacles", 7 + 7 * (n - 1), 3, k, None),
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


def input_spec(env: GridWorld, network: str | None) -> InputSpec:
    """The :class:`InputSpec` of ``env``'s observation for ``network`` (None: the default)."""
    builder, shape = env.observation.name, env.observation_shape
    network = default_network(builder, shape is not None) if network is None else network
    error = (
        f"must be one of {list(NETWORKS)}"
        if network not in NETWORKS
        else network_error(network, builder, shape is not None)
    )
    if error is not None:
        raise ValueError(f"network {network!r}: {error}")
    layout = env.layout
    return InputSpec(
        network,
        env.observation_size,
        tuple(shape) if network == "cnn" else None,
        slot_groups(builder, layout.num_agents, layout.num_obstacles) if network == "set" else (),
    )


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
            return jnp.concatenate([self._conv(obs), extra], axis=-1)
        return jnp.concatenate([obs[..., spec.header], extra, self._sets(obs)], axis=-1)

    def _conv(self, obs: jax.Array) -> jax.Array:
        act, lead = activation_fn(self.activation), obs.shape[:-1]
        h = obs.reshape((*lead, *self.spec.shape))
        h = act(_conv3x3(h, max(1, self.width // 2), 1, "conv_0"))
        h = act(_conv3x3(h, self.width, 2, "conv_1"))
        return h.reshape((*lead, -1))

    def _sets(self, obs: jax.Array) -> jax.Array:
        """Per group: the mean over its slots of each present slot's embedding (absent slots
        embed to exactly 0: the presence-masked slot, with a constant 1 appended, goes through
        a bias-free layer and a ReLU), and the share of slots present."""
        lead = obs.shape[:-1]
        pooled = []
        for group in self.spec.groups:
            slots = obs[..., group.start : group.stop].reshape((*lead, group.count, group.width))
            if group.present is None:
                present = jnp.ones((*lead, group.count, 1), obs.dtype)
            else:
                present = (slots[..., group.present : group.present + 1] != 0).astype(obs.dtype)
            slots = jnp.concatenate([slots, jnp.ones_like(present)], axis=-1) * present
            h = nn.relu(
                nn.Dense(
                    self.width, use_bias=False, kernel_init=scaled_init(np.sqrt(2)), name=group.name
                )(slots)
            )
            pooled += [h.sum(-2) / group.count, present.sum(-2) / group.count]
        return jnp.concatenate(pooled, axis=-1)


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
