"""The PPO rollout's bootstrap (``next_value``): the value of the final observation only
where a truncation needs it (the truncated grids gathered in the scan and passed after it,
or a pass on every grid in a step with many), the next step's value elsewhere; the same
``next_value`` (where it counts) and the same GAE as a value pass on ``final_obs`` after
every step."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from train_testing import tiny_config

from ppage_jax.train import make_train_config
from ppage_jax.train.algorithms import ippo
from ppage_jax.train.kit import networks, pg, roles
from ppage_jax.train.kit.rollout import env_step

TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}
# Two predators and two free-moving prey from random starts on an empty 5x5 grid, the
# episode cut at 6 turns: within 32 steps grids are truncated (all 8 at once, later one or
# a few), terminate (both prey caught) and go on with one prey caught.
SMALL = {
    "env.termination.max_steps": 6,
    "env.termination.capture_threshold": 2,
    "env.starts": None,
    "agents.preys": {"count": 2, "speed": 1, "stamina": None},
    "experiment.num_envs": 8,
}
CASES = {  # name: (algorithm, its params, config overrides)
    "ippo": ("ippo", {}, {}),
    "mappo-prey-with-prior-and-teacher": (  # the predators chase (a fixed role)
        "mappo",
        {"prior": "greedy", "teacher": "greedy"},
        {"experiment.roles.predators": "chase"},
    ),
}


def every_step_bootstrap(runner, tc, params, critic_input, trajectories):
    """The reference: the rollout replayed with its own keys and actions, ``V(final_obs)``
    (``V(final_state)`` for a centralised critic) after every step. Returns role ->
    next_value [T, E, n], and per step the reward, agent_terminal and episode_end of all
    agents, to check that the replay is the rollout."""

    def one_step(carry, chosen):
        env, key = carry
        key, _, k_fixed, k_env = jax.random.split(key, 4)
        actions = pg.role_actions(tc, chosen, env.obs)
        actions = roles.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, actions)
        env, step = env_step(tc, k_env, env, actions, params, tc.hp.gamma)
        values = {}
        for role in chosen:
            learner = runner.learners[role]
            c = None if critic_input is None else critic_input(tc, role, step.final_state)
            x = networks.role_input(tc, role, step.final_obs)
            values[role] = learner.apply_fn(learner.params, x, c)[1]
        return (env, key), (values, step.reward, step.agent_terminal, step.episode_end)

    chosen = {role: traj.action for role, traj in trajectories.items()}
    _, out = jax.lax.scan(one_step, (runner.env, runner.key), chosen)
    return out


@pytest.mark.parametrize(
    "case, gathered",
    [
        ("ippo", 2),  # steps with 1-2 truncated grids gather them; more: a full pass
        pytest.param("ippo", None, marks=pytest.mark.slow),  # default: all 8 grids gathered
        pytest.param("mappo-prey-with-prior-and-teacher", 2, marks=pytest.mark.slow),
    ],
)
def test_the_bootstrap_matches_a_value_pass_after_every_step(case, gathered, monkeypatch):
    if gathered is not None:
        monkeypatch.setattr(ippo, "truncated_grids", lambda num_envs: gathered)
    algo, params, overrides = CASES[case]
    hp = dict(params, num_steps=32, hidden_layers=[16])
    tc = make_train_config(tiny_config(algo, hp, **dict(SMALL, **overrides)))
    critic_input = networks.critic_input if algo == "mappo" else None
    env_params = tc.env.default_params

    def gae(traj):
        return ippo.gae(traj, tc.hp.gamma, tc.hp.gae_lambda)

    @jax.jit
    def run(key):
        runner = ippo.init(key, tc, env_params, critic_input)
        _, trajectories, _ = ippo.rollout(runner, tc, env_params, critic_input)
        reference = every_step_bootstrap(runner, tc, env_params, critic_input, trajectories)
        advantages = {  # new, and with the reference's next_value
            role: (gae(traj), gae(traj.replace(next_value=reference[0][role])))
            for role, traj in trajectories.items()
        }
        return trajectories, reference, advantages

    trajectories, (reference, reward, agent_terminal, episode_end), advantages = run(
        jax.random.PRNGKey(3)
    )
    assert set(trajectories) == set(tc.learning_roles) == set(reference)

    # The replay is the rollout, and the rollout holds every kind of step.
    terminated = np.asarray(episode_end & agent_terminal[..., 0])  # predators: the grid's end
    truncated = np.asarray(episode_end) & ~terminated
    prey = ~np.asarray(tc.env.is_predator)
    caught = np.asarray(agent_terminal)[..., prey] & ~np.asarray(episode_end)[..., None]
    assert truncated.any() and terminated.any() and caught.any()
    assert (~np.asarray(episode_end)).any()
    per_step = truncated.sum(-1)  # truncated grids per step: every branch of the pass runs
    assert (per_step == 0).any() and (per_step > 0).any()
    if gathered is not None:
        assert ((per_step > 0) & (per_step <= gathered)).any() and (per_step > gathered).any()

    for role, traj in trajectories.items():
        rows = tc.agents_of(role)
        np.testing.assert_array_equal(traj.reward, reward[..., rows] * tc.hp.reward_scale)
        np.testing.assert_array_equal(traj.agent_terminal, agent_terminal[..., rows])
        np.testing.assert_array_equal(traj.episode_end[..., 0], episode_end)

        # next_value counts where the agent is not terminal; elsewhere it is multiplied by 0.
        counts = ~np.asarray(traj.agent_terminal)
        got = np.where(counts, traj.next_value, 0.0)
        want = np.where(counts, reference[role], 0.0)
        np.testing.assert_allclose(got, want, **TOLERANCE, err_msg=role)
        assert np.isfinite(np.asarray(traj.next_value)).all()

        (new_adv, new_targets), (old_adv, old_targets) = advantages[role]
        np.testing.assert_allclose(new_adv, old_adv, **TOLERANCE, err_msg=role)
        np.testing.assert_allclose(new_targets, old_targets, **TOLERANCE, err_msg=role)
