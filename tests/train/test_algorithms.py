"""The algorithm contract: the registry, the Protocol, the hyperparameter declarations and the
documentation generated from them."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import types
from pathlib import Path

import jax
import pytest

import ppage_jax as pj
from ppage_jax.config import ConfigError, Field
from ppage_jax.config.experiment import algorithms as declared
from ppage_jax.config.experiment import base as hp
from ppage_jax.config.experiment import dqn, ppo, tabular
from ppage_jax.config.experiment import random as random_family
from ppage_jax.train import registry
from ppage_jax.train.algorithms import random as baseline
from ppage_jax.train.protocol import Algorithm, StochasticAlgorithm, missing_members

# The shipped algorithms and whether their policy is one to sample (STOCHASTIC).
SHIPPED = {
    "random": False,
    "ippo": True,
    "dqn": False,
    "iql": False,
    "cql": False,
    "mixed": False,
    "mappo": True,
}
REGISTERED = tuple(registry.ALGORITHMS)


@pytest.mark.parametrize("name", REGISTERED)
def test_every_registered_algorithm_satisfies_the_protocol(name):
    module = pj.train.algorithm(name)
    assert isinstance(module, Algorithm)
    # a module may serve several algorithms (tabular: iql, cql, mixed), each a subclass
    assert issubclass(registry.hyperparams_class(name), module.Hyperparams)
    assert isinstance(module.STOCHASTIC, bool)
    assert isinstance(module, StochasticAlgorithm) is module.STOCHASTIC
    assert missing_members(module) == []


def test_the_shipped_algorithms_declare_their_capabilities():
    assert set(SHIPPED) <= set(registry.ALGORITHMS)  # (other tests may re-insert entries)
    assert {name: pj.train.algorithm(name).STOCHASTIC for name in SHIPPED} == SHIPPED


def test_pj_train_is_the_package_and_train_agents_the_function(monkeypatch):
    """``pj.train`` is the training package, whatever submodule import bound it first;
    ``pj.train_agents`` trains. Calling the package still forwards to ``train_agents`` this
    release, with a DeprecationWarning."""
    import ppage_jax.train.registry  # noqa: F401  (a submodule import binds pj.train)
    from ppage_jax.train.run import experiment

    assert isinstance(pj.train, types.ModuleType) and pj.train.__name__ == "ppage_jax.train"
    assert pj.train.register_algorithm is registry.register_algorithm
    assert pj.train_agents is experiment.train_agents and "train_agents" in pj.__all__
    assert "train" not in pj.__all__
    monkeypatch.setattr(experiment, "train_agents", lambda *a, **k: (a, k))
    with pytest.warns(DeprecationWarning, match=r"pj\.train_agents\(\.\.\.\)"):
        assert pj.train(1, 2, hyperparams=3) == ((1, 2), {"hyperparams": 3})  # type: ignore[operator]
    with pytest.warns(DeprecationWarning, match=r"ppage_jax\.train\.train is deprecated"):
        from ppage_jax.train import train  # type: ignore[attr-defined]
    assert train is experiment.train_agents


@pytest.mark.parametrize("name", REGISTERED)
def test_every_default_passes_its_own_check_and_has_a_doc(name):
    cls = registry.hyperparams_class(name)
    assert hp.undeclared_fields(cls) == []
    for key, value in hp.defaults(cls).items():
        assert hp.checks(cls)[key].validate(value) == value, key
    assert hp.from_params(cls, hp.defaults(cls)) == cls()


def test_declarations_keep_the_documented_defaults():
    assert hp.defaults(ppo.IPPOHyperparams) == {
        "num_steps": 32,
        "gamma": 0.99,
        "learning_rate": 1e-3,
        "hidden_layers": [64, 64],
        "obs_scale": None,
        "reward_scale": 0.01,
        "anneal_lr": True,
        "normalize_rewards": False,
        "update_epochs": 2,
        "num_minibatches": 4,
        "gae_lambda": 0.95,
        "clip_eps": 0.2,
        "ent_coef": 0.01,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "activation": "tanh",
        "network": None,
        "encoder_width": 16,
        "teacher": None,
        "teacher_coef": 1.0,
        "teacher_fraction": 0.5,
        "prior": None,
        "prior_logit": 3.0,
    }
    assert hp.defaults(ppo.MAPPOHyperparams) == hp.defaults(ppo.IPPOHyperparams)
    q = hp.defaults(dqn.DQNHyperparams)
    assert (q["num_steps"], q["hidden_layers"], q["buffer_size"]) == (16, [128, 128], 50_000)
    assert hp.defaults(tabular.IQLHyperparams)["table_size"] == 262_144
    assert hp.defaults(tabular.CQLHyperparams)["table_size"] == 65_536
    assert tabular.MixedHyperparams().kinds == {"predator": "cql", "prey": "iql"}
    assert hp.defaults(random_family.RandomHyperparams) == {"num_steps": 32}


def test_an_unknown_hyperparameter_names_the_keys_and_its_owner():
    with pytest.raises(ConfigError) as err:
        pj.load_config(
            "1v1", {"experiment.algorithm": {"name": "dqn", "params": {"update_epochs": 3}}}
        )
    keys = sorted(hp.checks(dqn.DQNHyperparams))
    assert err.value.key == "experiment.algorithm.params.update_epochs"
    assert f"unknown hyperparameter of 'dqn'; its hyperparameters: {keys}" in str(err.value)
    assert "it belongs to ['ippo'" in str(err.value)  # (and any later algorithm with it)
    with pytest.raises(ConfigError, match="belongs to \\['iql', 'cql', 'mixed'"):
        pj.load_config("1v1", {"experiment.algorithm": {"name": "ippo", "params": {"alpha": 0.5}}})
    with pytest.raises(ConfigError, match="PPAGE reads it nowhere; use alpha"):
        pj.load_config(
            "1v1", {"experiment.algorithm": {"name": "iql", "params": {"cql_alpha": 0.5}}}
        )


def test_docs_hold_exactly_the_generated_tables(repo_root):
    text = (Path(repo_root) / "docs" / "training.md").read_text()
    assert text.count(declared.TABLES_START) == 1 and text.count(declared.TABLES_END) == 1
    assert "| `table_size` | `262144` |" in text.split("#### `iql`")[1]
    assert declared.with_tables(text) == text, (
        "docs/training.md is out of date: run python -m ppage_jax.config.experiment.algorithms "
        "docs/training.md"
    )


def test_with_tables_replaces_only_the_marked_block():
    start, end = declared.TABLES_START, declared.TABLES_END
    page = f"intro\n{start}\nstale\n{end}\noutro\n"
    assert declared.with_tables(page) == (
        f"intro\n{start}\n\n{declared.markdown_table()}\n{end}\noutro\n"
    )
    with pytest.raises(ValueError, match="has no"):
        declared.with_tables("no markers")


def test_markdown_table_renders_a_declaration():
    @dataclasses.dataclass(frozen=True)
    class Tiny(hp.Hyperparams):
        """A tiny ``learner``.

        Not in the table."""

        rate: float = hp.param(0.5, Field(float), "how fast", traced=True)

    assert declared.markdown_table({"tiny": Tiny}) == (
        "#### `tiny`\n\nA tiny `learner`.\n\n| key | default | allowed | traced | meaning |\n"
        "|---|---|---|---|---|\n"
        "| `num_steps` | `32` | an integer > 0 |  | turns per grid per update (one metrics row) |\n"
        "| `rate` | `0.5` | a number | yes | how fast |\n"
    )


# --------------------------------------------------------------------------- user algorithms
@dataclasses.dataclass(frozen=True)
class CoinHyperparams(hp.Hyperparams):
    """Random play with a configurable rollout (a user's algorithm)."""

    num_steps: int = hp.redefault(hp.Hyperparams, "num_steps", 8)
    bias: float = hp.param(0.0, Field(float, False, lambda v: -1 <= v <= 1, "in [-1, 1]"), "unused")


@pytest.fixture
def user_algorithm():
    """A module registered as algorithm ``coin`` (the random baseline's functions)."""
    module = types.ModuleType("coin_algorithm")
    for name in ("init", "update", "train", "policy_state", "greedy_actions"):
        setattr(module, name, getattr(baseline, name))
    module.Hyperparams, module.STOCHASTIC = CoinHyperparams, False
    sys.modules["coin_algorithm"] = module
    pj.train.register_algorithm("coin", "coin_algorithm", CoinHyperparams)
    yield module
    registry.unregister_algorithm("coin")
    sys.modules.pop("coin_algorithm", None)


def test_a_registered_algorithm_validates_and_trains(user_algorithm):
    from train_testing import tiny_config

    config = tiny_config("coin", {"bias": 1}, total_timesteps=16 * 8 * 2)
    assert config["experiment"]["algorithm"]["params"] == {"num_steps": 8, "bias": 1.0}
    with pytest.raises(ConfigError, match=r"its hyperparameters: \['bias', 'num_steps'\]"):
        tiny_config("coin", {"gamma": 0.5})
    with pytest.raises(ConfigError, match=r"must be a number in \[-1, 1\]"):
        tiny_config("coin", {"bias": 2})
    runner, metrics = pj.train_agents(jax.random.PRNGKey(0), config)
    assert metrics["capture_rate"].shape == (2,)
    assert int(runner.progress.env_steps) == 16 * 8 * 2


def test_registering_refuses_bad_entries(user_algorithm):
    with pytest.raises(ValueError, match="'coin' is already registered"):
        pj.train.register_algorithm("coin", "coin_algorithm", CoinHyperparams)

    @dataclasses.dataclass(frozen=True)
    class Bare(hp.Hyperparams):
        rate: float = 0.1

    with pytest.raises(TypeError, match=r"fields \['rate'\] need a check and a doc"):
        pj.train.register_algorithm("bare", "coin_algorithm", Bare)
    with pytest.raises(TypeError, match="must be a dataclass subclassing"):
        pj.train.register_algorithm("dict", "coin_algorithm", dict)
    assert "bare" not in registry.ALGORITHMS and "dict" not in registry.ALGORITHMS


def test_a_module_missing_part_of_the_contract_fails_clearly(user_algorithm):
    del user_algorithm.greedy_actions
    user_algorithm.STOCHASTIC = True
    with pytest.raises(TypeError, match=r"lacks \['greedy_actions', 'sample_actions'\]"):
        pj.train.algorithm("coin")


# --------------------------------------------------------------------------- shipped algorithms
def test_every_shipped_algorithm_is_named_once_by_its_declaration():
    """The shipped algorithms are the family modules' ``DECLARED`` tables joined; each one's
    module is ``ppage_jax.train.algorithms.<name>`` (or the shared module the registry lists),
    and every family module and every module of ``train/algorithms/`` takes part."""
    import pkgutil

    from ppage_jax.config import experiment
    from ppage_jax.train import algorithms

    families = {
        info.name
        for info in pkgutil.iter_modules(experiment.__path__)
        if hasattr(importlib.import_module(f"{experiment.__name__}.{info.name}"), "DECLARED")
    }
    assert families == {family.__name__.rpartition(".")[2] for family in declared.FAMILIES}
    assert dict(declared.SHIPPED) == {
        name: cls for family in declared.FAMILIES for name, cls in family.DECLARED.items()
    }
    shipped = {name: registry.ALGORITHMS[name] for name in declared.SHIPPED}
    assert shipped == {name: registry.shipped_module(name) for name in declared.SHIPPED}
    assert registry.shipped_module("ippo") == "ppage_jax.train.algorithms.ippo"
    assert registry.shipped_module("cql") == "ppage_jax.train.algorithms.tabular"
    modules = pkgutil.iter_modules(algorithms.__path__)
    assert {f"{algorithms.__name__}.{info.name}" for info in modules} == set(shipped.values())


@dataclasses.dataclass(frozen=True)
class FlipHyperparams(random_family.RandomHyperparams):
    """Random play, declared with a key of its own (a new shipped algorithm)."""

    fairness: float = hp.param(
        0.5, Field(float, False, lambda v: 0 <= v <= 1, "in [0, 1]"), "unused"
    )


FLIP_MODULE = '''"""``flip``: the random baseline under another name."""

from ppage_jax.train.algorithms.random import (
    STOCHASTIC,
    Hyperparams,
    greedy_actions,
    init,
    policy_state,
    train,
    update,
)
'''


@pytest.fixture
def flip(tmp_path, monkeypatch):
    """Algorithm ``flip`` added as a shipped one is: its file in ``train/algorithms/`` (here a
    folder added to that package's path) and its declaration."""
    from ppage_jax.train import algorithms

    (tmp_path / "flip.py").write_text(FLIP_MODULE)
    monkeypatch.setattr(algorithms, "__path__", [*algorithms.__path__, str(tmp_path)])
    pj.train.register_algorithm("flip", registry.shipped_module("flip"), FlipHyperparams)
    yield "flip"
    registry.unregister_algorithm("flip")
    sys.modules.pop("ppage_jax.train.algorithms.flip", None)


def test_adding_a_shipped_algorithm_is_one_module_plus_its_declaration(flip):
    from train_testing import tiny_config

    config = tiny_config(flip, {"fairness": 1})
    assert config["experiment"]["algorithm"]["params"] == {"num_steps": 32, "fairness": 1.0}
    with pytest.raises(ConfigError, match=r"must be a number in \[0, 1\]"):
        tiny_config(flip, {"fairness": 2})
    module = registry.algorithm(flip)
    assert module.__name__ == "ppage_jax.train.algorithms.flip"
    assert registry.hyperparams_class(flip) is FlipHyperparams
    assert pj.train.flip is module and isinstance(module, Algorithm)


def test_an_unregistered_algorithm_is_gone_from_both_tables(flip):
    registry.unregister_algorithm(flip)
    assert flip not in registry.ALGORITHMS and flip not in declared.ALGORITHM_PARAMS
    with pytest.raises(ConfigError, match="experiment.algorithm.name"):
        pj.load_config("1v1", {"experiment.algorithm": {"name": flip, "params": {}}})
    with pytest.raises(KeyError, match="unknown algorithm 'flip'"):
        registry.algorithm(flip)
