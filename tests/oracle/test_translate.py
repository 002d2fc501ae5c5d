"""The one GridWorld (+ EnvParams) -> NumPy oracle translation, ``ppage_jax.oracle.translate``."""

from __future__ import annotations

import ast
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.oracle import oracle_for
from ppage_jax.oracle.translate import applies_to

ORACLE_DIR = Path(pj.__file__).parent / "oracle"


def test_default_params_translate_exactly():
    env = pj.make(
        None,
        {
            "agents.preys.stamina": 7,
            "env.termination.max_steps": None,
            "experiment.eval.max_steps": 100,
            "rewards.gamma": 0.9,
            "rewards.base.params": {"credit": "split"},
        },
    )
    oracle = oracle_for(env)
    assert (oracle.size, oracle.n_predators, oracle.n_prey, oracle.num_obstacles) == (10, 3, 3, 20)
    assert oracle.speeds == [1, 1, 1, 3, 3, 3]
    assert oracle.initial_stamina == [None, None, None, 7, 7, 7]
    assert oracle.max_steps is None and oracle.capture_threshold == 1
    assert oracle.gamma == pytest.approx(0.9)
    assert oracle.allow_cell_sharing and oracle.block_agents_by_obstacles
    np.testing.assert_array_equal(oracle.action_table, env.action_table)
    assert oracle.terms == [
        {
            "name": "base",
            "weight": 1.0,
            "applies_to": "all",
            "params": {
                "capture_reward": 100.0,
                "captured_penalty": 100.0,
                "credit": "split",
                "obstacle_penalty": 200.0,
                "step_cost": 5.0,
            },
        },
        {"name": "predator_distance", "weight": 0.5, "applies_to": "predator", "params": {}},
        {"name": "survival", "weight": 1.0, "applies_to": "prey", "params": {}},
    ]


def test_traced_params_are_read_back():
    env = pj.make(None, {"env.termination.max_steps": 40})
    params = env.with_weights(env.default_params, survival=-2.5)
    params = env.with_term_params(params, "base", credit="team", step_cost=0.25)
    params = params.replace(
        speeds=jnp.asarray([1, 1, 1, 2, 2, 1], jnp.int32),
        stamina=jnp.asarray([3, 2**30, 3, 2**30, 1, 0], jnp.int32),
        reward=params.reward.replace(role_masks=params.reward.role_masks.at[2].set(1.0)),
    )
    oracle = oracle_for(env, params)
    assert oracle.speeds == [1, 1, 1, 2, 2, 1] and oracle.max_steps == 40
    assert oracle.initial_stamina == [3, None, 3, None, 1, 0]
    base, _, survival = oracle.terms
    assert base["params"]["credit"] == "team" and base["params"]["step_cost"] == 0.25
    assert survival == {"name": "survival", "weight": -2.5, "applies_to": "all", "params": {}}


def test_role_masks_map_back_to_roles():
    is_predator = np.array([True, True, False])
    assert applies_to([1, 1, 0], is_predator) == "predator"
    assert applies_to([0, 0, 1], is_predator) == "prey"
    assert applies_to([1, 1, 1], is_predator) == "all"
    assert applies_to([0, 0], np.array([False, False])) == "predator"  # no predators: same pay
    with pytest.raises(ValueError, match=r"role mask \[1, 0, 1\] is not one of the roles"):
        applies_to([1, 0, 1], is_predator)


def test_unknown_term_is_refused_by_the_oracle():
    @pj.register_reward("translate_probe")
    def probe(ctx):
        """0."""
        return jnp.zeros(ctx.is_predator.shape, jnp.float32)

    try:
        env = pj.make(None, {"rewards.shaping": [{"name": "translate_probe"}]})
        with pytest.raises(ValueError, match="unknown reward term 'translate_probe'"):
            oracle_for(env)
    finally:
        pj.rewards.unregister_reward("translate_probe")


@pytest.mark.parametrize("path", sorted(ORACLE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_oracle_modules_never_import_jax(path):
    """Module level imports: NumPy, the standard library and the oracle itself only."""
    tree = ast.parse(path.read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    for name in names:
        assert not name.startswith("jax"), (path.name, name)
        assert not name.startswith("ppage_jax") or name.startswith("ppage_jax.oracle"), name
