"""Repeated searches and strategies compared as strategies: settings, independent searches
at an equal budget, the references re-evaluated once, seed-level statistics with Holm over
the declared family, selection bias per pick, the landscape from random-search samples."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from test_search import write_search

from ppage_jax.analysis.search.compare import compare_strategies, permutation_p
from ppage_jax.analysis.search.repeat import repeated_spec, search_dir, seed_block
from ppage_jax.analysis.search.spec import load_search
from ppage_jax.config import ConfigError

COMPARE = {"strategies": ["cma_es", "random"], "searches": 3, "pairs": [["cma_es", "random"]]}
SETTINGS = {
    "small": {"population": 4, "seeds": 1, "generations": 2},
    "full": {"population": 8, "seeds": 2, "generations": 4, "reevaluate": {"seeds": 4}},
}


# --------------------------------------------------------------------------- settings
def test_a_search_file_declares_a_small_and_a_full_setting(tmp_path):
    path = write_search(tmp_path / "s.yaml", settings=SETTINGS, compare=COMPARE)
    small = load_search(path)  # the first declared setting by default
    assert (small.setting, small.population, small.seeds, small.generations) == ("small", 4, 1, 2)
    full = load_search(path, None, "full")
    assert (full.setting, full.population, full.seeds, full.generations) == ("full", 8, 2, 4)
    # a mapping of a setting merges into the file's: the re-evaluation keeps its seeds block
    assert (full.reevaluate.seeds, full.reevaluate.train_seed) == (4, 50)
    assert load_search(path, {"generations": 1}, "full").generations == 1  # overrides win
    assert full.describe()["setting"] == "full" and full.runs == 8 * 2 * 4


@pytest.mark.parametrize(
    "edit, setting, key, words",
    [
        ({"settings": SETTINGS}, "huge", "search.settings", "has no setting 'huge'"),
        ({}, "full", "search.settings", "declares no settings"),
        ({"settings": {"small": {"space": {}}}}, None, "search.settings.small.space", "unknown"),
        (
            {"compare": {"strategies": ["cma_es", "nope"]}},
            None,
            "search.compare.strategies",
            "must be a list of distinct strategies",
        ),
        (
            {"compare": {"reference": "hybrid"}},
            None,
            "search.compare.reference",
            "must be one of the references ['base_only']",
        ),
        (
            {"compare": {"strategies": ["cma_es", "random"], "pairs": [["cma_es", "pbt"]]}},
            None,
            "search.compare.pairs[0]",
            "must be two different strategies",
        ),
    ],
)
def test_bad_settings_and_comparisons_name_the_file_and_key(tmp_path, edit, setting, key, words):
    path = write_search(tmp_path / "bad.yaml", **edit)
    with pytest.raises(ConfigError) as err:
        load_search(path, None, setting)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: {key} = ") and words in message


def test_repeated_searches_are_independent_and_share_the_budget(tmp_path):
    path = write_search(
        tmp_path / "s.yaml",
        compare=COMPARE,
        pbt={"population": 8, "interval": 1},
        reevaluate={"seeds": 2, "train_seed": 500, "eval_seed": 3000, "episodes": 6},
    )
    base = load_search(path)
    assert seed_block(base) == 8  # PBT's 8 members: the largest block of training seeds
    specs = {(s, k): repeated_spec(path, s, k) for s in ("cma_es", "random", "pbt") for k in (0, 2)}
    for (strategy, k), spec in specs.items():
        assert spec.strategy == strategy and spec.seed == base.seed + k
        assert spec.train_seed == base.train_seed + 8 * k  # disjoint blocks, search by search
        assert (spec.start, spec.std) == (base.start, base.std)  # equal starts
        assert spec.reevaluate == base.reevaluate and spec.eval_seed == base.eval_seed
    # PBT's 8 members against 4 candidates x 2 seeds x 1 generation... unequal here: declared
    assert specs["cma_es", 0].runs == 4 * 2 * 3 and specs["pbt", 0].runs == 8
    assert search_dir(tmp_path, "pbt", 2) == tmp_path / "pbt" / "search_2"


# --------------------------------------------------------------------------- statistics
def test_the_exact_permutation_test_enumerates_every_relabelling():
    assert permutation_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)  # 2 of 20
    assert permutation_p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert permutation_p([1.0], [2.0, 3.0]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        permutation_p([], [1.0])


def write_finished(directory: Path, name: str, score: float, per_seed: dict[int, float], runs=8):
    """A finished search directory as the comparison reads it: pick.json and the selected
    design's re-evaluation."""
    (directory / "reevaluation").mkdir(parents=True)
    (directory / "pick.json").write_text(
        json.dumps({"name": name, "values": [0.1], "search_score": score, "runs": runs})
    )
    with open(directory / "reevaluation" / "results.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["arm", "seed", "metric", "value"])
        for seed, value in per_seed.items():
            writer.writerow(["selected", seed, "rmst", repr(value)])


def test_strategies_are_compared_at_the_seed_level_with_holm(tmp_path):
    path = write_search(tmp_path / "s.yaml", compare=COMPARE)
    spec = load_search(path)
    root = tmp_path / "root"
    seeds = range(50, 58)  # 8 fresh training seeds
    ref = {s: 10.0 + 0.1 * (s - 50) for s in seeds}
    rng = np.random.default_rng(0)
    for k in range(3):  # CMA-ES's picks capture 3 turns sooner than the reference on every seed
        write_finished(
            root / "cma_es" / f"search_{k}",
            "g02c01",
            5.0 + k,
            {s: ref[s] - 3.0 + 0.1 * rng.random() for s in seeds},
        )
        write_finished(  # random's picks: no better than the reference, flattered in the search
            root / "random" / f"search_{k}",
            "g01c03",
            4.0 + k,
            {s: ref[s] + (0.5 if s % 2 else -0.5) for s in seeds},
        )
    (root / "references" / "reevaluation").mkdir(parents=True)
    with open(root / "references" / "reevaluation" / "results.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["arm", "seed", "metric", "value"])
        for s, v in ref.items():
            writer.writerow(["base_only", s, "rmst", repr(v)])
    text = compare_strategies(root, spec, ["cma_es", "random"])
    assert "6 searches (cma_es: 3, random: 3), each 8 training runs" in text
    assert "an equal budget" in text
    # every pick: search score, re-evaluated score and the bias between them
    assert "| random | 0 | g01c03 | 4 | 10.35 | +6.35 |" in text
    # the family: each strategy's picks vs the reference (8 paired seeds: exact p = 2/256),
    # the declared pair (3 v 3 searches: exact p = 0.1) and the best pick by search score
    rows = {r["name"]: r for r in csv.DictReader(open(root / "comparison.csv"))}
    family = {k: v for k, v in rows.items() if v["kind"] == "family"}
    assert list(family) == [
        "cma_es picks vs base_only",
        "random picks vs base_only",
        "cma_es vs random",
        "best pick by search score (random search 0) vs base_only",
    ]
    assert float(family["cma_es picks vs base_only"]["p"]) == pytest.approx(2 / 256)
    assert float(family["cma_es picks vs base_only"]["p_holm"]) == pytest.approx(4 * 2 / 256)
    assert float(family["cma_es vs random"]["p"]) == pytest.approx(0.1)
    assert float(family["random picks vs base_only"]["p"]) == 1.0
    assert "| cma_es picks vs base_only | 8 |" in text and "better (Holm p < 0.05)" in text
    # the best pick by search score is random's flattered one: not shown better
    assert "| best pick by search score (random search 0) vs base_only | 8 |" in text
    assert text.count("not shown") >= 2
    assert (root / "comparison.md").read_text() == text


# --------------------------------------------------------------------------- slow: end to end
@pytest.mark.slow
def test_the_cli_runs_repeated_searches_and_compares_the_strategies(tmp_path):
    from test_search_pbt import write_pbt

    from ppage_jax.cli.main import main as cli_main

    path = write_pbt(
        tmp_path / "s.yaml",
        updates=4,
        generations=1,
        seeds=1,
        pbt={"interval": 1},
        compare={"strategies": ["random", "pbt"], "searches": 2, "pairs": [["pbt", "random"]]},
        reevaluate={"seeds": 3, "train_seed": 50, "eval_seed": 3000, "episodes": 6},
    )
    out = tmp_path / "out"
    args = ["search", str(path), "--searches", "2", "--out", str(out), "--no-progress"]
    assert cli_main(args) == 0
    for strategy in ("random", "pbt"):
        for k in range(2):
            pick = json.loads((out / strategy / f"search_{k}" / "pick.json").read_text())
            assert pick["strategy"] == strategy and pick["runs"] == 4  # an equal budget
            episodes = out / strategy / f"search_{k}" / "reevaluation" / "episodes.csv"
            assert {r["arm"] for r in csv.DictReader(open(episodes))} == {"selected"}
    refs = list(csv.DictReader(open(out / "references" / "reevaluation" / "episodes.csv")))
    assert {r["arm"] for r in refs} == {"base_only"} and len(refs) == 3 * 6
    text = (out / "comparison.md").read_text()
    assert "4 searches (random: 2, pbt: 2), each 4 training runs" in text
    assert "| pbt vs random |" in text and "## Which weights mattered" in text
    # resumed: every search is finished, nothing runs again, the same comparison
    assert cli_main([*args, "--resume"]) == 0
    assert (out / "comparison.md").read_text() == text


def test_the_references_alone_carry_every_term_of_the_space(tmp_path):
    # re-evaluated once, without a pick beside them, the references still train on the env of
    # the whole space: each gets the design's terms it lacks at weight 0, in the design's
    # order, so its params have the env's structure (a missing term failed at the first step)
    import dataclasses

    import jax

    from ppage_jax.analysis.search.repeat import with_design_terms
    from ppage_jax.env import make

    root = Path(__file__).resolve().parents[2]
    references = {"base_only": {"config": str(root / "configs/ablation/base_only")}}
    spec = load_search(write_search(tmp_path / "s.yaml", references=references))
    env = make(spec.config)
    assert len(spec.references[0].entries) < len(spec.design.entries)  # lacks design terms
    arms = tuple(with_design_terms(r, spec) for r in spec.references)
    design = [e.name for e in spec.design.entries]
    for arm, reference in zip(arms, spec.references, strict=True):
        assert [e.name for e in arm.entries][: len(design)] == design
        own = {e.name: e.weight for e in reference.entries}
        assert {e.name: e.weight for e in arm.entries} == {n: own.get(n, 0.0) for n in design}
    part = dataclasses.replace(spec.reevaluation_sweep(spec.design), arms=arms)
    want = jax.tree.structure(env.default_params)
    assert all(jax.tree.structure(p) == want for p in part.arm_params(env))
