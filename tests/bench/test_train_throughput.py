"""``benchmarks/train_throughput.py`` and its PureJaxRL-structured reference loop
(``benchmarks/pjrl_ippo.py``) on a tiny grid: the reference builds ppage_jax's own network
(same parameter tree, same initial values for the same key), collects the same first rollout,
trains, and the script's main() runs and returns a ratio (never asserted: speed is measured
by the benchmark, not by tests)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import ippo

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, _BENCHMARKS / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pjrl = _load("pjrl_ippo")
bench = _load("train_throughput")

TINY = ["--set", "env.size=5", "--set", "env.termination.max_steps=8"]
TINY += ["--num-envs", "4", "--num-steps", "4", "--updates", "2", "--blocks", "1"]


def tiny_tc(algorithm: str = "ippo", network: str | None = None, updates: int = 2):
    overrides = {
        "env.size": 5,
        "env.termination.max_steps": 8,
        "experiment.num_envs": 4,
        "experiment.total_timesteps": updates * 16,
        "experiment.algorithm.name": algorithm,
        "experiment.algorithm.params.num_steps": 4,
    }
    if network is not None:
        overrides["experiment.algorithm.params.network"] = network
    return make_train_config(pj.load_config("configs/default", overrides))


@pytest.mark.slow  # builds both trainers
@pytest.mark.parametrize("algorithm", ["ippo", "mappo"])
def test_reference_network_is_ppage_jax_network(algorithm):
    """Both roles learn in configs/default; each role's parameters match ippo.init's: the
    same tree and shapes and, with the same key, the same initial values."""
    tc = tiny_tc(algorithm)
    assert tc.learning_roles == ("predator", "prey")
    key = jax.random.PRNGKey(3)
    mine = ippo.init(key, tc, tc.env.default_params, pjrl.critic_fn(algorithm))
    ref = pjrl.make_parts(tc).init(key)
    np.testing.assert_array_equal(ref.last_obs, mine.env.obs)
    for role in tc.learning_roles:
        a, b = mine.learners[role].params, ref.train_states[role].params
        assert jax.tree.structure(a) == jax.tree.structure(b)
        assert jax.tree.map(np.shape, a) == jax.tree.map(np.shape, b)
        jax.tree.map(np.testing.assert_array_equal, a, b)
    critic_in = ref.train_states["prey"].params["params"]["critic_0"]["kernel"].shape[0]
    if algorithm == "mappo":  # the critic reads the global state and the one-hot agent id
        assert critic_in == tc.env.global_state_size + len(tc.agents_of("prey"))
    else:  # the critic reads the encoder's output, as the actor does
        assert critic_in == ref.train_states["prey"].params["params"]["actor_0"]["kernel"].shape[0]


@pytest.mark.slow  # replays a rollout of both trainers
def test_reference_rollout_takes_ppage_jax_actions():
    """With the same key the reference's first rollout is ppage_jax's (inputs, actions,
    log-probs, values, rewards, validity); only the bootstrap differs."""
    tc = tiny_tc(network="mlp")
    key = jax.random.PRNGKey(5)
    params = tc.env.default_params
    _, mine, _ = jax.jit(ippo.rollout)(ippo.init(key, tc, params), tc, params)
    parts = pjrl.make_parts(tc)
    _, ref, last = jax.jit(parts.rollout)(parts.init(key))
    for role in tc.learning_roles:
        for field in ("x", "action", "log_prob", "value", "reward", "valid"):
            np.testing.assert_allclose(
                np.asarray(getattr(ref[role], field), np.float32),
                np.asarray(getattr(mine[role], field), np.float32),
                rtol=1e-6,
                atol=1e-6,
                err_msg=f"{role} {field}",
            )
        ended = np.asarray(mine[role].episode_end | mine[role].agent_terminal)
        np.testing.assert_array_equal(np.asarray(ref[role].done), ended)
        assert last[role].shape == (tc.num_envs, len(tc.agents_of(role)))


@pytest.mark.slow  # compiles a full training loop
def test_reference_make_train_trains():
    tc = tiny_tc(network="mlp", updates=3)
    out = jax.jit(pjrl.make_train(tc))(jax.random.PRNGKey(0))
    metrics = jax.tree.map(np.asarray, out["metrics"])
    for role in tc.learning_roles:
        assert metrics[f"loss/{role}"].shape == (3,)
        assert np.isfinite(metrics[f"loss/{role}"]).all()
    start = pjrl.make_parts(tc).init(jax.random.PRNGKey(0)).train_states
    moved = jax.tree.map(
        lambda a, b: np.abs(np.asarray(a) - np.asarray(b)).max(),
        out["runner_state"].train_states["prey"].params,
        start["prey"].params,
    )
    assert max(jax.tree.leaves(moved)) > 0


@pytest.mark.slow  # two compiled trainers: over a minute on 2 cores
def test_main_runs_both_loops_and_returns_a_ratio(tmp_path, capsys):
    out = tmp_path / "sub" / "throughput.json"
    results = bench.main(TINY + ["--network", "mlp", "--no-end-to-end", "--json", str(out)])
    text = capsys.readouterr().out
    assert "ratio A/B" in text and "not a result" in text
    ratio = results["ratio"]
    assert 0 < ratio["min"] <= ratio["median"] <= ratio["max"]
    assert set(results["modes"]) == {bench.COMPILED, bench.REFERENCE}
    assert (results["num_envs"], results["num_steps"], results["updates"]) == (4, 4, 2)
    assert results["env_steps_per_block"] == 32
    assert json.loads(out.read_text())["ratio"] == ratio
    assert [p.name for p in out.parent.iterdir()] == ["throughput.json"]  # no temp file left


@pytest.mark.slow
def test_main_end_to_end_and_split():
    results = bench.main(TINY + ["--network", "mlp", "--updates", "4", "--chunk", "1", "--split"])
    assert set(results["ratios"]) == {bench.COMPILED, bench.END_TO_END}
    e2e = results["modes"][bench.END_TO_END]
    assert e2e["env_steps_per_second"]["median"] > 0
    assert e2e["summary_env_steps_per_second"]["median"] > 0
    ms = results["split"]["ms_per_update"]
    for part in ("env_step", "policy_forward", "bootstrap", "learning", "host"):
        assert np.isfinite(ms[part])
