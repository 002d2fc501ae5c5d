"""Shared test setup. The shared helper modules (``reward_testing``, ``train_testing``) sit
beside this file, which puts this folder on ``sys.path``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import ppage_jax as pj

# Property tests draw the same examples on every run and keep no example database: a failure
# found once is found again by the same seed, never replayed from a checkout's .hypothesis/
# folder into every later run.
settings.register_profile("ppage", derandomize=True, database=None)
settings.load_profile("ppage")

# The command line keeps compiled programs in a persistent cache by default; the tests run
# without it (in this process and the CLI processes they start), except the cache's own
# tests, which give it a folder of their own.
os.environ["PPAGE_JAX_COMPILE_CACHE"] = "0"

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="session")
def _run_from_the_repository_root():
    """Tests name shipped configs by relative path (``configs/default``), as users do."""
    previous = os.getcwd()
    os.chdir(REPO_ROOT)
    yield
    os.chdir(previous)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def default_env() -> pj.GridWorld:
    """The shipped default config: 3 predators vs 3 speed-3 prey, 10x10, 20 obstacles."""
    return pj.make("configs/default")
