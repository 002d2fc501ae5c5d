"""Reading a sweep or a search file: every problem is one :class:`~ppage_jax.config.ConfigError`
naming the file, the key, the value and what is allowed.

Both files hold one top-level section (``sweep`` or ``search``) whose top-level keys the
caller may override, a held-out evaluation block (:func:`read_eval`) and seed blocks that
must not overlap (:func:`check_disjoint`). Paths in a file are relative to the file's
directory, then to the current directory, then to this repository's root.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, NoReturn, overload

from ppage_jax.config import PACKAGED_CONFIGS, Config, ConfigError, load_yaml
from ppage_jax.config.env_spec import env_spec

# How the trained policy acts in evaluation: its greedy actions, or actions sampled from it
# (stochastic learners such as IPPO).
EVAL_POLICIES = ("greedy", "sampled")
# The folder holding the shipped `configs/` (inside the installed package).
REPO_ROOT = PACKAGED_CONFIGS.parent


def display_path(path: str | Path | None) -> str:
    """A path relative to the current directory when it lies below it (``<in memory>`` for a
    config built without a directory)."""
    if path is None:
        return "<in memory>"
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# Top-level keys whose override is merged into the file's mapping rather than replacing it.
MERGED_KEYS = ("set", "eval")


class SpecReader:
    """Reads the values of one sweep or search file; its failures name the file."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, value: Any, allowed: str) -> NoReturn:
        raise ConfigError(self.path, key, value, allowed)

    def section(
        self, raw: Any, kind: str, keys: Sequence[str], overrides: dict | None
    ) -> dict[str, Any]:
        """A copy of the file's one top-level section ``kind`` (its keys among ``keys``) with
        ``overrides`` replacing its keys; a ``set`` or ``eval`` override is merged into the
        file's mapping."""
        if not isinstance(raw, dict) or set(raw) != {kind}:
            self.fail(
                "<top level>",
                raw if not isinstance(raw, dict) else sorted(raw),
                f"a {kind} file holds exactly one top-level key, '{kind}'",
            )
        body = copy.deepcopy(self.mapping(kind, raw[kind], keys))
        for key, value in (overrides or {}).items():
            if key not in keys:
                raise ConfigError(
                    f"override {key}={value!r}",
                    key,
                    value,
                    f"unknown {kind} key; allowed: {list(keys)}",
                )
            if key in MERGED_KEYS and isinstance(body.get(key), dict) and isinstance(value, dict):
                value = {**body[key], **value}
            body[key] = value
        return body

    def mapping(self, key: str, value: Any, allowed_keys: Sequence[str] | None = None) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(key, value, "must be a mapping")
        if allowed_keys is not None:
            for k in value:
                if k not in allowed_keys:
                    self.fail(
                        f"{key}.{k}",
                        value[k],
                        f"unknown key; allowed keys of {key}: {list(allowed_keys)}",
                    )
        return value

    @overload
    def integer(self, key: str, value: Any, low: int, nullable: Literal[False] = False) -> int: ...
    @overload
    def integer(self, key: str, value: Any, low: int, nullable: bool) -> int | None: ...
    def integer(self, key: str, value: Any, low: int, nullable: bool = False) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.fail(
                key, value, f"must be an integer >= {low}" + (" (or null)" if nullable else "")
            )
        return value

    def number(self, key: str, value: Any) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            self.fail(key, value, "must be a finite number")
        return float(value)

    def resolve(self, key: str, value: Any, base: Path) -> Path:
        """A config directory named in the file (see the module docstring)."""
        if not isinstance(value, str) or not value:
            self.fail(key, value, "must be a path to a config directory")
        for root in (base, Path.cwd(), REPO_ROOT):
            candidate = (root / value).resolve()
            if candidate.exists():
                return candidate
        self.fail(
            key,
            value,
            f"no such config directory (looked in {base}, the current directory and {REPO_ROOT})",
        )


def open_spec_file(path: str | Path, kind: str) -> tuple[SpecReader, Any, Path]:
    """``(reader, YAML, directory)`` of the ``kind`` file at ``path`` (read as configs are)."""
    file = Path(path)
    source = str(file)
    if not file.is_file():
        raise ConfigError(source, "<path>", source, f"must be an existing {kind} file")
    return SpecReader(source), load_yaml(file.read_bytes(), source), file.resolve().parent


class EvalBlock(NamedTuple):
    """The held-out evaluation: layouts ``[seed, seed + episodes)``, the step cap (None: the
    env's step limit) and how the trained policy acts."""

    seed: int
    episodes: int
    max_steps: int | None
    policy: str


def read_eval(read: SpecReader, where: str, ev: dict, config: Config, episodes: int) -> EvalBlock:
    """The evaluation block ``ev`` (at ``where``, e.g. ``sweep.eval``): ``seed`` (default
    1 000 000), ``episodes`` (default ``episodes``), ``max_steps`` (required when the env
    sets no step limit) and ``policy`` (``sampled`` needs a stochastic algorithm)."""
    block = EvalBlock(
        read.integer(f"{where}.seed", ev.get("seed", 1_000_000), 0),
        read.integer(f"{where}.episodes", ev.get("episodes", episodes), 1),
        read.integer(f"{where}.max_steps", ev.get("max_steps"), 1, True),
        ev.get("policy", "greedy"),
    )
    if block.policy not in EVAL_POLICIES:
        read.fail(f"{where}.policy", block.policy, f"must be one of {list(EVAL_POLICIES)}")
    if block.policy == "sampled":
        from ppage_jax.train.registry import algorithm

        name = config["experiment"]["algorithm"]["name"]
        if not algorithm(name).STOCHASTIC:
            read.fail(
                f"{where}.policy",
                block.policy,
                f"algorithm {name!r} has no stochastic policy to sample; use 'greedy'",
            )
    if block.max_steps is None and env_spec(config).max_steps is None:
        read.fail(
            f"{where}.max_steps",
            None,
            "must be set when env.termination.max_steps "
            "is null (evaluation episodes need a step cap)",
        )
    return block


def check_disjoint(
    read: SpecReader, blocks: Sequence[tuple[str, int, int, str]], why: str = ""
) -> None:
    """Fail at the first of ``blocks`` (``(key, start, count, what)``: the seeds
    ``[start, start + count)``) that overlaps an earlier one; ``why`` ends the message."""
    for i, (key, start, count, what) in enumerate(blocks):
        for _, other, other_count, other_what in blocks[:i]:
            if start < other + other_count and other < start + count:
                read.fail(
                    key,
                    start,
                    f"{what} [{start}, {start + count}) must not overlap {other_what} "
                    f"[{other}, {other + other_count})" + (f"; {why}" if why else ""),
                )
