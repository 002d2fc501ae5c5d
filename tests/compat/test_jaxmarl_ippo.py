"""JaxMARL-style IPPO and MAPPO loops (feed-forward, shared parameters, as in JaxMARL's
ippo_ff and mappo_ff baselines) run unchanged on the JaxMARL adapter: dict observations and
actions, batchify / unbatchify over ``env.agents``, ``jax.vmap(env.step)`` with auto-reset,
infos reshaped to ``NUM_ACTORS``, GAE and a clipped PPO update; MAPPO's centralised critic
reads ``obs["world_state"]`` reshaped as JaxMARL's MAPPO does. The loop is the client of
``benchmarks/jaxmarl_ppo.py`` (which trains it longer and measures the result)."""

import importlib.util
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from ppage_jax.compat.jaxmarl import JaxMARLEnv

_CLIENT = Path(__file__).resolve().parents[2] / "benchmarks" / "jaxmarl_ppo.py"
_spec = importlib.util.spec_from_file_location("jaxmarl_ppo_client", _CLIENT)
client = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(client)


@pytest.mark.parametrize("algorithm", ["ippo", pytest.param("mappo", marks=pytest.mark.slow)])
def test_jaxmarl_style_ppo_runs_unchanged(algorithm):
    mappo = algorithm == "mappo"
    env = JaxMARLEnv("configs/1v1", world_state=mappo, env={"termination": {"max_steps": 8}})
    config = {
        "NUM_ENVS": 8,
        "NUM_STEPS": 16,
        "NUM_UPDATES": 3,
        "UPDATE_EPOCHS": 2,
        "LR": 3e-3,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "VF_COEF": 0.5,
        "ENT_COEF": 0.01,
        "MAPPO": mappo,
    }
    out = jax.jit(client.make_train(config, env))(jax.random.PRNGKey(0))
    metrics = jax.tree.map(np.asarray, out["metrics"])
    assert metrics["loss"].shape == (3,) and np.isfinite(metrics["loss"]).all()
    # every 8-turn episode ends inside the 16-turn rollouts: at least 2 per grid per update
    assert (metrics["episodes"] >= 2 * config["NUM_ENVS"]).all()
    # the per-term infos add up to the rewards the loop saw
    np.testing.assert_allclose(metrics["term_sum"], metrics["reward_sum"], rtol=1e-5)
    moved = jax.tree.map(
        lambda a, b: np.abs(np.asarray(a) - np.asarray(b)).max(),
        out["runner_state"][0],
        out["init_params"],
    )
    assert max(jax.tree.leaves(moved)) > 0
    # the critic's input: the world state (MAPPO) or the agent's own observation (IPPO)
    critic_in = out["init_params"]["params"]["critic_hidden"]["kernel"].shape[0]
    assert critic_in == (env.state_size if mappo else env.env.observation_size)
