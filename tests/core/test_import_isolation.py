"""Using the simulator imports the simulator only: making, resetting and stepping an env, and
loading a config for any algorithm, import no learner, plotting or progress-bar library and
no ppage_jax subpackage beyond the core's (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ppage_jax

HEAVY = ("flax", "optax", "matplotlib", "imageio", "tqdm", "orbax")
# Light modules of the training package that config loading may import: the `experiment`
# section's schema, the algorithm registry and the hyperparameter declarations
# (ppage_jax.config.hyperparams*).
LIGHT_TRAIN = {
    "ppage_jax.train",
    "ppage_jax.config.experiment",
    "ppage_jax.train.registry",
    "ppage_jax.train.run.curriculum",  # schedules: validated when a config loads (jax/numpy only)
    "ppage_jax.train.kit.traced",  # the traced hyperparameter names schedules may target
    "ppage_jax.train.protocol",
    "ppage_jax.train.run.roles",
}
SHIPPED = {"random", "ippo", "dqn", "iql", "cql", "mixed"}
CORE_PACKAGES = ("ppage_jax.rewards", "ppage_jax.observations")

SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
import ppage_jax as pj
from ppage_jax.config import ConfigError

env = pj.make("default")
obs, state = env.reset(jax.random.PRNGKey(0))
env.step(jax.random.PRNGKey(1), state, jnp.zeros(env.num_agents, jnp.int32))
after_env = sorted(sys.modules)

from ppage_jax.train.registry import ALGORITHMS
for name in ALGORITHMS:
    pj.load_config("1v1", {"experiment.algorithm": {"name": name, "params": {}}})
try:   # an unknown key reads every algorithm's declaration for its hint
    pj.load_config("1v1", {"experiment.algorithm": {"name": "ippo", "params": {"alpha": 1}}})
except ConfigError:
    pass
print(json.dumps({"after_env": after_env, "after_configs": sorted(sys.modules),
                  "algorithms": sorted(ALGORITHMS)}))
"""


def _allowed(name: str) -> bool:
    """A core ppage_jax module: a top-level module file, rewards/observations, or a light
    training module."""
    root = Path(ppage_jax.__file__).parent
    parts = name.split(".")
    if (
        name == "ppage_jax"
        or name in LIGHT_TRAIN
        or name.startswith("ppage_jax.config.hyperparams")
    ):
        return True
    if name in CORE_PACKAGES or name.startswith(tuple(p + "." for p in CORE_PACKAGES)):
        return True
    return len(parts) == 2 and (root / f"{parts[1]}.py").is_file()


def test_env_and_config_loading_import_only_the_core():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=os.getcwd(),
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert SHIPPED <= set(loaded["algorithms"])
    for stage in ("after_env", "after_configs"):
        modules = loaded[stage]
        heavy = [m for m in modules if m.split(".")[0] in HEAVY]
        assert heavy == [], (stage, heavy)
        extra = [m for m in modules if m.startswith("ppage_jax") and not _allowed(m)]
        assert extra == [], (stage, extra)
    assert "ppage_jax.train.algorithms.ippo" not in loaded["after_configs"]
    assert "ppage_jax.episodes" not in loaded["after_configs"]
