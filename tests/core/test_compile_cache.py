"""The persistent compile cache: where it lives (PPAGE_JAX_COMPILE_CACHE), that a program
loaded from it gives the same result as a fresh compile, that a corrupt entry is compiled
again with one warning, that an unwritable place gives one line and no cache, and the
`ppage-jax cache` command."""

from __future__ import annotations

import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppage_jax.cli.main import main
from ppage_jax.compilation.cache import (
    CacheSettingError,
    cache_info,
    cache_setting,
    default_cache_dir,
    disable_compile_cache,
    enable_compile_cache,
)


@pytest.fixture
def cache(tmp_path):
    """A cache of this test's own, caching every program; off again afterwards."""
    where = enable_compile_cache(tmp_path / "cache", min_compile_seconds=0)
    assert where == tmp_path / "cache"
    yield where
    disable_compile_cache()


def test_the_setting_is_0_1_or_a_path(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "ppage_jax" / "jax"
    assert cache_setting("1") == cache_setting("") == tmp_path / "ppage_jax" / "jax"
    assert cache_setting("0") is None
    assert cache_setting("/data/jax-cache") == Path("/data/jax-cache")
    assert cache_setting("./here") == Path("here")
    with pytest.raises(CacheSettingError) as err:
        cache_setting("yes")
    assert str(err.value) == (
        "PPAGE_JAX_COMPILE_CACHE='yes' is not allowed: use 0 (no compile cache), 1 (the default "
        f"place, {tmp_path}/ppage_jax/jax) or a directory path (e.g. ~/.cache/ppage_jax/jax)"
    )


def _program(x):
    return jnp.cumsum(jnp.sin(x) * 3.0 + x**2)


def test_a_loaded_program_gives_the_same_bits_and_a_corrupt_entry_is_compiled_again(cache):
    x = jnp.linspace(0.0, 5.0, 97)
    fresh = np.asarray(jax.jit(_program)(x))
    entries = cache_info(cache)["entries"]
    assert entries >= 1
    jax.clear_caches()  # the next call reads the program back from disk
    np.testing.assert_array_equal(np.asarray(jax.jit(_program)(x)), fresh)
    for path in cache.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            path.write_bytes(b"not a compiled program")
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = np.asarray(jax.jit(_program)(x))
    np.testing.assert_array_equal(again, fresh)
    said = [str(w.message) for w in caught if "persistent compilation cache" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("Error reading persistent compilation cache")


def test_an_unwritable_place_gives_one_line_and_no_cache(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    assert enable_compile_cache(blocker / "cache") is None
    err = capsys.readouterr().err
    assert err == (
        f"warning: compile cache {blocker / 'cache'} cannot be written (Not a directory); "
        "compiling without it\n"
    )
    assert jax.config.jax_compilation_cache_dir is None


def test_the_cache_command_shows_and_clears(tmp_path, capsys):
    where = tmp_path / "cache"
    assert main(["cache", "clear", "--path", str(where)]) == 0  # missing: a no-op
    assert capsys.readouterr().out == f"compile cache {where}: cleared (0 B freed)\n"
    assert main(["cache", "info", "--path", str(where)]) == 0
    assert capsys.readouterr().out == f"compile cache {where}: empty (no directory yet)\n"
    (where / "sub").mkdir(parents=True)
    (where / "entry-a").write_bytes(b"x" * 2048)
    (where / "sub" / "entry-b").write_bytes(b"y" * 1024)
    assert main(["cache", "info", "--path", str(where)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"compile cache {where}: 2 entries, 3.0 KiB (cap 2.0 GiB")
    assert main(["cache", "clear", "--path", str(where)]) == 0
    assert capsys.readouterr().out == f"compile cache {where}: cleared (3.0 KiB freed)\n"
    assert where.is_dir() and not any(where.iterdir())


def test_a_bad_setting_is_one_line_before_any_work(monkeypatch, capsys):
    monkeypatch.setenv("PPAGE_JAX_COMPILE_CACHE", "maybe")
    assert main(["audit", "configs/default"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("PPAGE_JAX_COMPILE_CACHE='maybe' is not allowed: use 0")
    assert err.count("\n") == 1
    # --no-compile-cache does not read the setting at all
    assert main(["evaluate", "no/such/run", "--no-compile-cache"]) == 2
    assert "PPAGE_JAX_COMPILE_CACHE" not in capsys.readouterr().err


def test_compile_times_are_recorded_per_program_while_open():
    from ppage_jax.compilation.times import CompileTimes

    def a_named_program(x):
        return jnp.tanh(x) @ x.T

    with CompileTimes() as times:
        jax.jit(a_named_program)(jnp.ones((7, 3)))
    jax.jit(lambda x: x * 5)(jnp.ones(3))  # after the block: not recorded
    assert times.seconds["jit(a_named_program)"] > 0
    assert not any("lambda" in name for name in times.seconds)
    shown = times.by_program(min_seconds=0.0)
    assert list(shown.values()) == sorted(shown.values(), reverse=True)
    folded = times.by_program(min_seconds=1e9)
    assert list(folded) == [f"other ({len(times.seconds)} programs)"]
