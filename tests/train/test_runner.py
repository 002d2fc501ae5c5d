"""The training driver (``run_training``): a single seed runs the unbatched program and ends
with the vmapped program's results, in the same layout (leading seed axis) and with
interchangeable checkpoints; the next chunk is dispatched before the host work of the current
one, with the results, stops, checkpoints and divergence errors of a chunk-by-chunk loop."""

from __future__ import annotations

import shutil

import jax
import numpy as np
import pytest
from train_testing import make_train_config, tiny_config

from ppage_jax.train.run.checkpoint import TrainingCheckpoints
from ppage_jax.train.run.divergence import DivergenceError
from ppage_jax.train.run.runner import run_training

# 8 updates of 16 turns on 4 grids, one update per chunk.
UPDATES = 8
CHUNKS = dict(target_chunks=UPDATES)


def dqn(**params):
    hp = {"hidden_layers": [8], "num_steps": 16, "min_replay_size": 16, **params}
    return make_train_config(tiny_config("dqn", hp, 4 * 16 * UPDATES, **{"experiment.num_envs": 4}))


def iql(**overrides):
    hp = {"num_steps": 16, "table_size": 256}
    return make_train_config(
        tiny_config("iql", hp, 4 * 16 * UPDATES, **{"experiment.num_envs": 4, **overrides})
    )


def arrays(result) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves((result.metrics, result.runner))]


def assert_same(got, want) -> None:
    """Bit for bit, leaf by leaf (NaN equals NaN)."""
    for a, b in zip(arrays(got), arrays(want), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def assert_close(got, want) -> None:
    """The same layout; floats equal up to rounding, the rest exactly."""
    for a, b in zip(arrays(got), arrays(want), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(a, b)


@pytest.fixture
def events(monkeypatch) -> list[str]:
    """Records each compiled chunk dispatched (``"dispatch"``) and, through :func:`logged`,
    each ``on_chunk`` call, in order."""
    log: list[str] = []
    call = jax.stages.Compiled.__call__

    def dispatch(compiled, *args, **kwargs):
        log.append("dispatch")
        return call(compiled, *args, **kwargs)

    monkeypatch.setattr(jax.stages.Compiled, "__call__", dispatch)
    return log


def logged(log: list[str]):
    def on_chunk(metrics, env_steps, runner):
        log.append(f"chunk {env_steps}")

    return on_chunk


def chunks(log: list[str]) -> list[str]:
    return [e for e in log if e != "dispatch"]


@pytest.mark.slow  # trains in both layouts, with checkpoints
def test_one_seed_runs_unbatched_with_the_vmapped_results(tmp_path):
    tc = dqn()
    params = tc.env.default_params
    shapes = []

    def on_chunk(metrics, env_steps, runner):
        shapes.append({np.shape(x)[0] for x in jax.tree.leaves((metrics, runner))})

    one = run_training(tc, params, 0, 1, on_chunk, **CHUNKS)
    vmapped = run_training(tc, params, 0, 1, batch_seeds=True, **CHUNKS)
    assert shapes == [{1}] * UPDATES  # the seed axis, of size 1, where the vmapped run has it
    assert one.metrics["active"].shape == (1, UPDATES) and one.updates == UPDATES
    assert {np.shape(x)[0] for x in jax.tree.leaves(one.policies)} == {1}
    assert np.isfinite(one.metrics["losses"]["q_loss/predator"][0, -1])  # it learned
    assert_close(one, vmapped)

    # a checkpoint resumes bit for bit in its own layout and to the rounding in the other
    def train(directory, batch_seeds=None, stop_after=None):
        asked = iter(range(100))  # asked twice a chunk: for its checkpoint, then the next
        return run_training(
            tc,
            params,
            0,
            1,
            **CHUNKS,
            batch_seeds=batch_seeds,
            checkpoints=TrainingCheckpoints(directory, tc, 2),
            should_stop=None if stop_after is None else lambda: next(asked) >= 2 * stop_after - 1,
        )

    stopped = train(tmp_path / "one", stop_after=3)
    assert stopped.stopped and stopped.checkpoint == stopped.updates == 3
    shutil.copytree(tmp_path / "one", tmp_path / "one-then-vmapped")
    resumed = train(tmp_path / "one")
    assert resumed.resumed_from == 3 and resumed.updates == UPDATES
    assert_same(resumed, one)
    assert_close(train(tmp_path / "one-then-vmapped", batch_seeds=True), vmapped)
    assert train(tmp_path / "vmapped", batch_seeds=True, stop_after=3).checkpoint == 3
    assert_close(train(tmp_path / "vmapped"), one)

    with pytest.raises(ValueError, match="batch_seeds=False trains a single seed"):
        run_training(tc, params, 0, 2, batch_seeds=False)


@pytest.mark.slow  # trains twice
def test_the_next_chunk_runs_during_the_host_work_of_this_one(tmp_path, events):
    """With and without prefetch: the same metrics, runner state, on_chunk calls, stop
    requests asked, stop point and checkpoints; with it, chunk k + 1 is dispatched before
    on_chunk of chunk k, and never a chunk past the end."""
    tc = iql()
    params = tc.env.default_params
    runs = {}
    for prefetch in (True, False):
        events.clear()
        full = run_training(tc, params, 3, 2, logged(events), **CHUNKS, prefetch=prefetch)
        order = list(events)
        asked = []

        def should_stop(asked=asked):
            asked.append(True)
            return len(asked) > 3  # the 4th: after chunk 2, its checkpoint and the stop

        directory = tmp_path / str(prefetch)
        stopped = run_training(
            tc,
            params,
            3,
            2,
            **CHUNKS,
            checkpoints=TrainingCheckpoints(directory, tc, 3),
            should_stop=should_stop,
            prefetch=prefetch,
        )
        steps = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
        resumed = run_training(
            tc, params, 3, 2, **CHUNKS, checkpoints=TrainingCheckpoints(directory, tc, 3)
        )
        runs[prefetch] = full, order, stopped, len(asked), steps, resumed

    (full, order, stopped, asked, steps, resumed), sync = runs[True], runs[False]
    assert_same(full, sync[0])
    done = [f"chunk {(k + 1) * tc.env_steps_per_update}" for k in range(UPDATES)]
    assert chunks(order) == chunks(sync[1]) == done
    assert order.count("dispatch") == sync[1].count("dispatch") == UPDATES
    assert order[:4] == ["dispatch", "dispatch", done[0], "dispatch"]  # ahead of on_chunk
    assert sync[1][:3] == ["dispatch", done[0], "dispatch"]  # one after the other
    # should_stop asked as often, stopping at the same chunk with the same checkpoint
    assert stopped.stopped and stopped.updates == sync[2].updates == 2
    assert asked == sync[3] == 5
    assert_same(stopped, sync[2])
    assert steps == sync[4] == [2]
    assert_same(resumed, full)
    assert_same(sync[5], full)


@pytest.mark.slow  # trains twice
def test_an_episode_budget_ends_the_run_at_the_same_update_with_prefetch(events):
    tc = iql(**{"experiment.total_timesteps": None, "experiment.episodes": 150})
    params = tc.env.default_params
    results = {}
    for prefetch in (True, False):
        events.clear()
        results[prefetch] = run_training(
            tc, params, 0, 2, logged(events), **CHUNKS, prefetch=prefetch
        )
        assert events.count("dispatch") == len(chunks(events)) == results[prefetch].updates
    assert_same(results[True], results[False])
    assert 1 < results[True].updates < tc.num_updates  # the budget ended it, no chunk after
    assert not results[True].metrics["active"][:, -1].any()


@pytest.mark.slow  # trains to a divergence twice
def test_divergence_stops_at_the_first_bad_chunk_with_prefetch(tmp_path, events):
    tc = dqn(learning_rate=1.0e30, min_replay_size=4 * 16 * 2)  # learns from update 3
    params = tc.env.default_params
    errors = {}
    for prefetch in (True, False):
        events.clear()
        with pytest.raises(DivergenceError) as raised:
            run_training(
                tc,
                params,
                0,
                2,
                logged(events),
                **CHUNKS,
                checkpoints=TrainingCheckpoints(tmp_path / str(prefetch), tc, 1),
                prefetch=prefetch,
            )
        err = raised.value
        bad = err.update  # one update per chunk: the bad chunk
        # the rows up to and including the bad chunk; on_chunk and the checkpoints stop
        # before it, and no chunk after it was dispatched
        assert err.metrics["active"].shape == (2, bad)
        assert events.count("dispatch") == bad
        assert chunks(events) == [f"chunk {k * tc.env_steps_per_update}" for k in range(1, bad)]
        assert err.checkpoint == bad - 1
        errors[prefetch] = err
    assert 1 < errors[True].update < UPDATES
    assert str(errors[True]) == str(errors[False])
    for a, b in zip(
        jax.tree.leaves(errors[True].metrics), jax.tree.leaves(errors[False].metrics), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_host_seconds_count_the_host_work_between_chunks():
    # a host callback of 30 ms on each of the 8 chunks: at least 0.24 s of host work counted,
    # and none of the device's (a run without it counts far less)
    import time

    tc = iql()
    params = tc.env.default_params
    quick = run_training(tc, params, 0, 1, **CHUNKS)
    slow = run_training(tc, params, 0, 1, lambda *_: time.sleep(0.03), **CHUNKS)
    assert slow.updates == quick.updates == UPDATES
    assert slow.host_seconds >= 0.03 * UPDATES
    assert quick.host_seconds < 0.03 * UPDATES
    assert slow.host_seconds < slow.seconds


ORBAX_ON_A_FRESH_RUN = """
import os, sys, tempfile, threading
from train_testing import make_train_config, tiny_config
from ppage_jax.train.run.checkpoint import TrainingCheckpoints
tc = make_train_config(tiny_config("random", {}, 64))
checkpoints = TrainingCheckpoints(os.path.join(tempfile.mkdtemp(), "checkpoints"), tc)
assert checkpoints.latest() is None and checkpoints.restore({"x": 1}) is None
print("before", "orbax.checkpoint" in sys.modules)
TrainingCheckpoints.import_soon()
for thread in threading.enumerate():
    if thread.name == "import orbax":
        thread.join()
print("after", "orbax.checkpoint" in sys.modules)
"""


def test_a_fresh_run_imports_orbax_only_in_the_background():
    """Nothing to restore reads no checkpoint, so Orbax (about 0.2 s to import) is not
    imported on the way to training; ``import_soon`` imports it in a thread."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    paths = [str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
    done = subprocess.run(
        [sys.executable, "-c", ORBAX_ON_A_FRESH_RUN], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["before", "False", "after", "True"]
