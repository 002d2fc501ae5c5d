"""What a sweep runs, settled before it touches the output directory (:class:`SweepPlan`:
the env, the train and evaluation functions, the stacked runs, the mesh and the layout), and
the output directory it opens with it (:func:`open_writer`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from ppage_jax.analysis.batch.program import stack_hyperparams, stack_runs
from ppage_jax.analysis.batch.spec import SweepSpec
from ppage_jax.analysis.batch.trainers import EvalFn, TrainFn, trainer_functions
from ppage_jax.analysis.sweep.writer import FollowerWriter, SweepWriter, open_sweep_writer
from ppage_jax.env import GridWorld
from ppage_jax.sharding import make_mesh
from ppage_jax.state import EnvParams

# How a chunk's runs are trained: one program vmapped over them, or one call per run of a
# program compiled for one run per device (the same numbers, run after run).
LAYOUTS = ("vmap", "sequential")

Writer = SweepWriter | FollowerWriter


@dataclasses.dataclass(frozen=True, eq=False)
class SweepPlan:
    """What a sweep runs, settled before it touches the output directory: the env, the
    train/eval functions, the stacked runs (arm-major) and the evaluation's step limit."""

    spec: SweepSpec
    env: GridWorld
    train_fn: TrainFn
    eval_fn: EvalFn
    env_steps_per_update: int
    out_dir: Path
    runs: list[tuple[str, int]]
    keys: jax.Array  # [R]
    inputs: Any  # what the program takes per run: EnvParams [R], or (EnvParams, hyperparams)
    arm_params: list[EnvParams]
    horizon: int  # the evaluation's step limit (time to capture is censored there)
    mesh: Mesh  # every process's devices
    layout: str  # one of LAYOUTS
    # what the compiled program is made of beyond the code and its inputs, for the program
    # store (ppage_jax.compilation.programs); None where it cannot be told (functions given,
    # a config that reads a trained policy)
    program_static: dict[str, Any] | None = None

    @property
    def total(self) -> int:
        return len(self.runs)

    @property
    def devices(self) -> int:
        return int(self.mesh.devices.size)

    @property
    def arm_names(self) -> list[str]:
        return [arm.name for arm in self.spec.arms]


def sweep_identity(
    spec: SweepSpec, runs: list[tuple[str, int]], env_steps_per_update: int, horizon: int
) -> dict[str, Any]:
    """What defines a sweep's results (hashed into its manifest): the arms, seeds, eval
    block and config (by hash; not the paths they were read from) and the runs in order."""
    described = {k: v for k, v in spec.describe().items() if k not in ("sweep", "config")}
    return dict(
        described,
        runs=[list(r) for r in runs],
        env_steps_per_update=env_steps_per_update,
        eval_step_limit=horizon,
    )


def choose_layout(layout: str | None = None) -> str:
    """The sweep's layout: ``layout`` when given, else ``vmap`` on every device kind.
    Measured on a 2-core CPU the two layouts train within about 10 % of each other
    (docs/performance.md), and a learner's floats differ between them, so the vmapped
    program, which made the shipped results, stays the default there too. ValueError naming
    the allowed values."""
    if layout is None:
        return "vmap"
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return layout


def plan_sweep(
    spec: SweepSpec,
    train_fn: TrainFn | None = None,
    eval_fn: EvalFn | None = None,
    env_steps_per_update: int | None = None,
    output_dir: str | Path | None = None,
    layout: str | None = None,
) -> SweepPlan:
    """The :class:`SweepPlan` of ``spec``: the config's training and evaluation
    (:func:`trainer_functions`) where a function is not given, the output directory
    (default: the spec's), the stacked runs, the mesh of every process's devices and the
    layout (:func:`choose_layout`)."""
    layout = choose_layout(layout)
    env = spec.make_env()
    defaults = train_fn is None and eval_fn is None  # a program the store can key
    if train_fn is None or eval_fn is None:
        default_train, default_eval, default_steps = trainer_functions(spec, env)
        train_fn = train_fn or default_train
        eval_fn = eval_fn or default_eval
        env_steps_per_update = env_steps_per_update or default_steps
    runs, keys, params = stack_runs(spec, env)
    hyper = stack_hyperparams(spec)
    horizon = spec.eval_max_steps or int(np.asarray(params.max_steps).reshape(-1)[0])
    return SweepPlan(
        spec=spec,
        env=env,
        train_fn=train_fn,
        eval_fn=eval_fn,
        env_steps_per_update=env_steps_per_update or 1,
        out_dir=Path(output_dir or spec.output_dir),
        runs=runs,
        keys=keys,
        inputs=(params, hyper) if hyper else params,
        arm_params=spec.arm_params(env),
        horizon=horizon,
        mesh=make_mesh(),
        layout=layout,
        program_static=(sweep_program_static(spec, layout, horizon) if defaults else None),
    )


def sweep_program_static(spec: SweepSpec, layout: str, horizon: int) -> dict[str, Any] | None:
    """The static part of the default train-then-evaluate program of ``spec``: the sweep's
    description (its config by hash, arms, seeds, evaluation) with its layout and step limit;
    None when the config reads a trained policy (``experiment.start_from``, frozen roles),
    whose weights the config's hash does not cover."""
    exp = spec.config["experiment"]
    if exp.get("start_from") is not None or not all(
        isinstance(role, str) for role in exp["roles"].values()
    ):
        return None
    described = {k: v for k, v in spec.describe().items() if k != "sweep"}
    return {
        "sweep": json.dumps(described, sort_keys=True, default=str),
        "chunking": [spec.chunk_size, layout, horizon],
    }


def open_writer(plan: SweepPlan, source: dict | None, resume: bool, overwrite: bool) -> Writer:
    """The sweep's output directory (:func:`open_sweep_writer`: refused, resumed or
    overwritten) with sweep.json's first description of the sweep and the machine."""
    spec = plan.spec
    description = dict(
        spec.describe(),
        runs=plan.total,
        devices=plan.devices,
        processes=jax.process_count(),
        platform=jax.devices()[0].platform,
        layout=plan.layout,
        env_steps_per_update=plan.env_steps_per_update,
        eval_step_limit=plan.horizon,
    )
    identity = sweep_identity(spec, plan.runs, plan.env_steps_per_update, plan.horizon)
    return open_sweep_writer(
        plan.out_dir, description, identity, source=source, resume=resume, overwrite=overwrite
    )
