"""Sharding helpers: a batch split over 4 (forced host) devices gives the single-device
results; on one device the helpers change nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppage_jax.sharding import (
    check_divisible,
    make_mesh,
    process_rows,
    replicate,
    shard_batch,
    shard_global,
    to_host,
)

FOUR_DEVICES = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    import ppage_jax as pj
    from ppage_jax.policies import random_policy
    from ppage_jax.episodes.summary import rollout_summary
    from ppage_jax.sharding import make_mesh, replicate, shard_batch
    from ppage_jax.wrappers import BatchedAutoResetEnv

    assert len(jax.devices()) == 4, jax.devices()
    env = pj.make("configs/default", {"env.termination.max_steps": 5})
    four, one = make_mesh(), make_mesh(devices=jax.devices()[:1])
    assert four.devices.size == 4 and one.devices.size == 1

    # 1. A jitted batched auto-reset step on a sharded batch equals the one-device step.
    n = 8
    auto = BatchedAutoResetEnv(env, n, resets_per_step=2)
    obs, state = jax.jit(auto.reset)(jax.random.PRNGKey(0))
    state = state.replace(turn=jnp.arange(n, dtype=jnp.int32))    # grids 4..7 truncate
    actions = jax.random.randint(jax.random.PRNGKey(1), (n, env.num_agents), 0,
                                 env.num_actions)
    step = jax.jit(auto.step)
    params = env.default_params
    single = step(jax.random.PRNGKey(2), state, actions, params)
    sharded_in = shard_batch((state, actions), four)
    assert len(sharded_in[0].positions.sharding.device_set) == 4
    sharded = step(jax.random.PRNGKey(2), *sharded_in, replicate(params, four))
    assert len(sharded[1].positions.sharding.device_set) == 4, sharded[1].positions.sharding
    assert np.asarray(sharded[4]).sum() >= 4
    for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(sharded)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    # 2. rollout_summary over 4 devices equals the one-device rollout.
    kw = dict(num_envs=16, num_steps=12)
    key = jax.random.PRNGKey(3)
    r4 = rollout_summary(env, random_policy(env), key, mesh=four, **kw)
    r1 = rollout_summary(env, random_policy(env), key, mesh=one, **kw)
    assert int(r1["episodes"]) > 16
    for name in r1:
        np.testing.assert_allclose(r4[name], r1[name], rtol=1e-6, err_msg=name)
    print("FOUR-DEVICE-OK", int(r1["episodes"]))
""")


@pytest.mark.slow  # the 2-process x 2-device rollout and sweep tests check the same equality
def test_four_host_devices_give_single_device_results():
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4"
    )
    out = subprocess.run(
        [sys.executable, "-c", FOUR_DEVICES],
        capture_output=True,
        text=True,
        env=env,
        cwd=os.path.dirname(os.path.dirname(__file__)),
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "FOUR-DEVICE-OK" in out.stdout


def test_helpers_on_one_device_keep_values():
    mesh = make_mesh()
    assert mesh.axis_names == ("batch",) and mesh.devices.size == len(jax.devices())
    tree = {"a": jnp.arange(6).reshape(3, 2), "b": jnp.ones(3, bool)}
    placed = shard_batch(tree, make_mesh(devices=jax.devices()[:1]))
    np.testing.assert_array_equal(placed["a"], tree["a"])
    assert placed["a"].sharding.spec == jax.sharding.PartitionSpec("batch")
    copied = replicate({"w": jnp.float32(2.5)}, mesh)
    assert float(copied["w"]) == 2.5 and copied["w"].sharding.is_fully_replicated


def test_shard_batch_names_the_leaf_without_a_batch_axis():
    mesh = make_mesh(devices=jax.devices()[:1])
    with pytest.raises(ValueError, match=r"leaf \['scalar'\] has shape \(\)"):
        shard_batch({"ok": jnp.zeros(4), "scalar": jnp.float32(1.0)}, mesh)
    with pytest.raises(ValueError, match="at least one device"):
        make_mesh(devices=[])


def test_one_process_holds_every_row_of_the_global_batch():
    mesh = make_mesh(devices=jax.devices()[:1])
    assert process_rows(6, mesh) == slice(0, 6)
    whole = np.arange(12).reshape(6, 2)
    placed = shard_global({"x": whole}, mesh)
    assert placed["x"].sharding.spec == jax.sharding.PartitionSpec("batch")
    host = to_host({"x": placed["x"], "n": jnp.int32(3)})
    np.testing.assert_array_equal(host["x"], whole)
    assert isinstance(host["n"], np.ndarray) and int(host["n"]) == 3


def test_check_divisible_names_the_device_and_process_count():
    check_divisible(8, make_mesh(devices=jax.devices()[:1]))
    four = textwrap.dedent("""
        import jax
        from ppage_jax.sharding import check_divisible, make_mesh, process_rows
        mesh = make_mesh()
        assert process_rows(8, mesh) == slice(0, 8)
        try:
            check_divisible(6, mesh, "num_envs")
        except ValueError as err:
            print("ERR", err)
    """)
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4"
    )
    out = subprocess.run(
        [sys.executable, "-c", four], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (
        "ERR num_envs 6 must be a multiple of the 4 device(s) of the mesh (1 process(es))"
        in out.stdout
    )
