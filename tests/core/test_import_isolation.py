"""Using the simulator imports the simulator only: making, resetting and stepping an env, and
loading a config for every declared algorithm, load no training, analysis, picture, command
line, benchmark or tracking module and no learner, plotting or progress-bar library (checked
in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

FORBIDDEN_PACKAGES = ("train", "analysis", "viz", "cli", "bench", "tracking")
HEAVY = ("flax", "optax", "orbax", "matplotlib", "imageio", "tqdm")
SHIPPED = {
    "random",
    "ippo",
    "dqn",
    "iql",
    "cql",
    "mixed",
    "mappo",
    "actor_critic",
    "a2c",
    "a3c",
    "jalgt",
    "jal_gt",
}

SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
import ppage_jax as pj
from ppage_jax.config import ConfigError
from ppage_jax.config.experiment.algorithms import ALGORITHM_PARAMS

env = pj.make("default")
obs, state = env.reset(jax.random.PRNGKey(0))
env.step(jax.random.PRNGKey(1), state, jnp.zeros(env.num_agents, jnp.int32))
after_env = sorted(sys.modules)

for name in ALGORITHM_PARAMS:
    pj.load_config("1v1", {"experiment.algorithm": {"name": name, "params": {}}})
hint = ""
try:   # an unknown key reads every algorithm's declaration for its hint
    pj.load_config("1v1", {"experiment.algorithm": {"name": "ippo", "params": {"alpha": 1}}})
except ConfigError as err:
    hint = str(err)
print(json.dumps({"after_env": after_env, "after_configs": sorted(sys.modules),
                  "algorithms": sorted(ALGORITHM_PARAMS), "hint": hint}))
"""


def _forbidden(name: str) -> bool:
    """A module that using the simulator must not load."""
    parts = name.split(".")
    if parts[0] == "ppage_jax":
        return len(parts) > 1 and parts[1] in FORBIDDEN_PACKAGES
    return parts[0] in HEAVY


def test_env_and_config_loading_import_no_training_or_heavy_module():
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
    assert set(loaded["algorithms"]) == SHIPPED
    assert "belongs to ['iql', 'cql', 'mixed'" in loaded["hint"]
    for stage in ("after_env", "after_configs"):
        assert [m for m in loaded[stage] if _forbidden(m)] == [], stage
    # the probe itself: the config package was loaded, and it declares every algorithm
    assert "ppage_jax.config.experiment.algorithms" in loaded["after_configs"]


def test_the_probe_recognises_forbidden_modules():
    assert _forbidden("ppage_jax.train")
    assert _forbidden("ppage_jax.train.registry")
    assert _forbidden("ppage_jax.analysis.sweep.spec")
    assert _forbidden("flax.linen")
    assert _forbidden("tqdm")
    assert not _forbidden("ppage_jax.config.experiment.section")
    assert not _forbidden("ppage_jax.trainer_like")  # only whole package names count
    assert not _forbidden("ppage_jax")
    assert not _forbidden("jax")


CHECKS_FIRST = """
from ppage_jax.config import ConfigError, load_config
for overrides in ({"rewards.shaping": [{"name": "nosuch"}]},
                  {"rewards.shaping": [{"name": "survival", "weight": "x"}]}):
    try:
        load_config("configs/default", overrides)
    except ConfigError as err:
        print("refused:", str(err).splitlines()[0][:120])
    else:
        print("accepted")
"""


def test_a_config_is_checked_against_the_term_registry_in_a_fresh_interpreter():
    # the registries are filled on first use (the package init imports nothing): loading a
    # config before any env or term was touched must still check its terms and weights
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", CHECKS_FIRST], capture_output=True, text=True, cwd=root, check=True
    ).stdout.splitlines()
    assert len(out) == 2
    assert out[0].startswith("refused:") and "unknown reward term" in out[0]
    assert out[1].startswith("refused:") and "weight" in out[1]
