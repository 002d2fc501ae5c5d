"""Population-based training as a search strategy: exploit copies learners exactly, a toy
population ends on the better weight setting, one compile across intervals, byte-identical
resume, the schedule a plain run replays, strict settings."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from flax import struct
from test_search import REPO, TINY, write_search

import ppage_jax as pj
from ppage_jax.analysis.search.constraint import block_score
from ppage_jax.analysis.search.pbt import run_pbt, schedule_curriculum
from ppage_jax.analysis.search.programs import exploit, exploit_plan, perturb
from ppage_jax.analysis.search.space import Dimension
from ppage_jax.analysis.search.spec import load_search
from ppage_jax.config import ConfigError
from ppage_jax.train.kit.loop import Progress, advance, progress_init

UPDATES = 8 * 8  # env steps of one update of TINY (8 grids x 8 turns)


def write_pbt(path: Path, updates: int = 4, **body) -> Path:
    """A PBT search over TINY with ``updates`` updates a run."""
    body.setdefault("strategy", "pbt")
    body.setdefault("set", dict(TINY, **{"experiment.total_timesteps": updates * UPDATES}))
    body.setdefault("pbt", {"population": 4, "interval": 1})
    return write_search(path, **body)


# --------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    "pbt, key, words",
    [
        ({"population": 4, "interval": 3}, "search.pbt.interval", "does not divide the 4 updates"),
        ({"population": 3, "interval": 1}, "search.pbt.population", "rounds to 0 members"),
        (
            {"population": 8, "interval": 1, "quarter": 0.1},
            "search.pbt.quarter",
            "a quarter (0.1) of 8 members rounds to 0 members",
        ),
        ({"population": 4, "interval": 1, "perturb": 1.0}, "search.pbt.perturb", "must be above 1"),
        ({"population": 4, "interval": 1, "perturb": 0.8}, "search.pbt.perturb", "must be above 1"),
        ({"population": 4, "every": 1}, "search.pbt.every", "unknown key"),
    ],
)
def test_bad_pbt_settings_give_one_line_naming_the_file_and_key(tmp_path, pbt, key, words):
    path = write_pbt(tmp_path / "bad.yaml", pbt=pbt)
    with pytest.raises(ConfigError) as err:
        load_search(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: {key} = ") and words in message


def test_too_many_intervals_for_a_replayable_schedule_are_refused(tmp_path):
    path = write_pbt(tmp_path / "bad.yaml", updates=32, pbt={"population": 4, "interval": 1})
    with pytest.raises(ConfigError, match=r"search.pbt.interval = 1: gives 32 intervals; .* 16"):
        load_search(path)


def test_pbt_defaults_to_the_evolution_strategies_budget(tmp_path):
    spec = load_search(write_pbt(tmp_path / "s.yaml", updates=16, pbt={}))
    # population 4 x seeds 2 x generations 3 of the ES = 24 runs; 16 updates in <= 8 intervals
    assert spec.pbt is not None and spec.pbt.population == 24 and spec.runs == 24
    assert (spec.pbt.interval, spec.pbt.intervals, spec.pbt.movers) == (2, 8, 6)
    assert spec.train_block == 24
    with pytest.raises(ConfigError, match="overlap the search's training seeds"):
        load_search(write_pbt(tmp_path / "t.yaml", updates=16, pbt={}, train_seed=30))


# --------------------------------------------------------------------------- exploit, explore
def test_exploit_copies_the_parameters_and_optimiser_state_exactly(tmp_path):
    from ppage_jax.train.algorithms import ippo
    from ppage_jax.train.run.experiment import make_train_config

    ippo_set = dict(TINY, **{"experiment.algorithm": {"name": "ippo", "params": {"num_steps": 4}}})
    config = pj.load_config(REPO / "configs/ablation/both", ippo_set)
    env = pj.make(config)
    tc = make_train_config(config, env)
    keys = jnp.stack([jax.random.PRNGKey(i) for i in range(4)])
    params = jax.tree.map(lambda x: jnp.stack([x] * 4), env.default_params)
    runner = jax.jit(jax.vmap(lambda k, p: ippo.update(ippo.init(k, tc, p), tc, p)[0]))(
        keys, params
    )  # one update: the optimiser states hold moments, not zeros
    source = jnp.asarray([0, 0, 3, 1], jnp.int32)
    copied = jax.jit(exploit)(runner, source)
    for m, s in enumerate([0, 0, 3, 1]):
        for name in ("learners", "scales"):
            a = jax.tree.leaves(jax.tree.map(lambda x: x[m], getattr(copied, name)))
            b = jax.tree.leaves(jax.tree.map(lambda x: x[s], getattr(runner, name)))
            assert len(a) == len(b) > 0 or name == "scales"
            for x, y in zip(a, b, strict=True):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        for name in ("env", "key", "progress"):  # the member keeps its own grids and key
            a = jax.tree.leaves(jax.tree.map(lambda x: x[m], getattr(copied, name)))
            b = jax.tree.leaves(jax.tree.map(lambda x: x[m], getattr(runner, name)))
            for x, y in zip(a, b, strict=True):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # member 1 took member 0's network and Adam moments: they differ from its own before
    own = jax.tree.leaves(jax.tree.map(lambda x: x[1], runner.learners))
    took = jax.tree.leaves(jax.tree.map(lambda x: x[1], copied.learners))
    pairs = zip(own, took, strict=True)
    assert any(not np.array_equal(np.asarray(x), np.asarray(y)) for x, y in pairs)


def test_the_worst_quarter_copies_the_best_and_perturbs_within_the_box():
    rng = np.random.default_rng(0)
    losses = [5.0, 1.0, 9.0, 3.0, np.nan, 2.0, 7.0, 4.0]
    feasible = [True, True, True, True, True, True, True, False]
    source, replaced = exploit_plan(losses, feasible, 2, rng)
    # worst: 7 (infeasible) and 4 (no score); best: 1 and 5
    assert replaced.tolist() == [False] * 4 + [True, False, False, True]
    assert set(source[[4, 7]]) <= {1, 5}
    assert source[[0, 1, 2, 3, 5, 6]].tolist() == [0, 1, 2, 3, 5, 6]
    dims = [
        Dimension("weights.x", "weights", "x", None, 0.0, 1.0),
        Dimension("params.base.step_cost", "params", "base", "step_cost", 0.01, 1.0, "log"),
    ]
    values = np.tile([[0.9, 0.5]], (8, 1))
    new = perturb(dims, values, source, replaced, 1.25, rng)
    for m in (4, 7):
        assert new[m, 0] in (pytest.approx(0.72), 1.0)  # 0.9 x 1.25 clipped to the bound
        assert new[m, 1] in (pytest.approx(0.4), pytest.approx(0.625))
    np.testing.assert_array_equal(new[[0, 1, 2, 3, 5, 6]], values[[0, 1, 2, 3, 5, 6]])


def test_the_block_score_weighs_episodes_and_never_reads_the_return():
    rows = {
        "episodes": np.array([1, 3, 0]),
        "episode_length": np.array([10.0, 2.0, np.nan]),
        "capture_rate": np.array([0.0, 1.0, np.nan]),
        "returns": np.array([1e6, 1e6, 1e6]),
        "active": np.array([True, True, True]),
    }
    assert block_score(rows, "rmst") == 4.0 and block_score(rows, "capture_rate") == 0.75
    assert block_score(rows, "truncated_share") == 0.25
    assert math.isnan(block_score(dict(rows, episodes=np.zeros(3)), "rmst"))


# --------------------------------------------------------------------------- the schedule
def test_the_schedule_is_a_curriculum_a_plain_run_replays(tmp_path):
    import ppage_jax.rewards  # noqa: F401  (the terms' params become schedulable leaves)
    from ppage_jax.analysis.search.pbt import schedule_config
    from ppage_jax.train.kit.schedules import schedule_values
    from ppage_jax.train.run.curriculum import config_curriculum

    spec = load_search(write_pbt(tmp_path / "s.yaml", updates=4))
    history = [[0.2, 1.0], [0.2, 1.0], [0.5, 0.8], [0.4, 0.8]]
    curriculum = schedule_curriculum(spec.dims, history, 1, UPDATES)
    assert curriculum["reward.weights.predator_distance"] == {
        "schedule": "step",
        "values": [0.2, 0.2, 0.5, 0.4],
        "boundaries": [64, 128, 192],
    }
    config = schedule_config(spec, curriculum)
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    replayed = pj.load_config(tmp_path / "config.yaml")  # what `ppage-jax run` reads
    c = config_curriculum(replayed)
    assert c is not None and c.keys == (
        "reward.weights.predator_distance",
        "reward.term_params.base.step_cost",
    )
    for update, values in enumerate(history):  # the values update u trains with
        got = np.asarray(schedule_values(c, jnp.int32(update * UPDATES)))
        np.testing.assert_allclose(got, values, rtol=1e-6)


# --------------------------------------------------------------------------- a toy population
@struct.dataclass
class ToyRunner:
    learners: dict
    env: jax.Array
    key: jax.Array
    progress: Progress


def toy_functions(column: int):
    """A learner that accumulates the weight it is paid (``theta += w`` an update) and whose
    episodes are shorter the larger the weight: one weight setting (the top of the box) is
    better. Its episodes do not read theta: exploit is checked through theta."""

    def init(key, tc, params):
        return ToyRunner({"theta": jnp.zeros((), jnp.float32)}, jnp.zeros(()), key, progress_init())

    def update(runner, tc, params):
        w = params.reward.weights[column]
        row = {
            "episodes": jnp.int32(4),
            "episode_length": 12.0 - 10.0 * w,
            "capture_rate": w,
        }
        learners = {"theta": runner.learners["theta"] + w}
        return runner.replace(learners=learners, progress=advance(runner.progress, tc, row)), row

    return init, update


def test_pbt_on_a_toy_ends_with_every_member_on_the_better_setting(tmp_path):
    spec = load_search(
        write_pbt(
            tmp_path / "s.yaml",
            updates=12,
            space={"weights.predator_distance": {"low": 0.1, "high": 1.0}},
            pbt={"population": 8, "interval": 1, "perturb": 2.0},
            constraint={"monitor": False},
        )
    )
    column = pj.make(spec.config).reward_terms.index("predator_distance")
    init, update = toy_functions(column)
    summary = run_pbt(
        spec, tmp_path / "out", progress=False, evaluate=False, init_fn=init, update_fn=update
    )
    pop = summary["population"]
    first = {c["member"]: c["values"][0] for c in summary["candidates"] if c["generation"] == 0}
    top = sorted(first, key=lambda m: -first[m])[:2]  # the best quarter at the start
    assert min(first.values()) < 0.5 < first[top[0]]  # a spread start
    # one lineage, from a member that started in the best quarter, took the population ...
    assert len(set(pop.roots)) == 1 and pop.roots[0] in top
    # ... on the setting (the top of the box) or one perturbation (x 1/2) from it
    assert {h[-1][0] for h in pop.history} <= {1.0, 0.5}
    # exploit copied the learners: each member's theta is the sum of its lineage's weights
    theta = np.asarray(summary["runner"].learners["theta"])
    expected = [sum(np.float32(v[0]) for v in h) for h in pop.history]
    np.testing.assert_allclose(theta, expected, rtol=1e-5)
    assert summary["traces"]["interval"] == 1  # 12 intervals, one compile


# --------------------------------------------------------------------------- one compile, resume
def generation_files(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted((directory / "generations").iterdir())
        if not p.name.endswith(".audit.csv")
    } | {"search.csv": (directory / "search.csv").read_bytes()}


def test_one_compile_across_intervals_and_a_resume_to_the_same_bytes(tmp_path):
    """The tiny scenario's population (random learner), 4 intervals: the interval program is
    traced once for the whole search and for its stopped-and-resumed twin; the resumed
    search's files are the uninterrupted one's, byte for byte."""
    from ppage_jax.train.algorithms import random as random_algo

    spec = load_search(write_pbt(tmp_path / "s.yaml", updates=4))
    traces: list[int] = []

    def counted(runner, tc, params):
        traces.append(1)
        return random_algo.update(runner, tc, params)

    whole = run_pbt(spec, tmp_path / "whole", progress=False, evaluate=False, update_fn=counted)
    assert whole["generations_run"] == 4 and whole["traces"]["interval"] == 1
    assert len(traces) == 1  # the update traced once: 4 intervals of one compiled program
    asks = iter([False, False, True])
    part = run_pbt(
        spec,
        tmp_path / "resumed",
        progress=False,
        evaluate=False,
        update_fn=counted,
        should_stop=lambda: next(asks),
    )
    assert part["stopped"] and part["generations_run"] == 2
    rest = run_pbt(
        spec, tmp_path / "resumed", progress=False, evaluate=False, update_fn=counted, resume=True
    )
    assert rest["generations_run"] == 2 and rest["compile_calls"] == 0 and len(traces) == 1
    assert generation_files(tmp_path / "resumed") == generation_files(tmp_path / "whole")
    assert sorted(p.name for p in (tmp_path / "whole" / "generations").glob("*.npz")) == [
        "00003.state.npz"  # only the last interval's population is kept
    ]
    records = [c for c in whole["candidates"] if c["generation"] == 1]
    assert sum(c["source"] != c["member"] for c in records) == 1  # a quarter of 4 moved


# --------------------------------------------------------------------------- slow: end to end
PBT_OUTPUTS = (
    "search.csv",
    "report.md",
    "rewards.yaml",
    "config.yaml",
    "pick.json",
    "final.json",
    "reevaluation/results.csv",
    "reevaluation/episodes.csv",
)


@pytest.mark.slow
def test_a_killed_pbt_search_resumes_in_a_new_process_to_the_same_bytes(tmp_path):
    from cli_testing import cli_env, run_cli

    path = write_pbt(tmp_path / "s.yaml", updates=4)

    def cli(out: Path, *extra: str, fault: str | None = None):
        args = ["search", str(path), "--out", str(out), "--no-progress", *extra]
        return run_cli(args, cli_env(tmp_path / "cache", fault))

    whole = cli(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr
    killed = cli(tmp_path / "killed", fault="commit:3")  # before interval 2's commit
    assert killed.returncode == -9
    resumed = cli(tmp_path / "killed", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 generation(s) run now" in resumed.stdout
    for name in PBT_OUTPUTS:
        assert (tmp_path / "killed" / name).read_bytes() == (
            tmp_path / "whole" / name
        ).read_bytes(), name
    # the selected schedule: a config a plain run replays, its first values the rewards.yaml's
    import ppage_jax.rewards  # noqa: F401

    pick = yaml.safe_load((tmp_path / "whole" / "pick.json").read_text())
    config = pj.load_config(tmp_path / "whole" / "config.yaml")
    curriculum = config["experiment"]["curriculum"]
    key = "reward.weights.predator_distance"
    assert curriculum[key]["values"] == [v[0] for v in pick["schedule"]]
    report = (tmp_path / "whole" / "report.md").read_text()
    assert "## Selected schedule" in report and "Selection bias:" in report


def test_a_member_the_monitor_flags_is_infeasible_and_replaced(tmp_path, monkeypatch):
    """The monitor's verdict (here: flagging member 0 at every interval) makes a member
    infeasible: it ranks last and copies a feasible member's learner at the next interval."""
    import ppage_jax.analysis.search.constraint as constraint

    spec = load_search(
        write_pbt(
            tmp_path / "s.yaml",
            updates=6,
            space={"weights.predator_distance": {"low": 0.1, "high": 1.0}},
            pbt={"population": 4, "interval": 1, "perturb": 2.0},
        )
    )
    column = pj.make(spec.config).reward_terms.index("predator_distance")
    init, update = toy_functions(column)
    farmed = {}

    def fake_monitor(monitor, seed, curve):
        # member 0's lineage is the farming one, whatever its score
        return {"monitor/hacking/predator": float(seed == farmed.get("seed"))}

    monkeypatch.setattr(constraint, "monitor_run", fake_monitor)
    farmed["seed"] = spec.train_seed  # member 0 trains from train_seed
    summary = run_pbt(
        spec, tmp_path / "out", progress=False, evaluate=False, init_fn=init, update_fn=update
    )
    first = [c for c in summary["candidates"] if c["generation"] == 0]
    assert not first[0]["feasible"] and first[0]["rank"] == 3
    assert first[0]["reason"] == "the reward-hacking monitor flagged its lineage (hacking/predator)"
    second = [c for c in summary["candidates"] if c["generation"] == 1]
    assert second[0]["source"] != 0  # member 0 copied a feasible member's learner


@pytest.mark.slow
def test_ppage_jax_run_replays_the_schedule_to_the_re_evaluated_bits(tmp_path):
    """An IPPO population's pick: ``ppage-jax run config.yaml`` on the re-evaluation's seeds
    and layouts (the command the pick's files print) gives every seed's re-evaluated RMST and
    capture rate exactly; a search killed during the re-evaluation resumes from the written
    pick (no population state needed) to the same files."""
    import csv
    import json
    import shlex

    from test_search import IPPO

    from ppage_jax.analysis.search.reevaluate import replay_command
    from ppage_jax.cli.main import main

    path = write_pbt(
        tmp_path / "s.yaml",
        updates=4,
        set=dict(IPPO, **{"experiment.total_timesteps": 4 * 8 * 4}),
        pbt={"population": 4, "interval": 2},
        eval={"episodes": 6, "policy": "sampled"},  # the study's: the run's "trained" row
    )
    spec = load_search(path)
    out = tmp_path / "search"
    run_pbt(spec, out, progress=False)
    with (out / "reevaluation/results.csv").open() as f:
        scores = {
            (r["seed"], r["metric"]): float(r["value"] or "nan")
            for r in csv.DictReader(f)
            if r["arm"] == "selected"
        }
    command = replay_command(spec, out / "config.yaml")
    assert command in (out / "config.yaml").read_text().replace(
        "<this directory>/config.yaml", str(out / "config.yaml")
    )
    args = shlex.split(command)[1:] + ["--out", str(tmp_path / "replay"), "--no-progress"]
    assert main(args) == 0
    summary = json.loads((tmp_path / "replay" / "summary.json").read_text())
    per_seed = summary["evaluation"]["rows"]["trained"]["per_seed"]
    assert len(per_seed) == 2
    for j, row in enumerate(per_seed):
        seed = str(50 + j)
        assert row["rmst"] == scores[seed, "rmst"]
        assert row["capture_rate"] == scores[seed, "capture_rate"]
    # killed during the re-evaluation: only the pick and its schedule are needed
    written = {p: (out / p).read_bytes() for p in ("reevaluation/results.csv", "report.md")}
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(dict(manifest, reevaluated=False)))
    for p in (out / "reevaluation").iterdir():
        p.unlink()
    for p in (out / "generations").glob("*.npz"):
        p.unlink()
    again = run_pbt(spec, out, progress=False, resume=True)
    assert again["generations_run"] == 0
    assert {p: (out / p).read_bytes() for p in written} == written


@pytest.mark.slow  # trains a population and re-evaluates its pick
def test_a_learner_without_parameters_re_evaluates_every_seed(tmp_path):
    """The random learner has no policy to stack over seeds: its evaluation is one row of
    episodes, which every re-evaluated seed reads (it used to fail at the second seed)."""
    import csv

    spec = load_search(write_pbt(tmp_path / "s.yaml", pbt={"population": 4, "interval": 2}))
    seeds = spec.reevaluate.seeds
    assert seeds >= 2
    run_pbt(spec, tmp_path / "out", progress=False)
    with (tmp_path / "out/reevaluation/results.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["arm"] == "selected"]
    rmst = {r["seed"]: r["value"] for r in rows if r["metric"] == "rmst"}
    assert len(rmst) == seeds and len(set(rmst.values())) == 1
