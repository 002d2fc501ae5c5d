"""Reward search: evosax strategies, the constraint, one compile for every generation, resume
to the same bytes, strict search files."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from sweep_testing import TINY as SWEEP_TINY

import ppage_jax as pj
from ppage_jax.analysis.batch.trainers import trainer_functions
from ppage_jax.analysis.search.constraint import judge, selection_order
from ppage_jax.analysis.search.run import search_rewards
from ppage_jax.analysis.search.space import Dimension
from ppage_jax.analysis.search.spec import Constraint, load_search
from ppage_jax.analysis.search.strategies import STRATEGIES, Strategy, rank_fitness
from ppage_jax.artifacts import OutputError
from ppage_jax.cli.main import main as cli_main
from ppage_jax.config import ConfigError, ConfigNotice

REPO = Path(__file__).resolve().parents[2]
TINY = {**SWEEP_TINY, "experiment.num_envs": 8}  # the sweep tests' scenario, 8 grids
IPPO = dict(TINY, **{"experiment.algorithm": {"name": "ippo", "params": {"num_steps": 4}}})
SPACE = {
    "weights.predator_distance": {"low": 0.0, "high": 1.0},
    "params.base.step_cost": {"low": 0.1, "high": 10.0, "scale": "log"},
}


def write_search(path: Path, **body) -> Path:
    body.setdefault("config", str(REPO / "configs/ablation/both"))
    body.setdefault("set", TINY)
    body.setdefault("space", SPACE)
    body.setdefault("population", 4)
    body.setdefault("seeds", 2)
    body.setdefault("generations", 3)
    body.setdefault("eval", {"episodes": 6})
    body.setdefault("audit", False)
    body.setdefault("references", {"base_only": {"disable": ["predator_distance", "survival"]}})
    body.setdefault("reevaluate", {"seeds": 2, "train_seed": 50, "eval_seed": 3000, "episodes": 6})
    body.setdefault("output_dir", str(path.parent / "out"))
    path.write_text(yaml.safe_dump({"search": body}, sort_keys=False))
    return path


# --------------------------------------------------------------------------- strategies
@pytest.mark.parametrize("name", ["cma_es", pytest.param("snes", marks=pytest.mark.slow)])
def test_the_strategy_wrapper_reaches_a_quadratics_optimum(name):
    target = np.array([0.2, 0.7, 0.4])
    strategy = Strategy(name, population=8, dims=3, seed=0, start=[0.5, 0.5, 0.5], std=0.2)
    for _ in range(40):
        pop = strategy.ask()
        losses = ((pop - target) ** 2).sum(axis=1)
        strategy.tell(rank_fitness(losses, [True] * len(losses)))
    np.testing.assert_allclose(strategy.mean(), target, atol=0.02)


def test_random_search_samples_the_start_distribution_and_replays_exactly():
    a = Strategy("random", population=64, dims=2, seed=3, std=0.2)
    b = Strategy("random", population=64, dims=2, seed=3, std=0.2)
    pop = a.ask()
    assert pop.shape == (64, 2)
    np.testing.assert_array_equal(pop, b.ask())
    assert a.mean() is None


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_starts_from_the_same_distribution(name):
    """CMA-ES, SNES, random search and PBT's first population: the same normal, mean
    ``start`` and standard deviation ``std`` in every unit coordinate."""
    from scipy import stats

    start, std, n = np.array([0.5, 0.2, 0.7]), 0.2, 4000
    pop = Strategy(name, population=n, dims=3, seed=1, start=start.tolist(), std=std).ask()
    assert pop.shape == (n, 3)
    np.testing.assert_allclose(pop.mean(axis=0), start, atol=4 * std / math.sqrt(n))
    np.testing.assert_allclose(pop.std(axis=0), std, rtol=0.05)
    for k in range(3):  # the whole marginal, not only its first two moments
        assert stats.kstest(pop[:, k], "norm", args=(start[k], std)).pvalue > 1e-3
    assert abs(np.corrcoef(pop.T)[0, 1]) < 0.1  # independent coordinates


def test_the_start_is_the_centre_the_design_or_a_declared_prior(tmp_path):
    path = write_search(tmp_path / "s.yaml", strategy={"name": "cma_es", "std": 0.3})
    centre = load_search(path)
    assert centre.start == (0.5, 0.5) and centre.start_from == "centre"
    design = load_search(path, {"start": "design"})
    assert design.start == tuple(d.unit(d.current(design.design)) for d in design.dims)
    prior = load_search(path, {"start": {"params.base.step_cost": 1.0}})
    assert prior.start == (0.5, pytest.approx(0.5)) and prior.start_from == "prior"
    prior = load_search(path, {"start": {"weights.predator_distance": 0.25}})
    assert prior.start == (0.25, 0.5)
    # another strategy from the command line keeps the file's step size: an equal start
    random = load_search(path, {"strategy": "random"})
    assert (random.strategy, random.std, random.start) == ("random", 0.3, (0.5, 0.5))
    with pytest.raises(ConfigError, match=r"search.start.weights.predator_distance = 2: must lie"):
        load_search(path, {"start": {"weights.predator_distance": 2}})


def test_a_winner_near_a_bound_is_named():
    from ppage_jax.analysis.search.space import bound_lines, near_bounds

    dims = [
        Dimension("weights.x", "weights", "x", None, 0.0, 1.0),
        Dimension("params.base.step_cost", "params", "base", "step_cost", 0.01, 1.0, "log"),
        Dimension("weights.y", "weights", "y", None, 0.0, 2.0),
    ]
    # x at 0.97 (within 5 % of the top), step_cost at 0.012 (within 5 % of the log box of the
    # bottom), y in the middle
    assert near_bounds(dims, [0.97, 0.012, 1.0]) == [
        ("weights.x", "high", 1.0, 0.97),
        ("params.base.step_cost", "low", 0.01, 0.012),
    ]
    assert near_bounds(dims, [0.94, 0.02, 0.05]) == [("weights.y", "low", 0.0, 0.05)]
    assert bound_lines(dims, [1.0, 0.1, 1.0]) == [
        "`weights.x` = 1 lies within 5% of the box's width of its high bound (1): the bound "
        "may be the answer; widen it and search again."
    ]


def test_unit_coordinates_map_to_the_bounds_linearly_or_logarithmically():
    lin = Dimension("weights.x", "weights", "x", None, 0.0, 0.5)
    log = Dimension("params.base.step_cost", "params", "base", "step_cost", 0.01, 1.0, "log")
    assert lin.value(0.5) == 0.25 and lin.value(1.7) == 0.5 and lin.value(-1) == 0.0
    assert log.value(0.5) == pytest.approx(0.1) and log.unit(0.1) == pytest.approx(0.5)


# --------------------------------------------------------------------------- constraint
def run(metric: float, hacked: bool) -> dict[str, float]:
    return {
        "rmst": metric,
        "monitor/hacking/predator": float(hacked),
        "monitor/share/predator/predator_distance": 0.0,
    }


def test_infeasible_candidates_rank_after_every_feasible_one():
    on = Constraint()
    # the fastest candidate (rmst 5) is flagged in 2 of 3 seeds: infeasible, and says why
    gamed = judge({0: run(5, True), 1: run(5, True), 2: run(5, False)}, "rmst", -1, on)
    assert not gamed.feasible and gamed.metric == 5.0 and gamed.loss == 5.0
    assert gamed.reason == ("the reward-hacking monitor flagged 2 of 3 seeds (hacking/predator)")
    # flagged in 1 of 2 seeds is not a majority: feasible
    honest = judge({0: run(9, True), 1: run(11, False)}, "rmst", -1, on)
    assert honest.feasible and honest.metric == 10.0 and honest.flagged == {0: ["hacking/predator"]}
    slow = judge({0: run(30, False), 1: run(40, False)}, "rmst", -1, on)
    ranks = rank_fitness([gamed.loss, honest.loss, slow.loss], [False, True, True])
    assert ranks.tolist() == [2.0, 0.0, 1.0]
    cands = [
        {"feasible": v.feasible, "loss": v.loss, "generation": 0, "index": i}
        for i, v in enumerate((gamed, honest, slow))
    ]
    assert selection_order(cands) == [1, 2, 0]
    # without the constraint the gamed candidate wins
    off = judge({0: run(5, True), 1: run(5, True)}, "rmst", -1, Constraint(monitor=False))
    assert off.feasible and off.flagged == {}
    # a higher-is-better metric, and a Kaplan-Meier median never reached counting as the cap
    rate = judge({0: {"capture_rate": 0.75}}, "capture_rate", +1, on)
    assert rate.loss == -0.75
    km = judge({0: {"km_median": math.inf}, 1: {"km_median": 10.0}}, "km_median", -1, on, 12)
    assert km.metric == 11.0
    # opt-in: an audit flag named by the constraint makes the design infeasible before training
    audited = Constraint(audit=("stalling",))
    stalls = judge({0: run(9, False)}, "rmst", -1, audited, audit_flags=["dead_term", "stalling"])
    assert not stalls.feasible and stalls.reason == "the reward audit flagged stalling"
    assert judge({0: run(9, False)}, "rmst", -1, on, audit_flags=["stalling"]).feasible


# --------------------------------------------------------------------------- stall margin
def test_the_stall_margin_constraint_on_three_concrete_designs():
    from ppage_jax.analysis.audit.margin import stall_margins
    from ppage_jax.analysis.search.constraint import margin_reason
    from ppage_jax.analysis.search.space import candidate_arm

    spec = load_search(
        REPO / "configs/studies/reward_design/search.yaml", {"constraint": {"stall_margin": 0}}
    )
    assert spec.constraint.stall_margin == 0.0
    env = pj.make(spec.config)

    def reason(values: list[float]) -> tuple[float, str]:
        arm = candidate_arm(spec.design, spec.dims, values, "x")
        margins = stall_margins(env, spec.sweep((arm,)).arm_params(env)[0])
        return margins["predator"]["margin"], margin_reason(margins, spec.constraint.stall_margin)

    # keys: predator_closeness, potential_distance, predator_cohesion, base.step_cost
    hybrid = reason([0.05, 0.0, 0.0, 0.1])  # closeness 0.05 against a cost of 0.1: kept
    assert hybrid == (pytest.approx(-0.05), "")
    potential = reason([0.0, 1.0, 0.0, 0.1])  # potential-based terms are not direct: kept
    assert potential == (pytest.approx(-0.1), "")
    farmed = reason([0.05, 0.0, 1.0, 0.1])  # the pack bonus pays 1 a sub-step: refused
    assert farmed[0] == pytest.approx(0.95)
    assert farmed[1] == (
        "stall margin +0.95 > +0: a sub-step without a capture can pay predators 1.05 "
        "(predator_closeness up to 0.05, predator_cohesion up to 1) against a cost of 0.1 "
        "(not trained)"
    )
    # the limit is the file's: a looser one keeps the farmable design
    assert margin_reason({"predator": {"margin": 0.95}}, 1.0) == ""
    assert margin_reason({"predator": {"margin": 0.95}}, None) == ""


def test_candidates_that_break_the_stall_margin_are_not_trained(tmp_path):
    """Predators paid for distance at a negative weight are paid to keep the prey far: the
    constraint refuses those candidates before training; they rank last with the reason."""
    space = {"weights.predator_distance": {"low": -4.0, "high": 1.0}}
    spec = load_search(
        write_search(
            tmp_path / "s.yaml",
            space=space,
            strategy="random",
            generations=1,
            seeds=1,
            constraint={"stall_margin": 0},
        )
    )
    logs: list[str] = []
    summary = search_rewards(spec, tmp_path / "out", progress=False, log=logs.append)
    cands = summary["candidates"]
    refused = [c for c in cands if not c.get("trained", True)]
    kept = [c for c in cands if c.get("trained", True)]
    assert refused and kept  # the seed gives both kinds
    for c in refused:
        assert c["values"][0] < 0 and c["seeds"] == [] and not c["feasible"]
        assert c["reason"].startswith("stall margin +") and c["stall_margin"] > 0
        assert c["reason"].endswith("(not trained)")
        assert any(line.endswith(c["reason"]) and c["name"] in line for line in logs)
    for c in kept:
        assert c["stall_margin"] <= 0 and c["seeds"] == [0] and math.isfinite(c["metric"])
    assert summary["compile_calls"] == 1  # the padded generation reuses the program
    assert summary["best"]["name"] in {c["name"] for c in kept}
    with open(tmp_path / "out" / "search.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["candidate"] for r in rows if r["seed"] == ""} == {c["name"] for c in refused}
    report = (tmp_path / "out" / "report.md").read_text()
    assert "is not trained: it is recorded and ranks last" in report
    assert all(c["reason"] in report for c in refused)


# --------------------------------------------------------------------------- search files
@pytest.mark.parametrize(
    "edit, key, words",
    [
        (
            {"space": {"weights.nope": {"low": 0, "high": 1}}},
            "search.space.weights.nope",
            "unknown reward term",
        ),
        ({"space": {}}, "search.space", "must be a non-empty mapping"),
        (
            {"space": {"weights.survival": {"low": 1.0, "high": 0.5}}},
            "search.space.weights.survival.low",
            "must be below high (0.5)",
        ),
        ({"population": 3}, "search.population", "must be at least 4 for strategy 'cma_es'"),
        (
            {"space": {"params.base.step_cost": {"low": 0.0, "high": 1.0, "scale": "log"}}},
            "search.space.params.base.step_cost.low",
            "must be above 0 for scale: log",
        ),
        (
            {"space": {"params.base.credit": {"low": 0, "high": 1}}},
            "search.space.params.base.credit",
            "is a choice",
        ),
        ({"eval": {"metric": "steps_to_capture"}}, "search.eval.metric", "survivor-biased"),
        (
            {"reevaluate": {"seeds": 2, "train_seed": 1, "eval_seed": 3000, "episodes": 6}},
            "search.reevaluate.train_seed",
            "overlap the search's training seeds",
        ),
        ({"budget": 3}, "search.budget", "unknown key"),
        ({"constraint": {"audit": ["nope"]}}, "search.constraint.audit", "must be a list of"),
        ({"constraint": {"audit": ["stalling"]}}, "search.constraint.audit", "needs the audit"),
        (
            {"set": IPPO, "space": {"hyperparams.learning_rate": {"low": -0.01, "high": 0.1}}},
            "search.space.hyperparams.learning_rate.low",
            "outside the declared range of ippo's learning_rate: must be a number > 0",
        ),
        (
            {"set": IPPO, "space": {"hyperparams.gae_lambda": {"low": 0.5, "high": 2.0}}},
            "search.space.hyperparams.gae_lambda.high",
            "outside the declared range of ippo's gae_lambda: must be a number in [0, 1]",
        ),
        (
            {"space": {"weights.survival": {"low": 0.0, "high": 1e39}}},
            "search.space.weights.survival.high",
            "outside the range of a weight of survival: must be finite in float32",
        ),
        (
            {"space": {"weights.survival": {"low": 0.0, "high": math.inf}}},
            "search.space.weights.survival.high",
            "must be a finite number",
        ),
        (
            {"space": {"params.base.step_cost": {"low": 1e-50, "high": 1.0, "scale": "log"}}},
            "search.space.params.base.step_cost.low",
            "outside the range of a param of base: a non-zero number must be at least 1.175e-38",
        ),
        (
            {
                "space": {"params.base.step_cost": {"low": 0.1, "high": 1.0}},
                "constraint": {"stall_margin": 0},
            },
            "search.constraint.stall_margin",
            "the space searches no direct term",
        ),
        (
            {"generations": 10**12},
            "search.generations",
            "the search (1,000,000,000,000 generations x 8 runs x 64 env steps) plans 5.12e+14 "
            "env steps: at least 1.62 years even at 1e+07 env steps/s",
        ),
    ],
)
def test_bad_search_files_give_one_line_naming_the_file_and_key(tmp_path, edit, key, words):
    path = write_search(tmp_path / "bad.yaml", **edit)
    with pytest.raises(ConfigError) as err:
        load_search(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {key} = ")
    assert words in message


def test_a_population_whose_generation_cannot_fit_in_memory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("ppage_jax.config.experiment.section.physical_memory", lambda: 2**30)
    path = write_search(tmp_path / "big.yaml", population=10**6)
    with pytest.raises(ConfigError) as err:
        load_search(path)
    assert str(err.value) == (
        f"{path}: search.population = 1000000: 16,000,000 grids at once (1000000 candidates "
        f"x 2 seeds x 8 experiment.num_envs grids, training) hold at least 1.59 GiB of state "
        f"(107 bytes each; rollouts and networks need more), more than this machine's 1 GiB "
        f"of memory"
    )
    monkeypatch.setattr("ppage_jax.config.experiment.section.physical_memory", lambda: 4 * 2**30)
    with pytest.warns(ConfigNotice) as record:  # fits, but is announced
        load_search(path)
    assert [str(r.message).split(" hold ")[0] for r in record] == [
        "search.population = 1000000: 16,000,000 grids at once (1000000 candidates x 2 seeds "
        "x 8 experiment.num_envs grids, training)",
        "search.population = 1000000: 12,000,000 grids at once (1000000 candidates x 2 seeds "
        "x 6 search.eval.episodes, evaluation)",
    ]


def test_a_long_search_is_announced_with_its_plan(tmp_path):
    with pytest.warns(ConfigNotice) as record:
        load_search(write_search(tmp_path / "long.yaml", generations=10**9))
    assert [str(r.message) for r in record] == [
        "search.generations = 1000000000: the search (1,000,000,000 generations x 8 runs x 64 "
        "env steps) plans 5.12e+11 env steps: at least 14.2 h even at 1e+07 env steps/s (a "
        "2-core CPU trains 4e+03 - 1.4e+04)"
    ]


def test_candidates_never_leave_the_bounds_and_outside_proposals_are_named():
    from ppage_jax.analysis.search.space import candidate_values, outside_box

    dims = [
        Dimension("hyperparams.gae_lambda", "hyperparams", "gae_lambda", None, 0.3, 1.0, "log"),
        Dimension("weights.x", "weights", "x", None, 0.0, 0.5),
    ]
    unit = np.array([[1.0, 0.5], [1.7, 0.2], [0.4, 0.9]])
    assert outside_box(dims, unit) == ["hyperparams.gae_lambda"]
    assert outside_box(dims, unit - 0.95) == ["hyperparams.gae_lambda", "weights.x"]
    values = candidate_values(dims, unit)
    assert values[:, 0].max() == 1.0 and values[1, 0] == 1.0  # clipped, never above
    assert values[:, 1].tolist() == [0.25, 0.1, 0.45]


def test_the_cli_names_the_file_and_key_of_a_bad_search(tmp_path, capsys):
    path = write_search(tmp_path / "bad.yaml", population=2)
    assert cli_main(["search", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"config error: {path}: search.population = 2: must be at least 4 for strategy 'cma_es'"
    )


def test_the_shipped_search_file_is_valid():
    spec = load_search(REPO / "configs/studies/reward_design/search.yaml")
    assert [d.key for d in spec.dims] == [
        "weights.predator_closeness",
        "weights.potential_distance",
        "weights.predator_cohesion",
        "params.base.step_cost",
    ]
    assert [r.name for r in spec.references] == ["hybrid", "potential"]
    assert spec.sweep().terms == (
        "base",
        "predator_closeness",
        "potential_distance",
        "predator_cohesion",
    )
    assert [d.current(spec.design) for d in spec.dims] == [0.05, 0.0, 0.0, 0.1]
    assert spec.strategy == "cma_es" and spec.metric == "rmst" and spec.constraint.monitor
    assert load_search(spec.path, {"strategy": "random"}).strategy == "random"
    # the study's learner at the study's full budget (hybrid/), from the box's centre
    study = pj.load_config(REPO / "configs/studies/reward_design/hybrid")["experiment"]
    assert spec.config["experiment"]["total_timesteps"] == study["total_timesteps"] == 393216
    assert spec.config["experiment"]["algorithm"] == study["algorithm"]
    assert spec.start == (0.5,) * 4 and spec.std == 0.3
    # small (2-core CPU) and full (accelerator) settings, every strategy at 24 / 512 runs
    assert spec.setting == "small" and spec.runs == 24
    assert spec.reevaluate.seeds >= 8 and spec.reevaluate.episodes >= 512
    assert spec.compare is not None and spec.compare.reference == "hybrid"
    assert spec.compare.searches >= 3
    assert {"cma_es", "random", "pbt"} <= set(spec.compare.strategies)
    assert load_search(spec.path, {"strategy": "pbt"}).runs == 24
    full = load_search(spec.path, None, "full")
    assert (full.setting, full.runs, load_search(spec.path, {"strategy": "pbt"}, "full").runs) == (
        "full",
        512,
        512,
    )
    assert full.compare is not None and "snes" in full.compare.strategies


def test_a_searched_hyperparameter_becomes_each_candidates_traced_value(tmp_path):
    from ppage_jax.analysis.search.space import candidate_arm

    ippo = dict(TINY, **{"experiment.algorithm": {"name": "ippo", "params": {"num_steps": 4}}})
    space = {"hyperparams.learning_rate": {"low": 1e-4, "high": 1e-2, "scale": "log"}}
    spec = load_search(write_search(tmp_path / "s.yaml", set=ippo, space=space))
    (dim,) = spec.dims
    assert spec.design.hyperparams == {"learning_rate": dim.current(spec.design)}
    arm = candidate_arm(spec.design, spec.dims, [1e-3], "g00c00")
    assert arm.hyperparams == {"learning_rate": 1e-3}
    hyper = spec.sweep((arm, *spec.references)).arm_hyperparams()
    assert [h["learning_rate"] for h in hyper] == [1e-3, pytest.approx(dim.current(spec.design))]
    with pytest.raises(ConfigError, match="search.space.hyperparams.hidden_layers = "):
        load_search(
            write_search(
                tmp_path / "t.yaml",
                set=ippo,
                space={"hyperparams.hidden_layers": {"low": 1, "high": 2}},
            )
        )


# --------------------------------------------------------------------------- one search, resumed
def read(path: Path) -> bytes:
    return path.read_bytes()


OUTPUTS = (
    "search.csv",
    "audit.csv",
    "report.md",
    "rewards.yaml",
    "reevaluation/results.csv",
    "reevaluation/episodes.csv",
)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A tiny search (random learner, 3 generations of 4 candidates x 2 seeds) run whole
    with a trace-counting train function, then the same search stopped after its first
    generation and resumed in another directory (the same process: the compiled programs are
    reused)."""
    tmp = tmp_path_factory.mktemp("search")
    spec = load_search(write_search(tmp / "s.yaml"))
    train_fn, _, _ = trainer_functions(spec.sweep(), pj.make(spec.config))
    traces = []

    def counted(key, params):
        traces.append(1)
        return train_fn(key, params)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        whole = search_rewards(spec, tmp / "whole", progress=False, train_fn=counted)
    whole["notices"] = [str(w.message) for w in caught if w.category is ConfigNotice]
    asks = iter([False, True])
    logs: list[str] = []
    part = search_rewards(
        spec, tmp / "resumed", progress=False, train_fn=counted, should_stop=lambda: next(asks)
    )
    rest = search_rewards(
        spec, tmp / "resumed", progress=False, train_fn=counted, resume=True, log=logs.append
    )
    return spec, tmp, whole, traces, part, rest


@pytest.mark.slow  # a whole search: the module fixture takes minutes
def test_every_generation_reuses_one_compiled_program(searched):
    spec, _, whole, traces, part, rest = searched
    assert whole["generations_run"] == 3 and len(whole["candidates"]) == 12
    # one trace for the generations' program (3 generations), one for the re-evaluation's;
    # the interrupted and the resumed search reuse both executables
    assert len(traces) == 2
    assert (whole["compile_calls"], part["compile_calls"], rest["compile_calls"]) == (1, 0, 0)


@pytest.mark.slow  # a whole search (module fixture)
def test_proposals_outside_the_space_are_announced_once_per_key(searched):
    from ppage_jax.analysis.search.space import outside_box

    spec, _, whole, _, _, _ = searched
    expected, said = [], set()
    for g in range(spec.generations):
        unit = [c["unit"] for c in whole["candidates"] if c["generation"] == g]
        keys = [k for k in outside_box(spec.dims, np.array(unit)) if k not in said]
        said.update(keys)
        if keys:
            expected.append(
                f"search generation {g}: cma_es proposed values outside the search space for "
                f"{keys}; they are clipped to the bounds (said once per key)"
            )
    assert whole["notices"] == expected


def test_clipped_proposals_are_announced_once_per_key(tmp_path):
    from ppage_jax.analysis.search.run import announce_clipped

    spec = load_search(write_search(tmp_path / "s.yaml"))
    said: set[str] = set()
    with pytest.warns(ConfigNotice) as record:
        announce_clipped(spec, 0, np.array([[1.2, 0.5], [0.3, 0.4]]), said)
        announce_clipped(spec, 1, np.array([[1.5, -0.1], [0.3, 0.4]]), said)
    announce_clipped(spec, 2, np.array([[2.0, -0.5]]), said)  # both named before: silent
    assert [str(r.message) for r in record] == [
        "search generation 0: cma_es proposed values outside the search space for "
        "['weights.predator_distance']; they are clipped to the bounds (said once per key)",
        "search generation 1: cma_es proposed values outside the search space for "
        "['params.base.step_cost']; they are clipped to the bounds (said once per key)",
    ]


@pytest.mark.slow  # a whole search (module fixture)
def test_resume_is_byte_identical(searched):
    _, tmp, _, _, part, rest = searched
    assert part["stopped"] and part["generations_run"] == 1
    assert rest["generations_run"] == 2 and not rest["stopped"]
    for name in OUTPUTS:
        assert read(tmp / "resumed" / name) == read(tmp / "whole" / name), name


@pytest.mark.slow  # a whole search (module fixture)
def test_search_csv_rows_and_the_selected_rewards_yaml(searched):
    spec, tmp, whole, _, _, _ = searched
    with open(tmp / "whole" / "search.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "generation",
        "candidate",
        "weights.predator_distance",
        "params.base.step_cost",
        "seed",
        "metric",
        "flagged",
        "feasible",
    ]
    assert len(rows) == 3 * 4 * 2
    assert [(r["generation"], r["candidate"], r["seed"]) for r in rows[:3]] == [
        ("0", "g00c00", "0"),
        ("0", "g00c00", "1"),
        ("0", "g00c01", "0"),
    ]
    for r in rows:
        assert 0.0 <= float(r["weights.predator_distance"]) <= 1.0
        assert 0.1 <= float(r["params.base.step_cost"]) <= 10.0
        assert 0.0 < float(r["metric"]) <= 12.0  # RMST censored at the 12-turn limit
    best = whole["best"]
    rewards = yaml.safe_load((tmp / "whole" / "rewards.yaml").read_text())["rewards"]
    assert rewards["base"]["params"]["step_cost"] == pytest.approx(best["values"][1])
    shaping = {t["name"]: t["weight"] for t in rewards["shaping"]}
    assert shaping["predator_distance"] == pytest.approx(best["values"][0])
    # the selected design loads as a config's rewards
    cfg = pj.load_config("configs/ablation/both", {"rewards.shaping": rewards["shaping"], **TINY})
    assert cfg["rewards"]["shaping"][0]["name"] == "predator_distance"


@pytest.mark.slow  # a whole search (module fixture)
def test_the_report_reevaluates_on_fresh_seeds_against_the_references(searched):
    _, tmp, whole, _, _, _ = searched
    report = (tmp / "whole" / "report.md").read_text()
    assert "## Re-evaluation on fresh seeds and layouts" in report
    assert "fresh training seeds 50-51 (the search trained on 0-1)" in report
    assert "| selected | 2 |" in report and "| base_only | 2 |" in report
    assert "Selection bias:" in report and "Verdict: the selected design is" in report
    assert "![progress](progress.png)" in report and (tmp / "whole" / "weights.png").is_file()
    with open(tmp / "whole" / "reevaluation" / "episodes.csv", newline="") as fh:
        episodes = list(csv.DictReader(fh))
    assert len(episodes) == 2 * 2 * 6  # (selected, base_only) x 2 seeds x 6 layouts
    assert {r["arm"] for r in episodes} == {"selected", "base_only"}


@pytest.mark.slow  # a whole search (module fixture)
def test_strategies_compare_at_an_equal_budget_on_the_same_layouts(searched):
    from ppage_jax.analysis.search.compare import compare_searches

    _, tmp, whole, _, _, _ = searched
    text = compare_searches({"first": tmp / "whole", "again": tmp / "resumed"}, tmp)
    assert "Equal budget: 3 generations x 4 candidates x 2 seeds each" in text
    assert "| first | again | 0.5 [" in text  # the same design on the same layouts: a tie
    assert (tmp / "compare.png").is_file()


@pytest.mark.slow  # a whole search (module fixture)
def test_an_existing_search_is_refused_without_resume_or_overwrite(searched):
    spec, tmp, _, _, _, _ = searched
    with pytest.raises(OutputError, match="already holds a search .*--resume.*--overwrite"):
        search_rewards(spec, tmp / "whole", progress=False)


def test_the_cli_refuses_a_directory_holding_a_search(tmp_path, capsys):
    path = write_search(tmp_path / "s.yaml")
    out = tmp_path / "taken"
    out.mkdir()
    (out / "search.csv").write_text("generation\n")
    assert cli_main(["search", str(path), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"error: search directory {out} already holds a search (search.csv); continue it "
        "with --resume, replace it with --overwrite, or choose another output directory"
    )


# --------------------------------------------------------------------------- slow: end to end
@pytest.mark.slow
def test_a_killed_search_resumes_in_a_new_process_to_the_same_bytes(tmp_path):
    from cli_testing import cli_env, run_cli

    path = write_search(tmp_path / "s.yaml", generations=2)

    def cli(out: Path, *extra: str, fault: str | None = None):
        args = ["search", str(path), "--out", str(out), "--no-progress", *extra]
        return run_cli(args, cli_env(tmp_path / "cache", fault))

    assert cli(tmp_path / "whole").returncode == 0
    killed = cli(tmp_path / "killed", fault="commit:2")  # before generation 1's commit
    assert killed.returncode == -9
    resumed = cli(tmp_path / "killed", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "1 generation(s) run now" in resumed.stdout
    for name in OUTPUTS:
        assert read(tmp_path / "killed" / name) == read(tmp_path / "whole" / name), name


@pytest.mark.slow
def test_hacked_designs_are_infeasible_and_the_audit_is_recorded(tmp_path):
    # tests/cli's hacked run: IPPO predators paid to keep away from a prey fixed between them
    # (predator_distance at weight -5). Every candidate of this space is that hack.
    from cli_testing import HACKED, HACKED_EXPERIMENT, write_run_config

    config = write_run_config(tmp_path / "config", HACKED, **HACKED_EXPERIMENT)
    path = write_search(
        tmp_path / "s.yaml",
        config=str(config),
        set={},
        space={"weights.predator_distance": {"low": -5.0, "high": -4.5}},
        strategy="random",
        population=2,
        seeds=1,
        generations=1,
        eval={"seed": 1000, "episodes": 8},
        audit={"episodes": 2},
        references={"honest": {"weights": {"predator_distance": 0.0}}},
        reevaluate={"seeds": 1, "train_seed": 50, "eval_seed": 3000, "episodes": 8},
    )
    logs: list[str] = []
    summary = search_rewards(load_search(path), progress=False, log=logs.append)
    cands = summary["candidates"]
    assert [c["feasible"] for c in cands] == [False, False]
    assert logs[0] == (
        "search generation 0: g00c00 is infeasible: the reward-hacking monitor flagged 1 of 1 "
        "seeds (episode_length/predator, hacking/predator)"
    )
    assert any(m.startswith("search: no candidate was feasible") for m in logs)
    out = Path(summary["output_dir"])
    with open(out / "audit.csv", newline="") as fh:
        audited = {row["arm"] for row in csv.DictReader(fh)}
    assert audited == {"g00c00", "g00c01"}
    report = (out / "report.md").read_text()
    assert "- g00c00 (weights.predator_distance=" in report
    assert "INFEASIBLE: the reward-hacking monitor flagged 1 of 1 seeds" in report


def test_pairing_over_layouts_resamples_whole_runs():
    from ppage_jax.stats.bootstrap import probability_of_improvement_ci

    # run 0 of x beats y on every layout, run 1 loses on every layout: resampling whole runs
    # can draw run 0 twice (P = 1) or run 1 twice (P = 0)
    x = np.array([[1.0] * 10, [0.0] * 10])
    y = np.full((2, 10), 0.5)
    joint = probability_of_improvement_ci(x, y, joint=True)
    assert (joint.point, joint.low, joint.high) == (0.5, 0.0, 1.0)
    # resampled layout by layout, the runs' luck averages out: a narrower (wrong) interval
    apart = probability_of_improvement_ci(x, y)
    assert apart.point == 0.5 and 0.2 < apart.low < apart.high < 0.8
