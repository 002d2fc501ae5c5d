"""Curricula in a run: the traced :class:`~ppage_jax.train.kit.schedules.Curriculum` of a
validated ``experiment.curriculum``, which the update loop applies
(:mod:`ppage_jax.train.kit.schedules`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from ppage_jax.config.experiment.curriculum import KINDS, MAX_PIECES, targets
from ppage_jax.train.kit.schedules import Curriculum


def make_curriculum(spec: Mapping[str, Any], data: Mapping[str, Any]) -> Curriculum | None:
    """The traced :class:`Curriculum` of a validated ``experiment.curriculum`` (``None`` when
    it is empty); ``data``, the merged config, resolves the leaves."""
    if not spec:
        return None
    resolved = targets(data)
    rows = []
    for body in spec.values():
        kind = body["schedule"]
        start = stop = 0.0
        begin, end = 0.0, 1.0
        values = [0.0]
        bounds: list[float] = []
        if kind == "constant":
            start = stop = float(body["value"])
        elif kind in ("linear", "cosine"):
            start, stop = float(body["from"]), float(body["to"])
            begin, end = float(body.get("begin", 0)), float(body["end"])
        else:
            values = [float(v) for v in body["values"]]
            bounds = [float(b) for b in body["boundaries"]]
        values = values + [values[-1]] * (MAX_PIECES - len(values))
        bounds = bounds + [math.inf] * (MAX_PIECES - 1 - len(bounds))
        rows.append((KINDS.index(kind), start, stop, begin, end, bounds, values))
    columns = list(zip(*rows, strict=True))
    f32 = np.float32
    return Curriculum(
        kind=jnp.asarray(columns[0], jnp.int32),
        start=jnp.asarray(columns[1], f32),
        stop=jnp.asarray(columns[2], f32),
        begin=jnp.asarray(columns[3], f32),
        end=jnp.asarray(columns[4], f32),
        boundaries=jnp.asarray(columns[5], f32),
        values=jnp.asarray(columns[6], f32),
        targets=tuple(resolved[key][0] for key in spec),
    )


def config_curriculum(config: Any) -> Curriculum | None:
    """The :class:`Curriculum` of a validated Config (``None`` without one)."""
    return make_curriculum(config["experiment"].get("curriculum") or {}, config.data)
