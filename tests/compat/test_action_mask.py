"""GridWorld.action_mask against step: on random states, the masked actions are exactly the
moves that leave the agent where it is (but for moves refused by another agent on the target
cell, which are never masked), and the no-op is never masked."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppage_jax as pj
from ppage_jax.state import UNLIMITED_STAMINA

# small grids with many obstacles so walls, corners and obstacles are hit often
CASES = {
    "discrete_5/blocking/sharing": {
        "actions.type": "discrete_5",
        "env.size": 4,
        "env.obstacle_percentage": 25.0,
        "agents.predators.count": 1,
        "agents.preys.count": 2,
        "agents.preys.speed": 2,
    },
    "discrete_9/no-blocking/no-sharing": {
        "actions.type": "discrete_9",
        "env.size": 3,
        "env.obstacle_percentage": 20.0,
        "env.dynamics.block_agents_by_obstacles": False,
        "env.dynamics.allow_cell_sharing": False,
        "agents.predators.count": 2,
        "agents.preys.count": 2,
        "agents.preys.speed": 2,
    },
}


def random_states(env, key, n):
    """Reset layouts with random captured prey, stamina (0, 1 or unlimited) and speeds."""
    k_reset, k_cap, k_sta, k_spd = jax.random.split(key, 4)
    _, states = jax.vmap(env.reset)(jax.random.split(k_reset, n))
    prey = ~jnp.asarray(env.is_predator)
    captured = jax.random.bernoulli(k_cap, 0.3, (n, env.num_agents)) & prey
    stamina = jax.random.choice(
        k_sta,
        jnp.array([0, 1, UNLIMITED_STAMINA]),
        (n, env.num_agents),
        p=jnp.array([0.2, 0.2, 0.6]),
    )
    states = states.replace(captured=captured, stamina=stamina.astype(jnp.int32))
    speeds = jax.random.randint(k_spd, (n, env.num_agents), 0, env.layout.max_speed + 1)
    return states, speeds


@pytest.mark.parametrize("case", list(CASES))
def test_masked_moves_are_exactly_the_moves_that_stay(case):
    env = pj.make(None, CASES[case])
    n_agents, n_actions = env.num_agents, env.num_actions
    states, speeds = jax.jit(random_states, static_argnums=(0, 2))(env, jax.random.PRNGKey(0), 48)

    @jax.jit
    def check(state, speeds):
        params = env.default_params.replace(speeds=speeds)
        mask = env.action_mask(state, params)

        def moved(agent, action):  # only `agent` acts; everybody else takes the no-op
            actions = jnp.full(n_agents, env.noop_action).at[agent].set(action)
            after = env.step(jax.random.PRNGKey(0), state, actions, params)[1]
            return (after.positions[agent] != state.positions[agent]).any()

        agents, actions = jnp.meshgrid(jnp.arange(n_agents), jnp.arange(n_actions), indexing="ij")
        moves = jax.vmap(jax.vmap(moved))(agents, actions)
        # the first sub-step's target cell, and whether another agent of the same role
        # (not captured) holds it, which refuses the move without cell sharing
        target = jnp.clip(
            state.positions[:, None] + jnp.asarray(env.action_table)[None], 0, env.layout.size - 1
        )  # [A, N, 2]
        same_role = jnp.asarray(env.is_predator)[:, None] == jnp.asarray(env.is_predator)
        holder = (
            (target[:, :, None] == state.positions[None, None]).all(-1)
            & ~state.captured[None, None]
            & same_role[:, None]
            & ~jnp.eye(n_agents, dtype=bool)[:, None]
        )  # [A, N, A]
        return mask, moves, holder.any(-1)

    mask, moves, held = (np.asarray(x) for x in jax.jit(jax.vmap(check))(states, speeds))
    assert mask.shape == (48, n_agents, n_actions) and mask.dtype == bool
    assert mask[..., env.noop_action].all()
    if env.layout.allow_cell_sharing:
        np.testing.assert_array_equal(mask & ~np.eye(n_actions, dtype=bool)[env.noop_action], moves)
    else:
        assert not (moves & ~mask).any()  # a masked move never moves
        # an allowed move that stays is one refused by another agent on its target
        stays = mask & ~moves
        stays[..., env.noop_action] = False
        np.testing.assert_array_equal(
            stays, mask & held & ~np.eye(n_actions, dtype=bool)[env.noop_action]
        )
    # the random states exercise both sides: masked moves and allowed ones
    noop_col = np.eye(n_actions, dtype=bool)[env.noop_action]
    assert (~mask[..., ~noop_col]).sum() > 50 and mask[..., ~noop_col].sum() > 50


def test_mask_of_a_known_layout():
    """4x4, obstacle at (1, 0); predator in the corner (0, 0), prey_1 captured, prey_2 free."""
    env = pj.make(
        None,
        {
            "env.size": 4,
            "agents.predators.count": 1,
            "agents.preys.count": 2,
            "env.obstacle_percentage": 6.25,
        },
    )
    _, state = env.reset_to(jnp.array([[0, 0], [3, 3], [2, 2]]), jnp.array([[1, 0]]))
    state = state.replace(captured=jnp.array([False, True, False]))
    # discrete_5: right (+x), +y, left (-x), -y, no-op
    mask = jax.jit(env.action_mask)
    np.testing.assert_array_equal(
        np.asarray(mask(state)),
        [
            [False, True, False, False, True],  # right is the obstacle; left and -y leave the grid
            [False, False, False, False, True],  # captured: only the no-op
            [True, True, True, True, True],
        ],
    )  # free in the middle
    unblocked = pj.make(
        None,
        {
            "env.size": 4,
            "agents.predators.count": 1,
            "agents.preys.count": 2,
            "env.obstacle_percentage": 6.25,
            "env.dynamics.block_agents_by_obstacles": False,
        },
    )
    mask_unblocked = np.asarray(jax.jit(unblocked.action_mask)(state))
    assert mask_unblocked[0].tolist() == [True, True, False, False, True]
    # no stamina left: only the no-op
    tired = state.replace(stamina=jnp.array([0, 5, 5]))
    assert np.asarray(mask(tired))[0].tolist() == [False] * 4 + [True]
