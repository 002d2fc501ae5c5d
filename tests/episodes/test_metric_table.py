"""The metric table (ppage_jax.episodes.metrics) names every task metric once: the sweep and
search reports, the search's ranking, its search file and the reward-hacking monitor read it,
so a metric added there is searched, ranked and labelled without touching another file."""

from __future__ import annotations

import pytest
import yaml
from search_testing import write_search_file

from ppage_jax.analysis.family.endpoints import DERIVED, ENDPOINTS, HEADLINE
from ppage_jax.analysis.family.signals import BAD_DIRECTION
from ppage_jax.analysis.search.constraint import judge
from ppage_jax.analysis.search.report import scored_on
from ppage_jax.analysis.search.spec import Constraint, load_search
from ppage_jax.analysis.sweep.report import DIAGNOSTICS
from ppage_jax.config import ConfigError
from ppage_jax.defaults import ROLES
from ppage_jax.episodes import METRICS, Metric
from ppage_jax.episodes.metrics import better_sign, headline, metric_of, rankable
from ppage_jax.train.run import monitor


def test_every_metric_a_report_or_the_monitor_names_is_in_the_table():
    # the sweep report's headline and diagnostics, the family's endpoints, the search's
    # metrics and the re-evaluation tables (RMST, capture rate) of the search and comparison
    named = {*HEADLINE, *DIAGNOSTICS, *(set(ENDPOINTS) - set(DERIVED)), *rankable()}
    assert named | {"rmst", "capture_rate"} <= set(METRICS)
    for role in ROLES:  # the monitor's task metrics (base_return: the role's own)
        for name in (*monitor.TASK_METRICS, "episode_length"):
            assert metric_of(name, role).name in METRICS
    assert metric_of("base_return", "prey").name == "base_return/prey"


def test_the_tables_read_from_it_are_the_ones_written_out_before():
    assert list(HEADLINE) == [
        "rmst",
        "km_median",
        "capture_rate",
        "truncated_share",
        "episode_length",
        "base_return/predator",
        "base_return/prey",
    ]
    assert HEADLINE["rmst"] == ("RMST: mean turns to capture, censored", False)
    assert HEADLINE["base_return/prey"] == ("base return, prey", True)
    assert DIAGNOSTICS == {
        "steps_to_capture": ("steps to capture, captured episodes only (survivor-biased)", False)
    }
    assert rankable() == ("rmst", "km_median", "capture_rate", "truncated_share", "episode_length")
    assert METRICS["rmst"].text == "RMST (turns to capture, censored)"
    assert METRICS["km_median"].text == "KM median turns to capture"
    assert monitor.TASK_BAD == {
        "predator": {"capture_rate": -1, "steps_to_capture": +1, "base_return": -1},
        "prey": {"capture_rate": +1, "steps_to_capture": -1, "base_return": -1},
    }
    assert monitor.LENGTH_BAD == {"predator": +1, "prey": -1}
    assert monitor.SURVIVOR_BIASED == ("steps_to_capture",)
    assert BAD_DIRECTION == {
        "captures": -1,
        "capture_rate": -1,
        "episode_length": +1,
        "steps_to_capture": +1,
        "hover_share": +1,
    }


def test_the_search_counts_the_monitors_own_check_names():
    assert set(Constraint().checks) <= set(monitor.CHECKS)
    assert Constraint().checks == monitor.TREND_CHECKS


def _search_file(tmp_path, metric: str):
    path = write_search_file(tmp_path / "search.yaml")
    body = yaml.safe_load(path.read_text())
    body["search"]["eval"]["metric"] = metric
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def test_a_metric_added_to_the_table_is_searched_ranked_and_labelled(tmp_path, monkeypatch):
    path = _search_file(tmp_path, "hover_share")
    with pytest.raises(ConfigError, match=r"search\.eval\.metric = 'hover_share'"):
        load_search(path)
    hover = Metric("hover_share", "share of hovering turns", False)
    monkeypatch.setitem(METRICS, "hover_share", hover)
    spec = load_search(path)
    assert spec.metric == "hover_share" and spec.direction == -1
    assert better_sign("hover_share", "prey") == +1  # a task metric: the prey's way is opposite
    assert headline()["hover_share"] == ("share of hovering turns", False)
    runs = {0: {"hover_share": 0.25}, 1: {"hover_share": 0.75}}
    assert judge(runs, spec.metric, spec.direction, spec.constraint).loss == 0.5
    assert scored_on(spec) == "**share of hovering turns** (lower is better; mean over its seeds)"

    # turned around in the table alone: ranked and labelled the other way
    monkeypatch.setitem(METRICS, "hover_share", Metric("hover_share", "hovering", True))
    spec = load_search(path)
    assert spec.direction == +1
    assert judge(runs, spec.metric, spec.direction, spec.constraint).loss == -0.5
    assert scored_on(spec) == "**hovering** (higher is better; mean over its seeds)"

    # survivor-biased, or a role's own: never ranked on
    monkeypatch.setitem(METRICS, "hover_share", Metric("hover_share", "h", False, True))
    with pytest.raises(ConfigError, match="survivor-biased"):
        load_search(path)
    monkeypatch.setitem(METRICS, "hover_share", Metric("hover_share", "h", True, role="prey"))
    with pytest.raises(ConfigError, match="must be one of"):
        load_search(path)


ADD_TO_THE_TABLE = """
import json
from ppage_jax.episodes import metrics
metrics.METRICS["captures"] = metrics.Metric("captures", "captures per episode", True)
# every reader below is imported after the table gained its row, as after an edit of the file
from ppage_jax.analysis.batch.metrics import EPISODE_METRICS
from ppage_jax.analysis.family.endpoints import ENDPOINTS, HEADLINE
from ppage_jax.analysis.sweep.report import metric_table
print(json.dumps({
    "kept": list(EPISODE_METRICS),
    "endpoint": ENDPOINTS["captures"],
    "rows": metric_table({"captures": {"b": {"n": 4, "poi": {}, "poi_n": {}}}}, HEADLINE, []),
}))
"""


def test_a_row_added_to_the_table_file_reaches_the_sweep_report_and_results(tmp_path):
    """The table's file is the only one edited (here: before any reader is imported): the
    sweep keeps the metric per run, the analysis may declare it an endpoint and the sweep
    report labels its row."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", ADD_TO_THE_TABLE], capture_output=True, text=True, check=True
    ).stdout
    seen = json.loads(out.splitlines()[-1])
    assert seen["kept"].count("captures") == 1 and seen["kept"][0] == "rmst"
    assert seen["endpoint"] == ["captures per episode", True]
    assert seen["rows"][-1].startswith("| captures per episode (higher is better) | b | 4 |")
