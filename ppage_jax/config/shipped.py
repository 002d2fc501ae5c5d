"""The configs shipped with the package, found by name.

They travel inside the package (``ppage_jax/configs``, the repository's ``configs/`` folder),
so a name such as "default", "1v1" or "ablation/both" works from any directory after a plain
``pip install``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ppage_jax.config.fields import ConfigError

PACKAGED_CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def shipped_configs() -> list[str]:
    """Names of the configs shipped with the package (directories holding YAML files)."""
    if not PACKAGED_CONFIGS.is_dir():
        return []
    return sorted(
        str(p.parent.relative_to(PACKAGED_CONFIGS)) for p in PACKAGED_CONFIGS.rglob("env.yaml")
    )


def _packaged(path: str | os.PathLike) -> Path | None:
    """The shipped path of that name (``configs/`` prefix optional), or None."""
    name = str(path).replace("\\", "/").strip("/")
    for candidate in (name, name.removeprefix("configs/")):
        packaged = PACKAGED_CONFIGS / candidate
        if (
            candidate
            and packaged.exists()
            and packaged.resolve().is_relative_to(PACKAGED_CONFIGS.resolve())
        ):
            return packaged
    return None


def resolve_run_path(path: str | os.PathLike) -> Path:
    """A run directory as given when it exists, else the shipped one of that name (the
    studies ship the trained runs their fine-tuning starts from), else as given."""
    given = Path(path)
    if given.exists():
        return given
    return _packaged(path) or given


def resolve_config_path(path: str | os.PathLike) -> Path:
    """An existing path as given, else the shipped config of that name.

    ``"configs/default"`` also resolves to the shipped ``default`` when no such folder exists
    relative to the working directory.
    """
    given = Path(path)
    if given.exists():
        return given
    packaged = _packaged(path)
    if packaged is not None:
        return packaged
    raise ConfigError(
        str(path),
        "<path>",
        str(path),
        f"must be an existing config directory or YAML file, or the name of a "
        f"shipped config: {shipped_configs()}",
    )
