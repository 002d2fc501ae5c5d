"""Write a PPAGE config directory (PPAGE_DIR with one of its experiment files) as the six
strict files of this package in OUT_DIR, and print what was mapped onto which key and which
PPAGE keys have no effect here. OUT_DIR then loads strictly, without notices, to the same
config (same environment, same experiment)."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ppage_jax.artifacts import write_text
from ppage_jax.defaults import SECTIONS

if TYPE_CHECKING:
    from ppage_jax.config import Config
    from ppage_jax.config.ppage_format import Translation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "ppage_dir",
        metavar="PPAGE_DIR",
        help="a PPAGE config directory (env.yaml, agents.yaml, ..., experiment_<algo>.yaml)",
    )
    parser.add_argument("out_dir", metavar="OUT_DIR", help="where to write the six files")
    parser.add_argument(
        "--experiment",
        metavar="FILE",
        default=None,
        help="experiment file of PPAGE_DIR, e.g. experiment_dqn.yaml (default: "
        "experiment.yaml, or the directory's only experiment file)",
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite config files already in OUT_DIR"
    )


def convert(
    ppage_dir: str | Path, out_dir: str | Path, experiment: str | None = None, force: bool = False
) -> tuple[Config, Translation]:
    """Write ``ppage_dir`` (with ``experiment``) to ``out_dir`` in the strict form; return the
    loaded config and the translation (its ``mapped`` and ``notices`` lines)."""
    import yaml

    from ppage_jax.config import ConfigError, ConfigNotice, load_config
    from ppage_jax.config.ppage_format import translate
    from ppage_jax.config.validation import load_registries

    load_registries()  # the config checks read the term and builder registries
    translation = translate(ppage_dir, experiment)
    with warnings.catch_warnings():  # the notices are in `translation`
        warnings.simplefilter("ignore", ConfigNotice)
        config = load_config(ppage_dir, experiment=experiment)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(str(out), "<out>", str(out), "must be a directory")
    present = sorted(p.name for p in out.glob("*.y*ml")) if out.is_dir() else []
    if present and not force:
        raise ConfigError(
            str(out), "<out>", present, "already holds config files; pass --force to overwrite them"
        )
    out.mkdir(parents=True, exist_ok=True)
    for stale in present:  # a stale experiment_<algo>.yaml would make OUT_DIR ambiguous
        (out / stale).unlink()
    origin = f"{ppage_dir}" + (f" ({translation.experiment})" if translation.experiment else "")
    for section in SECTIONS:
        text = yaml.safe_dump(
            {section: config.data[section]}, sort_keys=False, default_flow_style=None
        )
        write_text(
            out / f"{section}.yaml",
            f"# Converted from PPAGE's {origin} by ppage-jax convert.\n{text}",
        )
    converted = load_config(out)
    if converted.hash() != config.hash():  # a bug, not bad input
        raise RuntimeError(f"{out} does not reload to the config of {ppage_dir}")
    return config, translation


def main(args: argparse.Namespace) -> int:
    config, translation = convert(args.ppage_dir, args.out_dir, args.experiment, args.force)
    directory = str(Path(config.path or args.out_dir)) + "/"
    print(
        f"converted {args.ppage_dir}"
        + (f" with {translation.experiment}" if translation.experiment else "")
        + f" -> {args.out_dir} (config hash {config.hash()}; loads strictly)"
    )
    for title, lines in (
        ("mapped", translation.mapped),
        ("no effect here (dropped)", translation.notices),
    ):
        if lines:
            print(f"{title}:")
            for line in lines:
                print(f"  {line.removeprefix(directory)}")
    return 0
