"""A plain (non-editable) install, used from outside the repository, finds the shipped configs.

The new virtual environment borrows the test environment's third-party packages through a
``.pth`` path entry (so nothing is downloaded) and gets ``ppage_jax`` itself as a wheel
built from the repository. Training through the installed command line is marked slow.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _clean_environ() -> dict[str, str]:
    """The environment without PYTHONPATH: only the installed package may be found."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fresh")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)  # this pip installs into it (--python)
    python = env_dir / "bin" / "python"
    new_site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    # Third-party packages from this environment; its editable ppage_jax is not on the path
    # (editable finders are .pth files, which a plain path entry does not run).
    (new_site / "borrowed.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    quiet = dict(_clean_environ(), PIP_DISABLE_PIP_VERSION_CHECK="1")
    wheels = root / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(REPO),
        ],
        check=True,
        cwd=root,
        env=quiet,
    )
    (wheel,) = wheels.glob("ppage_jax-*.whl")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        cwd=root,
        env=quiet,
    )
    return env_dir


def _run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(_clean_environ(), JAX_PLATFORMS="cpu")
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # builds a wheel
def test_installed_package_makes_shipped_configs_by_name(installed, tmp_path):
    python = installed / "bin" / "python"
    code = (
        "import ppage_jax as pj; "
        "assert 'site-packages' in pj.__file__, pj.__file__; "
        "print(pj.make('1v1').observation_size, pj.make('default').observation_size, "
        "pj.load_config('ablation/both')['rewards']['shaping'][0]['name'])"
    )
    out = _run([python, "-c", code], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["96", "120", "predator_distance"]


def test_installed_cli_is_the_entry_point(installed, tmp_path):
    out = _run([installed / "bin" / "ppage-jax", "run", "--help"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: ppage-jax run ")


@pytest.mark.slow
def test_installed_cli_runs_the_default_config_on_a_tiny_budget(installed, tmp_path):
    cli = installed / "bin" / "ppage-jax"
    out = _run(
        [
            cli,
            "run",
            "default",
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
            "--set",
            "experiment.num_envs=8",
            "--set",
            "experiment.total_timesteps=512",
            "--set",
            "experiment.eval.episodes=4",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").is_file()
