"""The reward audit: baseline rollouts, per-term decomposition, and its flags."""

from __future__ import annotations

import json

import jax.numpy as jnp
import pytest

import ppage_jax as pj
from ppage_jax.analysis.audit import (
    AuditSettings,
    audit_rewards,
    format_audit_report,
    parse_policy_pairs,
)
from ppage_jax.analysis.audit.rollouts import _ROLLOUTS
from ppage_jax.cli.main import main as cli_main
from ppage_jax.state import NO_TRUNCATION

EPISODES = 16


def kinds(report, kind):
    return [f for f in report["flags"] if f["kind"] == kind]


def policy(report, name):
    return next(p for p in report["policies"] if p["name"] == name)


@pytest.fixture(scope="module")
def default_report(default_env):
    return audit_rewards(default_env, settings=AuditSettings(episodes=EPISODES))


def test_noop_pairs_match_hand_computed_returns(default_report):
    # Nobody moves, so nobody is captured: 500 turns, truncated. Each turn runs 3 sub-steps
    # (prey speed 3): predators pay 3 * 5 per turn, each prey earns 3 * 1 survival.
    annuity = (1 - 0.99**500) / (1 - 0.99)
    p = policy(default_report, "noop/noop")
    assert p["episode_length"] == 500 and p["capture_rate"] == 0.0
    # nobody captured: censored at the limit, RMST = the limit, no KM median
    assert p["rmst"] == 500 and p["rmst_ci"] == [500, 500] and p["km_median"] is None
    assert p["truncated_share"] == 1.0
    assert p["ended"] == {"terminated": 0, "truncated": EPISODES}
    assert p["returns"]["predator"]["base"] == pytest.approx(-15 * annuity, rel=1e-5)
    assert p["returns"]["predator"]["base.step_cost"] == pytest.approx(-15 * annuity, rel=1e-5)
    assert p["returns"]["prey"]["survival"] == pytest.approx(3 * annuity, rel=1e-5)
    assert p["returns"]["prey"]["total"] == pytest.approx(3 * annuity, rel=1e-5)
    assert p["shaping_share"]["prey"] == 1.0


def test_format_report_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match=r"pj\.format_report is deprecated.*format_audit"):
        assert pj.format_report is format_audit_report
    assert "format_audit_report" in pj.__all__ and "format_report" not in pj.__all__


def test_an_env_without_its_config_is_named_by_its_spec(default_env, default_report):
    assert default_report["config"] == "env spec"
    assert default_report["config_hash"] == default_env.spec.digest()
    assert format_audit_report(default_report).startswith(
        f"Reward audit of env spec (hash {default_env.spec.digest()}): 3 predators vs 3 prey"
    )


def test_components_add_up_to_the_base_term(default_report):
    for p in default_report["policies"]:
        for role, returns in p["returns"].items():
            parts = sum(v for k, v in returns.items() if k.startswith("base."))
            assert parts == pytest.approx(returns["base"], rel=1e-4, abs=1e-3), (p["name"], role)


@pytest.mark.slow  # a second audit
def test_intercept_is_audited_by_name_and_other_pairs_stay_the_same(default_env, default_report):
    # The rollout compiles only the baselines the pairs name; the chase/evade episodes are the
    # default audit's, and the intercept chase captures every one of them sooner on average.
    pairs = (("intercept", "evade"), ("chase", "evade"))
    report = audit_rewards(default_env, settings=AuditSettings(episodes=EPISODES, policies=pairs))
    chase = policy(report, "chase/evade")
    assert chase["rmst"] == policy(default_report, "chase/evade")["rmst"] == 14.8125
    assert chase["returns"] == policy(default_report, "chase/evade")["returns"]
    intercept = policy(report, "intercept/evade")
    assert intercept["capture_rate"] == 1.0 and intercept["rmst"] == 8.1875


def test_greedy_chase_captures_more_often_and_sooner_than_random(default_report):
    chase, rand = policy(default_report, "chase/evade"), policy(default_report, "random/evade")
    assert chase["capture_rate"] > rand["capture_rate"]
    for prey in ("noop", "random", "evade"):
        fast, slow = (
            policy(default_report, f"chase/{prey}"),
            policy(default_report, f"random/{prey}"),
        )
        assert fast["rmst"] < slow["rmst"]  # censored at the limit
        assert fast["km_median"] < (slow["km_median"] or float("inf"))
        assert fast["rmst"] == pytest.approx(fast["episode_length"])  # all censored at 500
    # random predators catch fewer than half the evading prey: no KM median, and the RMST
    # counts the uncaptured episodes at the limit (a mean over captured ones would not)
    assert rand["capture_rate"] < 0.5 and rand["km_median"] is None
    assert chase["rmst_ci"][1] < rand["rmst_ci"][0]


def test_obstacle_penalty_is_dead_with_blocking_on(default_report):
    dead = kinds(default_report, "dead_term")
    assert [(f["term"], f.get("component")) for f in dead] == [("base", "obstacle_penalty")]
    assert "block_agents_by_obstacles" in dead[0]["message"]
    rates = default_report["fire_rates"]
    assert rates["base.obstacle_penalty"] == {"predator": 0.0, "prey": 0.0}
    assert rates["base.capture_reward"]["predator"] > 0
    assert rates["base.step_cost"]["predator"] == 1.0


def test_default_config_flags(default_report):
    assert {f["term"] for f in kinds(default_report, "not_potential")} == {
        "predator_distance",
        "survival",
    }
    assert [f["role"] for f in kinds(default_report, "shaping_share")] == ["prey"]
    assert not kinds(default_report, "ordering")
    assert not kinds(default_report, "early_termination")
    assert not kinds(default_report, "stalling")
    term = default_report["termination"]
    assert term["prey"]["ending_payoff"] == pytest.approx(-100.0)
    assert term["predator"]["ending_payoff"] == pytest.approx(100.0)
    json.dumps(default_report)  # JSON-ready


def test_ordering_violation_and_stalling_on_a_config_that_pays_for_distance(default_env):
    # Weight -1 on predator_distance pays predators for staying far from the prey: policies
    # that capture less are paid more. Only reward numbers differ from the default config, so
    # the compiled rollout is reused.
    env = pj.make(
        "configs/default",
        {
            "rewards.shaping": [
                {"name": "predator_distance", "weight": -1.0},
                {"name": "survival", "weight": 1.0},
            ]
        },
    )
    report = audit_rewards(env, settings=AuditSettings(episodes=EPISODES))
    ordering = kinds(report, "ordering")
    assert ordering and all(f["role"] == "predator" for f in ordering)
    assert ("random/evade", "chase/evade") in {
        (f["better_paid"], f["better_task"]) for f in ordering
    }
    assert kinds(report, "stalling")
    static = env.spec.digest(rewards=False)
    assert static == default_env.spec.digest(rewards=False) != env.spec.digest()
    names = tuple(
        tuple(dict.fromkeys(pair[i] for pair in AuditSettings().policies)) for i in (0, 1)
    )
    programs = [p for key, p in _ROLLOUTS.items() if key[0] == static and key[-1] == names]
    assert len(programs) == 1 and programs[0]._cache_size() == 1


@pytest.mark.slow  # a second audit
def test_a_term_that_dominates_is_flagged(default_env):
    params = default_env.with_weights(default_env.default_params, predator_distance=50.0)
    report = audit_rewards(
        default_env,
        params,
        AuditSettings(
            episodes=EPISODES, policies=(("noop", "noop"), ("chase", "noop"), ("random", "evade"))
        ),
    )
    dominant = kinds(report, "dominant_term")
    assert [(f["term"], f["role"]) for f in dominant] == [("predator_distance", "predator")]
    assert not kinds(report, "early_termination")


@pytest.mark.slow  # a second audit
def test_early_termination_when_prey_pay_to_live(default_env):
    params = default_env.with_weights(default_env.default_params, survival=-5.0)
    report = audit_rewards(
        default_env, params, AuditSettings(episodes=EPISODES, policies=(("random", "random"),))
    )
    flag = kinds(report, "early_termination")
    assert flag and flag[0]["role"] == "prey"
    assert report["termination"]["prey"]["worst_continuation"] < -100


def test_clean_reward_has_no_flags(default_env):
    params = default_env.with_weights(
        default_env.default_params, predator_distance=0.0, survival=0.0
    )
    params = default_env.with_term_params(params, "base", obstacle_penalty=0.0)
    report = audit_rewards(default_env, params, AuditSettings(episodes=EPISODES))
    assert report["flags"] == []


@pytest.mark.slow  # a second env's audit
def test_obstacle_penalty_fires_with_blocking_off_and_potentials_are_not_flagged():
    env = pj.make(
        "configs/default",
        {
            "env.dynamics.block_agents_by_obstacles": False,
            "rewards.shaping": [
                {"name": "potential_distance", "weight": 0.5},
                {"name": "survival", "weight": 1.0},
            ],
        },
    )
    report = audit_rewards(
        env,
        settings=AuditSettings(
            episodes=EPISODES, policies=(("random", "random"), ("chase", "evade"))
        ),
    )
    assert not kinds(report, "dead_term")
    assert report["fire_rates"]["base.obstacle_penalty"]["prey"] > 0
    assert policy(report, "random/random")["returns"]["prey"]["base.obstacle_penalty"] < 0
    assert {f["term"] for f in kinds(report, "not_potential")} == {"survival"}


@pytest.mark.slow  # audits through the CLI
def test_cli_strict_exits_nonzero_and_prints_json(capsys, tmp_path):
    out = tmp_path / "audit.json"
    code = cli_main(
        [
            "audit",
            "configs/default",
            "--episodes",
            str(EPISODES),
            "--policies",
            "chase/evade",
            "--format",
            "json",
            "--json",
            str(out),
            "--strict",
        ]
    )
    assert code == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert [p["name"] for p in printed["policies"]] == ["chase/evade"]
    config = pj.load_config("configs/default")
    assert printed["config"] == "configs/default" and printed["config_hash"] == config.hash()
    code = cli_main(
        ["audit", "configs/default", "--episodes", str(EPISODES), "--policies", "chase/evade"]
    )
    assert code == 0
    assert "flags (" in capsys.readouterr().out


def test_bad_audit_inputs(default_env):
    with pytest.raises(ValueError, match="PREDATOR/PREY"):
        parse_policy_pairs("chase-evade")
    with pytest.raises(ValueError, match="unknown policy pair"):
        AuditSettings(policies=(("evade", "chase"),))
    unbounded = default_env.default_params.replace(max_steps=jnp.int32(NO_TRUNCATION))
    with pytest.raises(ValueError, match="max_steps"):
        audit_rewards(default_env, unbounded)


# ------------------------------------------------------------------ stall margin
@pytest.fixture(scope="module")
def closeness_env():
    """The default layout paying capture 10 with closeness and potential-based shaping: the
    three designs below differ only in reward numbers (one compiled rollout)."""
    return pj.make(
        "configs/default",
        {
            "rewards.base.params": {"capture_reward": 10.0, "step_cost": 0.0},
            "rewards.shaping": [
                {"name": "predator_closeness", "weight": 0.0},
                {"name": "potential_distance", "weight": 0.0},
            ],
            "experiment.roles": {"predators": "learn", "preys": "evade"},
        },
    )


def design(env, closeness=0.0, potential=0.0, cost=0.0):
    params = env.with_weights(
        env.default_params, predator_closeness=closeness, potential_distance=potential
    )
    return env.with_term_params(params, "base", step_cost=cost)


def stall_flags(report):
    return {f["kind"] for f in report["flags"]} & {"stalling", "stall_margin"}


def test_the_stall_margin_from_the_terms_bounds(closeness_env):
    from ppage_jax.analysis.audit.margin import stall_margins

    free = stall_margins(closeness_env, design(closeness_env, closeness=0.5))["predator"]
    assert free["margin"] == 0.5 and free["payments"] == {"predator_closeness": 0.5}
    paid = stall_margins(closeness_env, design(closeness_env, closeness=0.05, cost=0.1))
    assert paid["predator"]["margin"] == pytest.approx(-0.05)
    assert paid["predator"]["cost"] == pytest.approx(0.1)
    # potential-based terms are left out, whatever their weight
    big = stall_margins(closeness_env, design(closeness_env, potential=50.0))["predator"]
    assert big["margin"] == 0.0 and big["payments"] == {}
    # predator_distance pays at most 0 (a cost); at weight -1 it pays up to 2 (size - 1) = 18
    default = pj.make("configs/default")
    paid_far = default.with_weights(default.default_params, predator_distance=-1.0)
    margin = stall_margins(default, paid_far)["predator"]
    assert margin["payments"]["predator_distance"] == 18.0 and margin["margin"] == 18.0 - 5.0


@pytest.mark.parametrize(
    "closeness, potential, cost, flagged",
    [
        (0.0, 0.5, 0.0, False),  # potential-based shaping only
        (0.0, 5.0, 0.0, False),  # ... at a large weight
        (0.5, 0.0, 0.0, True),  # closeness 0.5, no cost: paid to keep going
        (0.05, 0.0, 0.1, False),  # closeness 0.05 outweighed by a cost of 0.1
    ],
)
def test_stalling_flags_follow_the_margin_not_potentials(
    closeness_env, closeness, potential, cost, flagged
):
    params = design(closeness_env, closeness, potential, cost)
    report = audit_rewards(closeness_env, params, AuditSettings(episodes=EPISODES))
    assert bool(stall_flags(report)) is flagged
    if flagged:
        assert stall_flags(report) == {"stalling", "stall_margin"}
        assert "stall margin +0.5 > 0" in kinds(report, "stall_margin")[0]["message"]
    assert "stall margin (analytic" in format_audit_report(report)
