"""JaxMARL's own wrappers over the adapter (LogWrapper, CTRolloutManager), its spaces, the
world state, final_obs through the baselines' info reshape, masks and config keywords."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppage_jax.compat.jaxmarl import JaxMARLEnv
from ppage_jax.config import ConfigError

baselines = pytest.importorskip("jaxmarl.wrappers.baselines")
from jaxmarl.environments import spaces as jaxmarl_spaces  # noqa: E402

# 1v1 on a 6x6 grid, 5-turn episodes
SMALL = {"env": {"size": 6, "termination": {"max_steps": 5}}}


@pytest.fixture(scope="module")
def marl():
    return JaxMARLEnv("1v1", world_state=True, final_obs=True, action_masks=True, **SMALL)


def test_spaces_are_jaxmarls_with_real_bounds(marl):
    space = marl.observation_space("prey_1")
    assert isinstance(space, jaxmarl_spaces.Box)
    assert isinstance(marl.action_space("prey_1"), jaxmarl_spaces.Discrete)
    assert baselines.get_space_dim(space) == marl.env.observation_size == 44
    # local_radius 8 on 6x6: [x, y, radius, captured] then per slot [present, dx, dy, ...]
    assert np.asarray(space.low[:7]).tolist() == [0, 0, 0, 0, 0, -5, -5]
    assert np.asarray(space.high[:7]).tolist() == [5, 5, 8, 1, 1, 5, 5]
    sample = space.sample(jax.random.PRNGKey(0))
    assert bool(space.contains(sample)) and float(jnp.abs(sample).max()) <= 10
    builtin = JaxMARLEnv("1v1", spaces="builtin", **SMALL)
    assert type(builtin.action_space("prey_1")).__module__ == "ppage_jax.compat.jax_spaces"
    with pytest.raises(ValueError, match=r"spaces = 'torch': must be one of \['auto', "):
        JaxMARLEnv("1v1", spaces="torch")


def test_log_wrapper_and_ct_rollout_manager_jitted_rollout(marl):
    env = baselines.CTRolloutManager(baselines.LogWrapper(marl), batch_size=4)
    env.global_state = lambda obs, state: obs["world_state"][..., 0, :]
    env.get_valid_actions = lambda state: jax.vmap(marl.get_avail_actions)(state.env_state)

    @jax.jit
    def rollout(key):
        obs, state = env.batch_reset(key)

        def turn(carry, k):
            obs, state = carry
            k_act, k_step = jax.random.split(k)
            valid = env.get_valid_actions(state)
            actions = {
                a: jax.random.categorical(
                    jax.random.fold_in(k_act, i), jnp.log(valid[a].astype(jnp.float32))
                )
                for i, a in enumerate(marl.agents)
            }
            obs, state, rewards, dones, infos = env.batch_step(k_step, state, actions)
            chosen_valid = valid["predator_1"][jnp.arange(4), actions["predator_1"]]
            return (obs, state), (
                obs,
                rewards["__all__"],
                dones["__all__"],
                infos["returned_episode_lengths"],
                chosen_valid,
            )

        return jax.lax.scan(turn, (obs, state), jax.random.split(key, 12))[1]

    obs, team_reward, done, lengths, chosen_valid = rollout(jax.random.PRNGKey(0))
    # agent observations are tagged with a one-hot agent id (zeroed when the agent is done)
    assert obs["prey_1"].shape == (12, 4, marl.env.observation_size + 2)
    tags, done = np.asarray(obs["prey_1"][..., -2:]), np.asarray(done)
    assert tags[~done].tolist() == [[0.0, 1.0]] * int((~done).sum())
    assert not tags[done].any()
    assert obs["__all__"].shape == (12, 4, marl.state_size)
    assert team_reward.shape == (12, 4) and bool(done.any())
    # no capture in these 12 turns: 0 until the first episode ends, then the 5-turn limit
    assert np.unique(np.asarray(lengths)).tolist() == [0, 5]
    assert bool(chosen_valid.all())  # sampled from the real masks


def test_world_state_final_obs_and_the_standard_info_reshape(marl):
    num_envs = 3
    keys = jax.random.split(jax.random.PRNGKey(1), num_envs)
    obs, state = jax.jit(jax.vmap(marl.reset))(keys)
    assert obs["world_state"].shape == (num_envs, 2, marl.state_size)
    assert marl.world_state_size() == marl.state_size == marl.env.global_state_size
    step = jax.jit(jax.vmap(marl.step))
    for turn in range(5):  # no-ops: nobody moves, so the last observation is the first
        last_obs = obs
        keys = jax.random.split(jax.random.PRNGKey(10 + turn), num_envs)
        obs, state, rewards, dones, infos = step(keys, state, {})
    assert bool(dones["__all__"].all())  # truncated at turn 5, then auto-reset
    ws = np.asarray(obs["world_state"])
    np.testing.assert_array_equal(ws[:, 0], ws[:, 1])
    np.testing.assert_array_equal(ws[:, 0], np.asarray(jax.jit(jax.vmap(marl.get_state))(state)))
    # every JaxMARL baseline reshapes each info leaf to NUM_ACTORS
    infos = jax.tree.map(lambda x: x.reshape(num_envs * marl.num_agents), infos)
    final = np.asarray(marl.stack_final_obs(infos["final_obs"]))
    assert final.shape == (num_envs * marl.num_agents, marl.env.observation_size)
    # rows are env-major after that reshape: [env 0 predator, env 0 prey, env 1 ...]
    for i, agent in enumerate(marl.agents):
        np.testing.assert_array_equal(
            final.reshape(num_envs, 2, -1)[:, i], np.asarray(last_obs[agent])
        )
    assert not np.array_equal(
        final.reshape(num_envs, 2, -1)[:, 0], np.asarray(obs["predator_1"])
    )  # auto-reset to a new layout


def test_avail_actions_are_the_cores_mask(marl):
    _, state = jax.jit(marl.reset)(jax.random.PRNGKey(2))
    state = state.replace(positions=jnp.array([[0, 0], [5, 5]]))
    avail = jax.jit(marl.get_avail_actions)(state)
    mask = np.asarray(jax.jit(marl.env.action_mask)(state)).astype(np.uint8)
    assert avail["predator_1"].dtype == jnp.uint8
    assert np.asarray(avail["predator_1"]).tolist() == mask[0].tolist()
    assert mask[0][[2, 3]].tolist() == [0, 0]  # left and -y leave the grid from (0, 0)
    assert mask[1][[0, 1]].tolist() == [0, 0]  # right and +y leave it from (5, 5)


def test_config_overrides_as_keywords():
    assert JaxMARLEnv("1v1", overrides={"env.size": 7}).env.layout.size == 7
    assert JaxMARLEnv("1v1", **{"env.size": 7}).env.layout.size == 7
    env = JaxMARLEnv("1v1", env={"size": 7}, agents={"preys": {"count": 2}})
    assert env.agents == ["predator_1", "prey_1", "prey_2"] and env.env.layout.size == 7
    with pytest.raises(ConfigError, match="env.size"):
        JaxMARLEnv("1v1", env={"size": "big"})
    omegaconf = pytest.importorskip("omegaconf")
    kwargs = omegaconf.OmegaConf.create({"env": {"size": 7, "starts": [[0, 0], [6, 6]]}})
    env = JaxMARLEnv("1v1", **kwargs)
    assert env.env.spec.fixed_starts == ((0, 0), (6, 6))
    spec = env.env.spec.replace(size=8, fixed_starts=None)
    assert JaxMARLEnv(spec).env.spec == spec
    with pytest.raises(ValueError, match="need a config"):
        JaxMARLEnv(spec, env={"size": 7})
