"""The program store: a compiled program kept whole on disk, loaded without tracing by a new
store in the same place and giving the same bits; keyed by what the program is made of; a
corrupt or unloadable entry compiled again with one warning line; an unwritable place one
line and no store; the least recently used entries evicted beyond the cap; and a training run
through it equal, bit for bit, to one without it."""

from __future__ import annotations

import os
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testing import make_train_config, tiny_config

from ppage_jax.compilation import programs
from ppage_jax.compilation.cache import disable_compile_cache, enable_compile_cache
from ppage_jax.compilation.programs import (
    STATE_FIRST,
    ProgramStore,
    known_structure,
    program_store,
)


@flax.struct.dataclass
class Carry:
    """A state whose structure holds a function (it does not pickle): STATE_FIRST keeps it
    out of the stored entry and rebuilds it from the call's argument."""

    step: Any = flax.struct.field(pytree_node=False)
    total: jax.Array
    seen: jax.Array


def _advance(carry: Carry, scale: jax.Array) -> tuple[Carry, dict]:
    total = carry.total + jnp.sin(carry.seen) * scale
    return Carry(carry.step, total, carry.seen + 1.0), {"mean": total.mean(), "top": total.max()}


def _carry() -> Carry:
    return Carry(lambda x: x, jnp.linspace(0.0, 1.0, 13), jnp.arange(13.0))


def _entries(store: ProgramStore) -> list:
    return sorted(store.directory.glob("*.program"))


def test_a_stored_program_loads_whole_and_gives_the_same_bits(tmp_path):
    args = (_carry(), jnp.float32(0.5))
    first = ProgramStore(tmp_path)
    compiled = first.compile("advance", _advance, args, {"what": 1}, STATE_FIRST)
    assert not compiled.loaded and len(_entries(first)) == 1
    want = compiled(*args)
    again = ProgramStore(tmp_path)  # as a new process would: nothing traced, loaded whole
    loaded = again.compile("advance", _never_traced, args, {"what": 1}, STATE_FIRST)
    assert loaded.loaded and again.loaded == ["advance"]
    got = loaded(*args)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    assert got[0].step is args[0].step  # rebuilt from the argument's structure
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(got[0].total), np.asarray(_advance(*args)[0].total))
    # another scale is another input value, not another program
    other = loaded(args[0], jnp.float32(2.0))
    np.testing.assert_array_equal(
        np.asarray(other[1]["top"]), np.asarray(_advance(args[0], jnp.float32(2.0))[1]["top"])
    )


def _never_traced(*_):
    raise AssertionError("a loaded program is not traced")


def test_a_prefetched_load_is_taken_once_by_the_next_load_of_its_entry(tmp_path):
    args = (_carry(), jnp.float32(0.5))
    ProgramStore(tmp_path).compile("advance", _advance, args, {"what": 1}, STATE_FIRST)
    store = ProgramStore(tmp_path)
    store.prefetch("advance", {"what": 1}, args)
    store.prefetch("advance", {"what": 1}, args)  # one load for one entry
    store.prefetch("advance", {"what": 2}, args)  # not stored: its load finds nothing
    early = store.load_soon("advance", {"what": 1}, args)
    assert store.load_soon("advance", {"what": 1}, args) is not early  # taken once
    assert early.get(_never_traced, args, STATE_FIRST).loaded
    missing = store.load_soon("advance", {"what": 2}, args)
    assert missing.future.result() is None
    assert not missing.get(_advance, args, STATE_FIRST).loaded  # compiled, then stored
    assert len(_entries(store)) == 2 and store.loaded == ["advance"]


def test_a_known_structure_is_put_around_the_stored_leaves(tmp_path):
    """An output holding a function (no entry can) keeps it: the caller's structure, from
    ``eval_shape``, is rebuilt around the loaded program's leaves."""
    args = (_carry(), jnp.float32(0.5))
    structure = jax.tree.structure(jax.eval_shape(_advance, *args))
    ProgramStore(tmp_path).compile("advance", _advance, args, {}, known_structure(structure))
    store = ProgramStore(tmp_path)
    loaded = store.compile("advance", _never_traced, args, {}, known_structure(structure))
    carry, metrics = loaded(*args)
    assert loaded.loaded and carry.step is args[0].step
    np.testing.assert_allclose(np.asarray(carry.seen), np.arange(1.0, 14.0))
    np.testing.assert_array_equal(np.asarray(metrics["top"]), np.asarray(_advance(*args)[1]["top"]))


def test_the_key_follows_the_static_part_the_inputs_and_the_environment(tmp_path, monkeypatch):
    store = ProgramStore(tmp_path)
    args = (_carry(), jnp.float32(0.5))
    key = store.key("advance", {"what": 1}, args)
    assert key == store.key("advance", {"what": 1}, (_carry(), jnp.float32(3.0)))
    assert key != store.key("advance", {"what": 2}, args)
    assert key != store.key("other", {"what": 1}, args)
    longer = Carry(args[0].step, jnp.zeros(14), jnp.zeros(14))
    assert key != store.key("advance", {"what": 1}, (longer, args[1]))
    assert key != store.key("advance", {"what": 1}, (args[0], jnp.int32(1)))
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    assert key != store.key("advance", {"what": 1}, args)
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.setattr(programs, "_package_digest", lambda: "another source")
    assert key != store.key("advance", {"what": 1}, args)


@pytest.mark.parametrize("damage", ["flipped", "truncated", "checksummed garbage"])
def test_a_damaged_entry_is_compiled_again_with_one_line(tmp_path, capsys, damage):
    args = (_carry(), jnp.float32(0.5))
    want = ProgramStore(tmp_path).compile("advance", _advance, args, {}, STATE_FIRST)(*args)
    (entry,) = _entries(ProgramStore(tmp_path))
    blob = bytearray(entry.read_bytes())
    if damage == "flipped":
        blob[len(blob) // 2] ^= 0xFF
    elif damage == "truncated":
        del blob[len(blob) // 3 :]
    else:  # a valid checksum over bytes that are not a program
        import hashlib

        body = b"not a pickled program"
        blob = bytearray(programs._MAGIC + hashlib.sha256(body).digest() + body)
    entry.write_bytes(bytes(blob))
    store = ProgramStore(tmp_path)
    got = store.compile("advance", _advance, args, {}, STATE_FIRST)(*args)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: program store entry {entry}")
    assert "compiling again" in err and store.loaded == []
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert ProgramStore(tmp_path).compile("advance", _never_traced, args, {}, STATE_FIRST).loaded


def test_an_unwritable_place_gives_one_line_and_the_compiled_program(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    store = ProgramStore(blocker / "programs")
    args = (_carry(), jnp.float32(0.5))
    for _ in range(2):  # said once per store
        got = store.compile("advance", _advance, args, {}, STATE_FIRST)(*args)
    np.testing.assert_array_equal(
        np.asarray(got[1]["mean"]), np.asarray(_advance(*args)[1]["mean"])
    )
    assert capsys.readouterr().err == (
        f"warning: program store {blocker / 'programs'} cannot be written (Not a directory); "
        "going on without it\n"
    )


def test_the_least_recently_used_entries_go_beyond_the_cap(tmp_path):
    args = (_carry(), jnp.float32(0.5))
    store = ProgramStore(tmp_path)
    store.compile("first", _advance, args, {}, STATE_FIRST)
    (first,) = _entries(store)
    size = first.stat().st_size
    store.compile("second", _advance, args, {}, STATE_FIRST)
    assert len(_entries(store)) == 2
    os.utime(first, (1, 1))  # the first used long ago
    capped = ProgramStore(tmp_path, max_bytes=int(2.5 * size))
    capped.compile("third", _advance, args, {}, STATE_FIRST)
    names = [p.name.split("-")[0] for p in _entries(capped)]
    assert names == ["second", "third"]


def test_the_store_goes_with_the_compile_cache(tmp_path):
    assert program_store() is None
    enable_compile_cache(tmp_path / "cache")
    try:
        store = program_store()
        assert store is not None and store.directory == tmp_path / "cache" / "programs"
    finally:
        disable_compile_cache()
    assert program_store() is None


def test_a_run_through_the_store_equals_one_without_it(tmp_path):
    from ppage_jax.train.run.runner import prefetch_training, run_training

    tc = make_train_config(
        tiny_config("ippo", {"num_steps": 8}, 4 * 8 * 4, **{"experiment.num_envs": 4})
    )
    params = tc.env.default_params
    plain = run_training(tc, params, 3, 1, target_chunks=4)
    stored = run_training(tc, params, 3, 1, target_chunks=4, programs=ProgramStore(tmp_path))
    assert sorted(p.name.split("-")[0] for p in _entries(ProgramStore(tmp_path))) == [
        "finite_params",
        "train_chunk",
        "train_init",
    ]
    again = ProgramStore(tmp_path)
    loaded = run_training(tc, params, 3, 1, target_chunks=4, programs=again)
    assert again.loaded == ["train_init", "train_chunk", "finite_params"]
    # loads started before the run (as `ppage-jax run` does before the monitor's start)
    early = ProgramStore(tmp_path)
    prefetch_training(early, tc, params, 3, 1, target_chunks=4)
    assert len(early._prefetched) == 2  # the init and the chunk, loading
    prefetched = run_training(tc, params, 3, 1, target_chunks=4, programs=early)
    assert early.loaded == ["train_init", "train_chunk", "finite_params"]
    assert not early._prefetched  # both taken by the run
    for result in (stored, loaded, prefetched):
        for a, b in zip(
            jax.tree.leaves((result.metrics, result.runner)),
            jax.tree.leaves((plain.metrics, plain.runner)),
            strict=True,
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_program_from_jax_cache_is_run_but_not_stored(tmp_path):
    """On the CPU an executable that JAX loaded from its persistent cache serialises without
    its functions (the copy fails when run), so the store keeps only fresh compiles."""
    enable_compile_cache(tmp_path / "cache", min_compile_seconds=0)
    try:
        store = program_store()
        assert store is not None
        args = (_carry(), jnp.float32(0.5))
        want = store.compile("advance", _advance, args, {"weights": 1}, STATE_FIRST)(*args)
        assert len(_entries(store)) == 1
        jax.clear_caches()
        # the same program under another key: JAX's cache hands it back, the store keeps none
        other = store.compile("advance", _advance, args, {"weights": 2}, STATE_FIRST)
        assert not other.loaded and len(_entries(store)) == 1
        for compiled in (
            other,
            ProgramStore(store.directory).compile(
                "advance", _never_traced, args, {"weights": 1}, STATE_FIRST
            ),
        ):
            got = compiled(*args)
            for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    finally:
        disable_compile_cache()


def test_a_partial_write_left_by_a_killed_process_goes_once_old(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    old, fresh = tmp_path / ".tmp-old", tmp_path / ".tmp-fresh"
    old.write_bytes(b"half a program")
    fresh.write_bytes(b"being written")
    os.utime(old, (1, 1))
    args = (_carry(), jnp.float32(0.5))
    ProgramStore(tmp_path).compile("advance", _advance, args, {}, STATE_FIRST)
    assert not old.exists() and fresh.exists()


def test_a_full_disk_gives_one_line_and_leaves_no_partial_entry(tmp_path, capsys, monkeypatch):
    import errno

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(programs.os, "replace", full)
    args = (_carry(), jnp.float32(0.5))
    got = ProgramStore(tmp_path).compile("advance", _advance, args, {}, STATE_FIRST)(*args)
    np.testing.assert_array_equal(np.asarray(got[1]["top"]), np.asarray(_advance(*args)[1]["top"]))
    assert capsys.readouterr().err == (
        f"warning: program store {tmp_path} cannot be written (No space left on device); "
        "going on without it\n"
    )
    assert list(tmp_path.iterdir()) == []
