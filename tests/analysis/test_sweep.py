"""Sweeps: one compiled program for every arm and seed, paired seeds, strict sweep files."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from sweep_testing import ARMS, TINY, write_sweep

from ppage_jax.analysis.batch.trainers import trainer_functions
from ppage_jax.analysis.sweep.run import run_sweep
from ppage_jax.analysis.sweep.spec import load_sweep
from ppage_jax.cli.main import main as cli_main
from ppage_jax.config import ConfigError
from ppage_jax.train.run.evaluate import untrained_levels
from ppage_jax.train.run.experiment import make_train_config

REPO = Path(__file__).resolve().parents[2]


def read_results(path: Path) -> dict:
    with open(path / "results.csv", newline="") as fh:
        return {
            (r["arm"], int(r["seed"]), r["metric"]): float(r["value"] or "nan")
            for r in csv.DictReader(fh)
        }


@pytest.fixture(scope="module")
def two_by_two(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    spec = load_sweep(
        write_sweep(
            tmp / "s.yaml",
            arms=ARMS,
            seeds=2,
            chunk_size=2,
            eval={"episodes": 6},
            output_dir=str(tmp / "out"),
        )
    )
    env = spec.make_env()
    train_fn, eval_fn, steps = trainer_functions(spec, env)
    traces = []

    def counted_train(key, params):
        traces.append(1)
        return train_fn(key, params)

    summary = run_sweep(spec, counted_train, eval_fn, steps, progress=False)
    return tmp, summary, traces


def test_all_arms_and_seeds_run_as_one_compiled_program(two_by_two):
    tmp, summary, traces = two_by_two
    assert len(traces) == 1  # traced once for 4 runs in 2 chunks
    assert summary["chunks"] == 2 and summary["chunk_size"] == 2
    assert [r for r in summary["runs"]] == [
        ("base_only", 0),
        ("base_only", 1),
        ("both", 0),
        ("both", 1),
    ]


def test_seeds_are_paired_across_arms_and_weights_take_effect(two_by_two):
    _, summary, _ = two_by_two
    res = summary["results"]
    for seed in (0, 1):
        # the random trainer's trajectories do not depend on the reward: same keys, same play
        assert res["base_only", seed]["capture_rate"] == res["both", seed]["capture_rate"]
        assert res["base_only", seed]["episode_length"] == res["both", seed]["episode_length"]
        assert res["base_only", seed]["return/predator/predator_distance"] == 0.0
        assert res["both", seed]["return/predator/predator_distance"] < 0.0
        assert res["base_only", seed]["return/prey/survival"] == 0.0
        assert res["both", seed]["return/prey/survival"] > 0.0
    # training: seed i of every arm starts from the same key, and the seeds differ
    curve = {run: {(u, m): v for u, _, m, v in rows} for run, rows in summary["curves"].items()}
    lengths = {
        run: [v for (u, m), v in c.items() if m == "episode_length"] for run, c in curve.items()
    }
    assert lengths["base_only", 0] == lengths["both", 0]
    assert lengths["base_only", 1] == lengths["both", 1]
    assert lengths["both", 0] != lengths["both", 1]


def layout_sweep(tmp_path: Path, name: str, algorithm) -> object:
    """3 runs in chunks of 2 (the vmapped last chunk is padded, the sequential one not)."""
    tiny = dict(TINY, **{"experiment.algorithm": algorithm, "experiment.total_timesteps": 128})
    body = dict(set=tiny, arms={"both": {}}, seeds=3, chunk_size=2, eval={"episodes": 6})
    return load_sweep(
        write_sweep(tmp_path / f"{name}.yaml", output_dir=str(tmp_path / name), **body)
    )


def test_both_layouts_write_the_same_results_for_a_fixed_policy(tmp_path):
    """Without learning (the random trainer), the vmapped chunk and the run-after-run chunk
    write the same results.csv and curves.csv, byte for byte; the layout is recorded."""
    outputs = {}
    for layout in ("vmap", "sequential"):
        summary = run_sweep(
            layout_sweep(tmp_path, layout, TINY["experiment.algorithm"]),
            progress=False,
            report=False,
            layout=layout,
        )
        out = Path(summary["output_dir"])
        assert summary["layout"] == layout and summary["chunks"] == 2
        assert json.loads((out / "sweep.json").read_text())["layout"] == layout
        assert json.loads((out / "manifest.json").read_text())["layout"] == layout
        outputs[layout] = [(out / name).read_bytes() for name in ("results.csv", "curves.csv")]
    assert outputs["vmap"] == outputs["sequential"]


@pytest.mark.slow  # four small learning sweeps
def test_a_resumed_sweep_keeps_its_layout(tmp_path):
    """A learner's floats differ between layouts; a sweep stopped after its first chunk
    resumes in the layout it began with and ends byte-identical to an uninterrupted one."""
    ippo = {"name": "ippo", "params": {"num_steps": 8}}
    whole = run_sweep(layout_sweep(tmp_path, "whole", ippo), progress=False, layout="sequential")
    asked = iter(range(10))
    stopped = run_sweep(
        layout_sweep(tmp_path, "part", ippo),
        progress=False,
        layout="sequential",
        should_stop=lambda: next(asked) >= 2,  # asked before compiling, then per chunk
    )
    assert stopped["stopped"] and stopped["chunks"] == 1
    with pytest.raises(ValueError, match="layout 'vmap' differs from the sweep's 'sequential'"):
        run_sweep(layout_sweep(tmp_path, "part", ippo), progress=False, resume=True, layout="vmap")
    resumed = run_sweep(layout_sweep(tmp_path, "part", ippo), progress=False, resume=True)
    assert resumed["layout"] == "sequential" and resumed["chunks_run"] == 1
    for name in ("results.csv", "curves.csv"):
        part = (Path(resumed["output_dir"]) / name).read_bytes()
        assert part == (Path(whole["output_dir"]) / name).read_bytes()


def test_an_unknown_layout_names_the_allowed_ones(two_by_two):
    tmp, summary, _ = two_by_two
    spec = load_sweep(write_sweep(tmp / "bad.yaml", arms=ARMS, seeds=1))
    with pytest.raises(ValueError, match="layout must be one of vmap, sequential, got 'wide'"):
        run_sweep(spec, progress=False, report=False, layout="wide")


@pytest.mark.slow  # trains every arm again separately
def test_sweep_matches_separately_run_arms(two_by_two, tmp_path):
    tmp, summary, _ = two_by_two
    alone = tmp_path / "both_alone"
    code = cli_main(
        [
            "sweep",
            str(
                write_sweep(
                    tmp_path / "alone.yaml", arms={"both": {}}, seeds=2, eval={"episodes": 6}
                )
            ),
            "--output",
            str(alone),
            "--no-progress",
        ]
    )
    assert code == 0
    separate = read_results(alone)
    together = read_results(Path(summary["output_dir"]))
    shared = {k: v for k, v in together.items() if k[0] == "both"}
    assert set(shared) == set(separate)
    for key, value in shared.items():
        np.testing.assert_allclose(separate[key], value, rtol=1e-5, atol=1e-5, err_msg=str(key))


def test_outputs_are_tidy_and_reported(two_by_two):
    tmp, summary, _ = two_by_two
    out = Path(summary["output_dir"])
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert set(rows[0]) == {"arm", "seed", "metric", "value"}
    metrics = {r["metric"] for r in rows}
    assert {
        "capture_rate",
        "rmst",
        "km_median",
        "truncated_share",
        "episode_length",
        "steps_to_capture",
        "base_return/predator",
        "base_return/prey",
        "return/predator/base",
        "return/prey/survival",
    } <= metrics
    values = read_results(out)
    for arm, seed in summary["runs"]:
        # censored at the 12-turn limit: RMST is the mean of min(T, 12), here every episode's
        # length; captured + truncated episodes are all of them
        rmst, length = values[arm, seed, "rmst"], values[arm, seed, "episode_length"]
        assert rmst == pytest.approx(length) and 0 < rmst <= 12
        assert values[arm, seed, "capture_rate"] + values[
            arm, seed, "truncated_share"
        ] == pytest.approx(1.0)
    # the monitor watches the learning roles of the arm that pays them shaping terms
    watched = {m for m in metrics if m.startswith("monitor")}
    assert watched == {
        f"{prefix}/{check}"
        for prefix in ("monitor", "monitor_first")
        for role, term in (("predator", "predator_distance"), ("prey", "survival"))
        for check in (
            f"hacking/{role}",
            f"episode_length/{role}",
            f"share/{role}/{term}",
            f"drift/{role}",
            f"below_start/{role}",
        )
    }
    assert {r["metric"] for r in rows if r["arm"] == "base_only"} == metrics - watched
    assert len(rows) == 2 * len(metrics) + 2 * len(metrics - watched)
    # two updates, far fewer than the monitor's 20-update window: nothing flagged
    for (arm, _, metric), value in values.items():
        if metric.startswith("monitor/"):
            assert (arm, value) == ("both", 0.0)
        elif metric.startswith("monitor_first/"):
            assert arm == "both" and np.isnan(value)
    with open(out / "curves.csv", newline="") as fh:
        curve = list(csv.DictReader(fh))
    assert {r["env_steps"] for r in curve} == {"32", "64"}  # 2 updates of 4 grids x 8 turns
    report = (out / "report.md").read_text()
    assert "IQM" in report and "P(improvement vs base_only)" in report and "| both |" in report
    assert "| RMST: mean turns to capture, censored (lower is better) | both |" in report
    # the headline leads with the censored time to capture; steps to capture of the captured
    # episodes only is a labelled diagnostic
    labels = [line.split(" | ")[0] for line in report.splitlines() if line.startswith("| ")]
    headline = list(dict.fromkeys(label for label in labels if "better)" in label))
    assert [h.split(" (")[0] for h in headline[:5]] == [
        "| RMST: mean turns to capture, censored",
        "| KM median turns to capture",
        "| capture rate",
        "| share hitting the step limit",
        "| episode length",
    ]
    assert headline[-1].startswith("| steps to capture, captured episodes only (survivor-biased)")
    assert "| both | hacking | prey | 0/2 | - | - |" in report
    assert "| base_only | not watched (no learning role is paid a shaping term) |||||" in report
    assert "## Audit before training\n\nNot run (`audit: false` in the sweep file)." in report
    assert "Median turns to capture (Kaplan-Meier, per seed)" in report
    assert (out / "headline.png").stat().st_size > 0 and (out / "curves.png").exists()


def test_default_sweep_is_ppages_four_conditions():
    spec = load_sweep(None)
    assert [a.name for a in spec.arms] == ["base_only", "predator_distance", "survival", "both"]
    assert spec.terms == ("base", "predator_distance", "survival")
    assert spec.baseline == "base_only"
    weights = spec.describe()["arms"]
    assert [list(weights[a]["weights"].values()) for a in weights] == [
        [1.0, 0.0, 0.0],
        [1.0, 0.5, 0.0],
        [1.0, 0.0, 1.0],
        [1.0, 0.5, 1.0],
    ]
    env = spec.make_env()
    params = spec.arm_params(env)
    np.testing.assert_array_equal(np.asarray(params[2].reward.weights), [1.0, 0.0, 1.0])
    train, evaluation = spec.describe()["train_seeds"], spec.describe()["eval_seeds"]
    assert train[1] < evaluation[0]


def test_arm_edits_add_terms_and_params(tmp_path):
    spec = load_sweep(
        write_sweep(
            tmp_path / "s.yaml",
            arms={
                "potential": {"weights": {"predator_distance": 0, "potential_distance": 0.5}},
                "split": {
                    "params": {"base": {"credit": "split"}},
                    "applies_to": {"survival": "all"},
                },
            },
        )
    )
    assert spec.terms == ("base", "predator_distance", "survival", "potential_distance")
    env = spec.make_env()
    potential, split = spec.arm_params(env)
    np.testing.assert_array_equal(np.asarray(potential.reward.weights), [1, 0, 1, 0.5])
    np.testing.assert_array_equal(np.asarray(split.reward.weights), [1, 0.5, 1, 0])
    assert int(split.reward.term_params["base"]["credit"]) == 1
    assert np.asarray(split.reward.role_masks)[2].tolist() == [1.0, 1.0]  # 1v1: both rows


@pytest.mark.parametrize(
    "body, key, words",
    [
        (
            {"arms": {"a": {"weights": {"no_such_term": 1.0}}}},
            "sweep.arms.a.weights.no_such_term",
            "unknown reward term",
        ),
        ({"arms": {}}, "sweep.arms", "non-empty"),
        (
            {"arms": {"a": {"disable": ["potential_distance"]}}},
            "sweep.arms.a.disable",
            "not a term of this arm",
        ),
        (
            {"arms": {"a": {"params": {"base": {"bonus": 1}}}}},
            "sweep.arms.a.params.base.bonus",
            "unknown param",
        ),
        ({"arms": {"a": {"weigths": {}}}}, "sweep.arms.a.weigths", "unknown key"),
        ({"arms": {"a": {}}, "baseline": "b"}, "sweep.baseline", "must name an arm"),
        ({"seeds": 0}, "sweep.seeds", ">= 1"),
        ({"seeds": 4, "train_seed": 10, "eval": {"seed": 12}}, "sweep.eval.seed", "overlap"),
        ({"arms_": {}}, "sweep.arms_", "unknown key"),
        ({"eval": {"policy": "sampled"}}, "sweep.eval.policy", "no stochastic policy"),
        ({"eval": {"policy": "best"}}, "sweep.eval.policy", "must be one of"),
    ],
)
def test_bad_sweep_files_name_the_key(tmp_path, body, key, words):
    path = write_sweep(tmp_path / "bad.yaml", **body)
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert err.value.source == str(path) and err.value.key == key
    assert words in str(err.value)


def test_config_keys_a_sweep_replaces_give_a_notice_and_eval_overrides_merge(tmp_path):
    from sweep_testing import TINY

    from ppage_jax.config import ConfigNotice

    sets = {**TINY, "experiment.seed": 3, "experiment.eval.episodes": 5}
    path = write_sweep(tmp_path / "s.yaml", set=sets, eval={"seed": 500, "episodes": 64})
    with pytest.warns(ConfigNotice) as caught:
        spec = load_sweep(path)
    assert sorted(str(w.message).split(": ", 1)[1] for w in caught) == [
        "sweep.set experiment.eval.episodes has no effect: a sweep takes it from sweep.eval "
        "(--eval-episodes)",
        "sweep.set experiment.seed has no effect: a sweep takes it from sweep.train_seed",
    ]
    assert (spec.eval_seed, spec.eval_episodes) == (500, 64)
    # `ppage-jax sweep --eval-episodes 4` merges into the file's eval: the seed stays
    spec = load_sweep(
        write_sweep(tmp_path / "t.yaml", eval={"seed": 500}), {"eval": {"episodes": 4}}
    )
    assert (spec.eval_seed, spec.eval_episodes) == (500, 4)


def test_sweep_file_yaml_is_read_like_a_config(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("sweep: [1\n")
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert str(err.value).endswith("but got '<stream end>' at line 2, column 1")
    path.write_text("sweep: &s [*s]\n")  # a recursive alias is refused, as in config files
    with pytest.raises(ConfigError, match="recursive aliases never are"):
        load_sweep(path)


def test_mismatched_structure_is_rejected(tmp_path):
    other = tmp_path / "bigger"
    shutil.copytree(REPO / "configs/ablation/survival", other)
    env = yaml.safe_load((other / "env.yaml").read_text())
    env["env"]["size"] = 12
    (other / "env.yaml").write_text(yaml.safe_dump(env))
    path = write_sweep(
        tmp_path / "s.yaml",
        set={},
        arms={
            "base_only": {"config": str(REPO / "configs/ablation/base_only")},
            "bigger": {"config": str(other)},
        },
    )
    with pytest.raises(ConfigError, match=r"mismatched structure: env\.size is 12 here but 10"):
        load_sweep(path)


@pytest.mark.slow
def test_learning_sweep_matches_separately_run_arms(tmp_path):
    # The same check with a learner (IPPO), whose trained policy depends on the weights.
    tiny = dict(
        TINY,
        **{
            "experiment.algorithm": {"name": "ippo", "params": {"num_steps": 8}},
            "experiment.total_timesteps": 128,
        },
    )
    together = load_sweep(
        write_sweep(
            tmp_path / "s.yaml",
            set=tiny,
            arms=ARMS,
            seeds=2,
            eval={"episodes": 6},
            output_dir=str(tmp_path / "a"),
        )
    )
    alone = load_sweep(
        write_sweep(
            tmp_path / "t.yaml",
            set=tiny,
            arms={"both": {}},
            seeds=2,
            eval={"episodes": 6},
            output_dir=str(tmp_path / "b"),
        )
    )
    a = run_sweep(together, progress=False, report=False)["results"]
    b = run_sweep(alone, progress=False, report=False)["results"]
    for seed in (0, 1):
        for metric, value in b["both", seed].items():
            np.testing.assert_allclose(
                a["both", seed][metric], value, rtol=1e-4, atol=1e-4, err_msg=metric
            )


# --------------------------------------------------------------------------- hyperparameters
PPO = {"num_steps": 4, "num_minibatches": 1, "update_epochs": 1, "hidden_layers": [16]}
IQL = {"num_steps": 4, "table_size": 1024}


def learner_set(name: str = "ippo", **params) -> dict:
    base = PPO if name == "ippo" else IQL
    return dict(
        TINY,
        **{
            "experiment.algorithm": {"name": name, "params": dict(base, **params)},
            "experiment.total_timesteps": 48,
        },
    )


def curve_values(rows) -> dict:
    return {(u, m): v for u, _, m, v in rows}


@pytest.mark.parametrize(
    "name, fast, slow, changed",
    [
        # alpha: the tabular learners' step size
        pytest.param(
            "iql",
            {"alpha": 0.9, "gamma": 0.5},
            {"alpha": 0.01},
            "losses/td_error",
            marks=pytest.mark.slow,  # trains each arm again separately
        ),
        pytest.param(
            "ippo",
            {"learning_rate": 0.05, "ent_coef": 0.0},
            {"learning_rate": 1e-4},
            "losses/entropy",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_step_size_sweep_is_one_program_matching_separate_runs(
    tmp_path, name, fast, slow, changed
):
    spec = load_sweep(
        write_sweep(
            tmp_path / "s.yaml",
            set=learner_set(name),
            arms={"slow": {"hyperparams": slow}, "fast": {"hyperparams": fast}},
            seeds=1,
            eval={"episodes": 4},
            output_dir=str(tmp_path / "together"),
        )
    )
    # every arm carries every name some arm sets (the config's value where it sets none)
    assert set(spec.describe()["arms"]["slow"]["hyperparams"]) == set(fast) | set(slow)
    train_fn, eval_fn, steps = trainer_functions(spec, spec.make_env())
    traces = []

    def counted_train(key, params, hyperparams=None):
        traces.append(hyperparams)
        return train_fn(key, params, hyperparams)

    together = run_sweep(spec, counted_train, eval_fn, steps, progress=False)
    assert len(traces) == 1 and sorted(traces[0]) == sorted(set(fast) | set(slow))
    alone = load_sweep(
        write_sweep(
            tmp_path / "t.yaml",
            set=learner_set(name, **fast),  # the same values, configured statically
            arms={"fast": {}},
            seeds=1,
            eval={"episodes": 4},
            output_dir=str(tmp_path / "alone"),
        )
    )
    separate = run_sweep(alone, progress=False, report=False)
    got, other = (curve_values(together["curves"][arm, 0]) for arm in ("fast", "slow"))
    reference = curve_values(separate["curves"]["fast", 0])
    assert set(got) == set(reference)
    for key, value in reference.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=str(key))
    for metric, value in separate["results"]["fast", 0].items():
        np.testing.assert_allclose(
            together["results"]["fast", 0][metric], value, rtol=1e-4, atol=1e-4, err_msg=metric
        )
    later = [k for k in reference if k[1].startswith(changed) and k[0] > 0]
    assert later and any(got[k] != other[k] for k in later)  # the values took effect
    report = (tmp_path / "together" / "report.md").read_text()
    assert "| hyperparams |" in report
    fast_row = next(line for line in report.splitlines() if line.startswith("| fast |"))
    assert all(f"{k}={v:g}" in fast_row for k, v in fast.items())


@pytest.mark.parametrize(
    "hyperparams, key, words",
    [
        ({"hidden_layers": [8]}, "hidden_layers", "is not a traced hyperparameter of 'ippo'"),
        ({"learning_rate": -1}, "learning_rate", "must be a number > 0"),
        ({"gae_lambda": "high"}, "gae_lambda", "must be a number in [0, 1]"),
    ],
)
def test_bad_arm_hyperparameters_name_the_key(tmp_path, hyperparams, key, words):
    path = write_sweep(
        tmp_path / "bad.yaml", set=learner_set(), arms={"a": {"hyperparams": hyperparams}}
    )
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert err.value.key == f"sweep.arms.a.hyperparams.{key}"
    assert words in str(err.value) and "\n" not in str(err.value)


def test_arm_hyperparameters_read_yaml_exponents(tmp_path):
    path = tmp_path / "s.yaml"
    body = {"config": str(REPO / "configs/ablation/both"), "set": learner_set()}
    text = yaml.safe_dump({"sweep": body})  # YAML 1.1 reads an unquoted 3e-4 as a string
    arms = "  arms: {a: {hyperparams: {learning_rate: 3e-4}}}\n"
    path.write_text(text.replace("sweep:\n", "sweep:\n" + arms, 1))
    (arm,) = load_sweep(path).arms
    assert arm.hyperparams == {"learning_rate": pytest.approx(3e-4)}


# --------------------------------------------------------------------------- monitor, audit
@pytest.fixture(scope="module")
def hacked_sweep(tmp_path_factory):
    """The tiny hacked run of tests/cli (predators paid to keep away from a prey fixed between
    them, IPPO) as a sweep arm beside its honest twin (the same design, the distance term at
    weight 0), one seed each, one run per chunk, the audit stage on, two reference arms."""
    from cli_testing import HACKED, HACKED_EXPERIMENT, write_run_config

    tmp = tmp_path_factory.mktemp("hacked")
    config = write_run_config(tmp / "config", HACKED, **HACKED_EXPERIMENT)
    path = write_sweep(
        tmp / "s.yaml",
        config=str(config),
        set={},
        arms={"hacked": {}, "honest": {"weights": {"predator_distance": 0.0}}},
        baseline=["honest", "hacked"],
        seeds=1,
        chunk_size=1,
        eval={"seed": 1000, "episodes": 8},
        audit=True,
        output_dir=str(tmp / "out"),
    )
    spec = load_sweep(path)
    train_fn, eval_fn, steps = trainer_functions(spec, spec.make_env())
    traces = []

    def counted_train(key, params):
        traces.append(1)
        return train_fn(key, params)

    summary = run_sweep(spec, counted_train, eval_fn, steps, progress=False)
    return spec, summary, traces, Path(summary["output_dir"])


@pytest.mark.slow  # trains a 2-arm sweep to hacking
def test_the_monitor_flags_the_hacked_arm_only_without_a_new_compile(hacked_sweep):
    spec, summary, traces, out = hacked_sweep
    assert len(traces) == 1 and summary["chunks"] == 2  # traced once for both arms
    assert spec.baselines == ("honest", "hacked") and spec.baseline == "honest"
    values = read_results(out)
    monitor = {(a, m): v for (a, _, m), v in values.items() if m.startswith("monitor")}
    # what `ppage-jax run` of the same config flags, at the same env steps
    assert monitor == {
        ("hacked", "monitor/hacking/predator"): 1.0,
        ("hacked", "monitor/episode_length/predator"): 1.0,
        ("hacked", "monitor/share/predator/predator_distance"): 0.0,
        ("hacked", "monitor/drift/predator"): 1.0,
        ("hacked", "monitor/below_start/predator"): 1.0,
        ("hacked", "monitor_first/hacking/predator"): 15360.0,
        ("hacked", "monitor_first/below_start/predator"): 20480.0,
        ("hacked", "monitor_first/drift/predator"): 22016.0,
        ("hacked", "monitor_first/episode_length/predator"): 16384.0,
        ("hacked", "monitor_first/share/predator/predator_distance"): pytest.approx(
            np.nan, nan_ok=True
        ),
    }  # the honest twin pays the predators no shaping term: not watched, no columns
    with open(out / "results.csv", newline="") as fh:
        cells = {r["metric"]: r["value"] for r in csv.DictReader(fh) if r["arm"] == "hacked"}
    assert cells["monitor_first/share/predator/predator_distance"] == ""  # NaN: an empty cell
    assert cells["monitor_first/hacking/predator"] == "15360.0"
    # the hacked predators learned to stay away: never capture within the 20-turn limit
    assert values["hacked", 0, "capture_rate"] == 0.0 and values["hacked", 0, "rmst"] == 20.0
    assert values["honest", 0, "capture_rate"] == 1.0
    info = json.loads((out / "sweep.json").read_text())
    assert info["monitor"]["watched"] == {
        "hacked": [
            "monitor/hacking/predator",
            "monitor/episode_length/predator",
            "monitor/share/predator/predator_distance",
            "monitor/drift/predator",
            "monitor/below_start/predator",
        ],
        "honest": [],
    }
    assert info["baselines"] == ["honest", "hacked"] and info["audit"] is True
    # where the hacked arm's checks start: its untrained run on the evaluation's layouts
    env = spec.make_env()
    levels = untrained_levels(make_train_config(spec.config, env), spec.arm_params(env)[0], 1000)
    paid = sum(abs(levels[f"return/predator/{t}"]) for t in env.reward_terms)
    assert info["monitor"]["untrained"] == {
        "hacked": {
            "capture_rate": levels["capture_rate"],
            "episode_length": levels["episode_length"],
            "share/predator/predator_distance": pytest.approx(
                abs(levels["return/predator/predator_distance"]) / paid
            ),
        }
    }
    assert 0 < levels["capture_rate"] <= 1  # random predators catch the prey between them


@pytest.mark.slow  # a sweep with baselines
def test_the_baselines_play_the_same_layouts_once(hacked_sweep):
    from ppage_jax.analysis.sweep.baselines import read_baselines

    _, _, _, out = hacked_sweep
    table = read_baselines(out / "baselines.csv")
    chase = "greedy BFS chase vs no-op (configured)"
    assert list(table) == ["random vs no-op (configured)", chase]
    assert set(table[chase]) == {
        "capture_rate",
        "captures",
        "rmst",
        "km_median",
        "truncated_share",
        "episode_length",
        "steps_to_capture",
    }
    # the prey starts between the two predators: the chase catches it on the first turn
    assert (table[chase]["rmst"], table[chase]["capture_rate"]) == (1.0, 1.0)
    random = table["random vs no-op (configured)"]
    assert 1.0 < random["rmst"] <= 20.0 and 0.0 < random["capture_rate"] <= 1.0
    report = (out / "report.md").read_text()
    assert f"| {chase} | 1 | 1 | 1 | 0 |" in report


@pytest.mark.slow  # a sweep with audit and baselines
def test_the_report_shows_monitor_flags_audit_and_every_reference_arm(hacked_sweep):
    _, _, _, out = hacked_sweep
    report = (out / "report.md").read_text()
    assert (
        "| metric | arm | n | IQM [95 % CI] | P(improvement vs honest) [95 % CI] | "
        "P(improvement vs hacked) [95 % CI] |" in report
    )
    rmst = [line for line in report.splitlines() if line.startswith("| RMST")]
    # one seed each: hacked (20 turns) never beats honest (1 turn), and the other way round;
    # with one seed the report gives the points and no interval
    no_ci = "(n=1: no CI under 3 seeds)"
    assert rmst == [
        f"| RMST: mean turns to capture, censored (lower is better) | hacked | 1 | 20 {no_ci} | "
        f"0.00 {no_ci} | reference |",
        f"| RMST: mean turns to capture, censored (lower is better) | honest | 1 | 1 {no_ci} | "
        f"reference | 1.00 {no_ci} |",
    ]
    assert "| hacked | hacking | predator | 1/1 | 15,360 | 15,360 |" in report
    assert "| hacked | episode_length | predator | 1/1 | 16,384 | 16,384 |" in report
    assert "| hacked | share (predator_distance) | predator | 0/1 | - | - |" in report
    assert "| hacked | drift | predator | 1/1 | 22,016 | 22,016 |" in report
    assert "| honest | not watched (no learning role is paid a shaping term) |||||" in report
    start = report.split("Where the checks start")[1].split("##")[0]
    (row,) = [line for line in start.splitlines() if line.startswith("| hacked |")]
    assert re.fullmatch(
        r"\| hacked \| [01]\.\d{3} \| [\d.]+ \| predator/predator_distance 0\.\d\d \|", row
    )
    assert "| honest |" not in start
    audit = report.split("## Audit before training")[1].split("##")[0]
    hacked_row = next(line for line in audit.splitlines() if line.startswith("| hacked |"))
    # paid for distance, predators gain by not capturing (the audit saw it before training)
    assert hacked_row.startswith("| hacked | not_potential, stalling, stall_margin, dead_term |")
    assert "predator_distance is a direct shaping term, not potential-based" in hacked_row
    assert "stalling: predators: capturing pays 100.00, less than the best" in hacked_row
    assert "| honest | dead_term | dead_term: base.obstacle_penalty never fired" in audit
    outcome = report.split("## Audit, monitor and outcome")[1]
    assert (
        f"| hacked | +35 | not_potential, stalling, stall_margin | 1/1 | 20 {no_ci} | "
        f"0.00 {no_ci} | reference |" in outcome
    )
    assert f"| honest | -5 | none | not watched | 1 {no_ci} | reference | 1.00 {no_ci} |" in outcome
    timing = report.split("## Monitor flags against the task metric")[1].split("##")[0]
    assert timing.count("| hacked | 0 |") == 1 and "| honest |" not in timing


@pytest.mark.slow  # a sweep trained to hacking, resumed
def test_the_audit_runs_before_training_and_resume_keeps_everything(hacked_sweep, tmp_path):
    spec, summary, _, out = hacked_sweep
    with open(out / "audit.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["arm", "check", "role", "term", "flagged", "detail"]
    flagged = {(r["arm"], r["check"], r["role"], r["term"]) for r in rows if r["flagged"] == "1"}
    assert flagged == {
        ("hacked", "not_potential", "", "predator_distance"),
        ("hacked", "stalling", "predator", ""),
        ("hacked", "stall_margin", "predator", ""),  # +35 a sub-step: 40 paid, 5 charged
        ("hacked", "dead_term", "", "base.obstacle_penalty"),  # no obstacles in this config
        ("honest", "dead_term", "", "base.obstacle_penalty"),
    }
    checks = {r["check"] for r in rows if r["arm"] == "honest"}
    assert checks == {
        "not_potential",
        "shaping_share",
        "early_termination",
        "stalling",
        "stall_margin",
        "ordering",
        "dominant_term",
        "dead_term",
    }
    # a resumed sweep reads its chunks back (monitor columns included) to the same bytes and
    # does not audit again
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "results.csv").unlink()
    (copy / "report.md").unlink()
    import ppage_jax.analysis.sweep.run as sweep_run

    def no_audit(*args, **kwargs):
        raise AssertionError("audited again on resume")

    saved, sweep_run.audit_rows = sweep_run.audit_rows, no_audit
    try:
        again = run_sweep(spec, output_dir=copy, progress=False, resume=True)
    finally:
        sweep_run.audit_rows = saved
    assert again["chunks_run"] == 0
    np.testing.assert_equal(again["results"], summary["results"])  # NaN equals NaN here
    for name in ("results.csv", "curves.csv", "audit.csv"):
        assert (copy / name).read_bytes() == (out / name).read_bytes(), name
    # the report too, but for its line of timings
    tables = [(d / "report.md").read_text().split("## Arms")[1] for d in (copy, out)]
    assert tables[0] == tables[1]
    # sweep.json keeps what the first call measured (chunk size, compile time) and adds the
    # resume's seconds to the first call's
    first, resumed = (json.loads((d / "sweep.json").read_text()) for d in (out, copy))
    assert resumed["chunk_size"] == first["chunk_size"] == 1
    assert resumed["compile_seconds"] == first["compile_seconds"] > 0
    assert resumed["program_bytes_per_device"] == first["program_bytes_per_device"]
    assert resumed["seconds"] >= first["seconds"] > 0
    assert resumed["monitor"] == first["monitor"] and resumed["chunks"] == 2


@pytest.mark.slow  # trains and evaluates twice
def test_sweep_rmst_is_the_run_evaluations_rmst(two_by_two):
    # one run trained alone and evaluated by `ppage-jax run`'s evaluation on the sweep's
    # held-out block gives the sweep's censored time to capture for that run
    import jax

    from ppage_jax.train.registry import algorithm
    from ppage_jax.train.run.evaluate import evaluate
    from ppage_jax.train.run.experiment import make_train_config

    tmp, summary, _ = two_by_two
    spec = load_sweep(tmp / "s.yaml")
    env = spec.make_env()
    params = spec.arm_params(env)[1]  # "both"
    train_fn, _, _ = trainer_functions(spec, env)
    runner, _ = jax.jit(train_fn)(jax.random.PRNGKey(spec.train_seed + 1), params)
    tc = make_train_config(spec.config, env)
    policy = algorithm(tc.algorithm).policy_state(runner)
    stacked = jax.tree.map(lambda a: a[None], policy)
    row = evaluate(
        tc, stacked, params, spec.eval_seed, spec.eval_episodes, which={"x": ("greedy", "greedy")}
    )["x"]
    swept = summary["results"]["both", 1]
    for metric in ("rmst", "km_median", "capture_rate", "truncated_share", "episode_length"):
        assert swept[metric] == row[metric], metric
    assert 0 < row["rmst"] <= 12


@pytest.mark.parametrize(
    "baseline, words",
    [
        (["base_only", "nope"], "'nope'"),
        ([], "[]"),
        ({"a": 1}, "{'a': 1}"),
    ],
)
def test_bad_baseline_lists_name_the_key(tmp_path, baseline, words):
    path = write_sweep(tmp_path / "bad.yaml", arms=ARMS, baseline=baseline)
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert err.value.key == "sweep.baseline" and words in str(err.value)
    assert "must name an arm (or be a list of arms): ['base_only', 'both']" in str(err.value)
    assert "\n" not in str(err.value)


def test_baseline_lists_and_the_audit_switch_are_read(tmp_path):
    spec = load_sweep(write_sweep(tmp_path / "s.yaml", arms=ARMS, baseline=["both", "base_only"]))
    assert (spec.baseline, spec.baselines, spec.audit) == ("both", ("both", "base_only"), False)
    kept = load_sweep(
        write_sweep(tmp_path / "t.yaml", arms=dict(ARMS, x={}), baseline=["both", "base_only"]),
        arms=["x"],
    )
    assert [a.name for a in kept.arms] == ["base_only", "both", "x"]  # references kept
    single = load_sweep(write_sweep(tmp_path / "u.yaml", arms=ARMS, baseline="both", audit=True))
    assert (single.baselines, single.audit) == (("both",), True)
    with pytest.raises(ConfigError, match="must be true or false") as err:
        load_sweep(write_sweep(tmp_path / "v.yaml", arms=ARMS, audit="yes"))
    assert err.value.key == "sweep.audit"
