"""PettingZoo's own test suite, SuperSuit's wrappers (in process and in two forked workers),
and the PettingZoo adapter's state, masks, writable observations and config keywords."""

import functools
import os
import subprocess
import sys
import textwrap
import types
import warnings

import jax
import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from pettingzoo.test import (  # noqa: E402
    api_test,
    max_cycles_test,
    parallel_api_test,
    parallel_seed_test,
    render_test,
    seed_test,
    state_test,
)

from ppage_jax.compat import pettingzoo as ppz  # noqa: E402
from ppage_jax.config import ConfigError  # noqa: E402
from ppage_jax.config.env_spec import EnvSpec  # noqa: E402

# 1v1 on a 6x6 grid (local_radius 8 observations): every test here shares its compiled step
SMALL = {"env": {"size": 6}}
# far apart on a 12x12 grid without obstacles: no capture within the 4 cycles
FAR = {"env": {"size": 12, "starts": [[0, 0], [11, 11]], "obstacle_percentage": 0.0}}


def small_parallel(**kwargs):
    return ppz.parallel_env("1v1", action_masks=True, **SMALL, **kwargs)


def small_aec(**kwargs):
    return ppz.env("1v1", action_masks=True, **SMALL, **kwargs)


@pytest.fixture
def strict_warnings():
    """PettingZoo's tests report problems as warnings: make them errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def test_parallel_api_and_seed_tests(strict_warnings):
    parallel_api_test(small_parallel(), num_cycles=60)
    parallel_seed_test(small_parallel, num_cycles=60)


def test_aec_api_seed_and_state_tests(strict_warnings):
    api_test(small_aec(), num_cycles=60)
    seed_test(small_aec, num_cycles=60)
    state_test(small_aec(), small_parallel(), num_cycles=10)


def test_render_test_with_a_headless_window(monkeypatch, strict_warnings):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setitem(ppz.PettingZooEnv.metadata, "render_fps", 1000)
    render_test(small_aec)
    import pygame

    env = small_parallel(render_mode="human")
    env.reset(seed=0)
    assert env.render() is None
    window = pygame.display.get_surface()
    assert window.get_size() == (600, 600)  # env.window_size on the longer side
    assert window.get_at((1, 1))[:3] != (0, 0, 0)  # the frame was drawn
    env.close()
    assert pygame.display.get_surface() is None


def test_max_cycles_test_and_module_constructors():
    assert callable(ppz.raw_env) and callable(ppz.env) and callable(ppz.parallel_env)
    module = types.SimpleNamespace(
        parallel_env=functools.partial(ppz.parallel_env, "1v1", **FAR),
        env=functools.partial(ppz.env, "1v1", **FAR),
    )
    max_cycles_test(module)
    env = ppz.parallel_env("1v1", max_cycles=7, **FAR)
    assert env.config["env"]["termination"]["max_steps"] == 7
    assert isinstance(ppz.raw_env("1v1", **FAR).unwrapped, ppz.PettingZooEnv)


def test_state_masks_and_writable_observations():
    env = small_parallel()
    obs, infos = env.reset(seed=3)
    grid = env.env
    np.testing.assert_array_equal(env.state(), np.asarray(grid.global_state(env.grid_state)))
    assert env.state().shape == env.state_space.shape == (grid.global_state_size,) == (44,)
    mask = np.asarray(grid.action_mask(env.grid_state))
    for i, agent in enumerate(env.possible_agents):
        assert infos[agent]["action_mask"].dtype == np.int8
        np.testing.assert_array_equal(infos[agent]["action_mask"], mask[i])
        before = obs[agent].copy()
        obs[agent] += 1  # writable NumPy
        np.testing.assert_array_equal(obs[agent], before + 1)
    _, _, _, _, infos = env.step({"predator_1": 0})
    mask = np.asarray(grid.action_mask(env.grid_state))
    np.testing.assert_array_equal(infos["prey_1"]["action_mask"], mask[1])
    # masks are offered only on request (PPAGE does not mask)
    plain = ppz.parallel_env("1v1", **SMALL)
    assert plain.reset(seed=3)[1] == {"predator_1": {}, "prey_1": {}}
    assert "action_mask" not in plain.step({})[4]["prey_1"]
    # the default config's global state: 4 per agent + the 10x10 obstacle map
    assert ppz.parallel_env("default").state_space.shape == (124,)


def test_config_keywords_and_errors():
    assert ppz.parallel_env("1v1", env={"size": 7}).config["env"]["size"] == 7
    assert ppz.parallel_env("1v1", overrides={"env.size": 7}).config["env"]["size"] == 7
    assert ppz.parallel_env("1v1", **{"env.size": 7}).config["env"]["size"] == 7
    with pytest.raises(ConfigError, match="unknown key; allowed keys under <top level>"):
        ppz.parallel_env("1v1", bogus=1)
    with pytest.raises(ValueError, match=r"render_mode = 'ansi': must be one of \['human', "):
        ppz.parallel_env("1v1", render_mode="ansi")


def test_an_env_spec_or_a_grid_needs_no_config():
    spec = EnvSpec(size=6, n_predators=1, n_prey=1, obstacle_percentage=0.0, max_steps=5)
    env = ppz.parallel_env(spec)
    assert env.config is None and env.spec == spec and env.render_mode is None
    assert env.possible_agents == ["predator_1", "prey_1"]
    obs, _ = env.reset()  # seeded with the package default env.seed (42)
    again, _ = ppz.parallel_env(spec).reset(seed=42)
    np.testing.assert_array_equal(obs["prey_1"], again["prey_1"])
    grid = env.env
    assert grid.spec == spec and ppz.parallel_env(grid).env is grid
    longer = ppz.parallel_env(grid, max_cycles=9)
    assert longer.spec == spec.replace(max_steps=9) and longer.env.spec.max_steps == 9
    with pytest.raises(ValueError, match=r"config overrides \['env'\] need a config"):
        ppz.parallel_env(grid, env={"size": 7})
    assert ppz.parallel_env("1v1", max_cycles=7, **SMALL).spec.max_steps == 7


def test_supersuit_padding_black_death_and_vector_env():
    ss = pytest.importorskip("supersuit")
    from supersuit.multiagent_wrappers.black_death import black_death_par

    class black_death_fixed(black_death_par):
        """SuperSuit 3.11.0's black_death_v3 ends an episode only when every agent is both
        terminated and truncated; here it ends when the wrapped env has no agent left."""

        def step(self, actions):
            obs, rewards, _, _, infos = super().step(actions)
            done = not self.env.agents
            if done:
                self.agents.clear()
            dones = dict.fromkeys(obs, done)
            return obs, rewards, dones, dones, infos

    # 2 predators vs 2 prey: a captured prey leaves before the episode ends
    env = ppz.parallel_env(
        "1v1",
        agents={"predators": {"count": 2}, "preys": {"count": 2}},
        env={"size": 5, "termination": {"capture_threshold": 2, "max_steps": 6}},
    )
    env = ss.pad_action_space_v0(ss.pad_observations_v0(env))
    vec = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(black_death_fixed(env)), 2)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (8, env.observation_space("prey_1").shape[0])
    rng, ends, zero_rows = np.random.default_rng(0), 0, 0
    for _ in range(14):
        obs, rewards, terms, truncs, _ = vec.step(rng.integers(0, 5, 8))
        ends += int((terms | truncs).reshape(2, 4).all(axis=1).sum())
        zero_rows += int((obs == 0).all(axis=1).sum())
    assert ends == 2 * 2  # each of the 2 grids ended twice in 14 turns (max_steps 6)
    assert zero_rows == 3  # a captured prey's padded rows while its grid played on
    assert all(vec.observation_space.contains(row) for row in obs)


FORK_SCRIPT = textwrap.dedent("""
    import multiprocessing, numpy as np, supersuit as ss
    from jax._src import xla_bridge
    from ppage_jax.compat.pettingzoo import parallel_env
    env = parallel_env("1v1", env={"size": 6, "termination": {"max_steps": 3}})
    assert not xla_bridge.backends_are_initialized(), "constructing started JAX"
    vec = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), 2, num_cpus=2)
    obs, _ = vec.reset(seed=0)
    ended = 0
    for _ in range(4):
        obs, rew, term, trunc, _ = vec.step(np.array([0, 1, 2, 3]))
        ended += int((term | trunc).reshape(2, 2).all(axis=1).sum())
    assert not xla_bridge.backends_are_initialized(), "the parent started JAX"
    print(multiprocessing.get_start_method(), type(vec).__name__, obs.shape, ended >= 2)
    vec.close()
""")


def test_fork_safe_construction_with_two_supersuit_workers():
    """A fresh process builds the adapter (no JAX backend starts) and SuperSuit forks two
    worker processes (the default start method) that step it; a deadlock times out."""
    pytest.importorskip("supersuit")
    out = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT],
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["fork", "ProcConcatVec", "(4,", "44)", "True"]


def test_pickled_adapter_resumes_its_episode():
    import pickle

    env = small_parallel()
    env.reset(seed=5)
    env.step({})
    copy = pickle.loads(pickle.dumps(env))
    assert copy._grid is None and isinstance(copy.grid_state.positions, np.ndarray)
    actions = {"predator_1": 1, "prey_1": 3}
    a, b = env.step(actions), copy.step(actions)
    for left, right in zip(a, b, strict=True):
        assert jax.tree.all(jax.tree.map(np.array_equal, left, right))
