"""PPAGE's config directories, read as they ship.

PPAGE keeps each experiment in a file of its own (``experiment.yaml``,
``experiment_<algo>.yaml``, the legacy ``<algo>_experiment.yaml``) and its files hold keys this
package does not have. :func:`read_directory` chooses the experiment file and translates a
directory onto the strict form :func:`ppage_jax.config.load_config` validates:

- **mapped**: ``experiment.algorithm.params.episodes`` / ``seed`` become ``experiment.episodes``
  / ``experiment.seed``; hyperparameters a PPAGE file leaves out get PPAGE's code defaults where
  ours differ (:data:`PPAGE_DEFAULTS`); the legacy experiment file without its ``experiment:``
  wrapper is wrapped;
- **no effect here** (dropped, one line each in :attr:`Translation.notices`):
  :data:`SECTION_NOTICES`, :data:`PARAM_NOTICES` and, in a PPAGE directory, the
  ``observations.per_agent``, ``rewards.shaping[i].applies_to`` and ``params`` that PPAGE
  ignores.

A directory is in PPAGE's format when it uses a PPAGE-only key or an experiment file named
PPAGE's way; our own config directories read exactly as before. Every key that PPAGE does not
have is left to the strict loader, which rejects it. This module imports no learner.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ppage_jax.config.experiment.algorithms import ALGORITHM_PARAMS
from ppage_jax.config.fields import ConfigError, short_repr
from ppage_jax.config.safe_yaml import read_yaml_file
from ppage_jax.config.schema import CORE_SCHEMA, REWARD_TERMS
from ppage_jax.config.shipped import resolve_config_path
from ppage_jax.defaults import SECTIONS

EXPERIMENT_FILE = "experiment.yaml"
_SECTION_FILES = {
    f"{s}{ext}": s for s in SECTIONS if s != "experiment" for ext in (".yaml", ".yml")
}
_EXPERIMENT_NAME = re.compile(r"^(experiment|experiment_\w+|\w+_experiment)\.ya?ml$")

# PPAGE's learning baselines (its algorithm registry names).
PPAGE_ALGORITHMS = ("iql", "cql", "mixed", "dqn", "actor_critic", "a2c", "a3c", "jalgt")

# PPAGE's code defaults for hyperparameters a file leaves out, where ours differ (None: PPAGE
# derives it, see _ppage_default). reward_scale 1.0: PPAGE's DQN learns on the raw reward
# (as the actor-critic family does here by default).
PPAGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "iql": {"epsilon": 0.1, "epsilon_decay": 1.0, "min_epsilon": 0.01},
    "dqn": {"batch_size": 32, "buffer_size": 10_000, "min_replay_size": None, "reward_scale": 1.0},
}
# PPAGE's default episode budget per algorithm (a file without `episodes`).
PPAGE_EPISODES = {"iql": 500, "cql": 1000, "mixed": 1000, "dqn": 1000}

_RUN_DIR = "the run directory (ppage-jax run --out, or under experiment.output_dir)"
# Keys of PPAGE's section files that do nothing here: dotted key -> why, and where instead.
SECTION_NOTICES = {
    "env.render_mode": "training and evaluation never draw; watch an episode with ppage-jax "
    "render (GIF or HTML page), or render the PettingZoo adapter "
    "(ppage_jax.compat.pettingzoo, which reads env.render_mode)",
    "env.window_size": "no window of that size is opened; ppage-jax render sizes its frames "
    "with --cell-px, the PettingZoo adapter with cell_px",
    "agents.predators.base_type": "PPAGE reads it nowhere; the role comes from the section "
    "(agents.predators)",
    "agents.preys.base_type": "PPAGE reads it nowhere; the role comes from the section "
    "(agents.preys)",
    "observations.per_agent": "PPAGE ignores it (every agent sees observations.params); "
    "dropped to match PPAGE (here per_agent sets per-role radii: "
    "add it to a converted config to use them)",
    "rewards.normalization": "PPAGE ignores it and rewards are never normalised "
    "(scale rewards per algorithm with reward_scale)",
}
# PPAGE hyperparameters that do nothing here: key -> why, and where instead.
PARAM_NOTICES = {
    "device": "JAX places the run on its default device (JAX_PLATFORMS=cpu forces the CPU)",
    "curves_path": f"the learning curves go to metrics.csv and learning_curves.png in {_RUN_DIR}",
    "save_path": f"the trained policy goes to checkpoint.msgpack in {_RUN_DIR}",
    "verbose": "ppage-jax run shows a progress bar (--no-progress hides it)",
    "log_interval": f"every update is a row of metrics.csv in {_RUN_DIR}",
    "debug_first_episode": "watch an episode with ppage-jax render instead",
    "cql_alpha": "PPAGE reads it nowhere either; the Q-learning step size is alpha",
    "greedy_eval": "evaluation here plays value-based policies greedily and stochastic ones "
    "sampled, with a trained_greedy row beside (ppage-jax evaluate)",
}
# PPAGE hyperparameters that live at the experiment level here.
MOVED_PARAMS = ("episodes", "seed")

Loader = Callable[[Path], dict]


@dataclasses.dataclass
class Translation:
    """A config directory in the strict form, with what the translation did.

    ``sections``: ``(source file, section, body)`` for the loader to merge; ``experiment``: the
    experiment file read (None if there is none); ``ppage``: whether the directory is in
    PPAGE's format; ``mapped``: one line per PPAGE key mapped onto ours; ``notices``: one line
    per PPAGE key that has no effect here.
    """

    sections: list[tuple[str, str, Any]]
    experiment: str | None
    ppage: bool
    mapped: list[str] = dataclasses.field(default_factory=list)
    notices: list[str] = dataclasses.field(default_factory=list)


def experiment_files(directory: str | Path) -> list[str]:
    """Names of the experiment files in a config directory, sorted."""
    return sorted(
        p.name for p in Path(directory).iterdir() if p.is_file() and _EXPERIMENT_NAME.match(p.name)
    )


def choose_experiment(directory: Path, experiment: str | None) -> Path | None:
    """The experiment file to read: ``experiment`` (a file name in the directory, or a path),
    else ``experiment.yaml``, else the only experiment file; None when there is none."""
    names = experiment_files(directory)
    if experiment is not None:
        if str(experiment) in names:
            return directory / str(experiment)
        if Path(experiment).is_file():
            return Path(experiment)
        raise ConfigError(
            str(directory),
            "<experiment>",
            str(experiment),
            f"no such experiment file; this directory has {names}",
        )
    if EXPERIMENT_FILE in names:
        return directory / EXPERIMENT_FILE
    if len(names) <= 1:
        return directory / names[0] if names else None
    raise ConfigError(
        str(directory),
        "<experiment>",
        None,
        f"this directory holds several experiment files {names} and none is "
        f"experiment.yaml; choose one (ppage-jax ... --experiment FILE, "
        f"load_config(DIR, experiment=FILE))",
    )


def translate(path: str | Path, experiment: str | None = None) -> Translation:
    """:func:`read_directory` of a config directory (a path or a shipped config's name), with
    the config loader's YAML reader."""
    directory = resolve_config_path(path)
    if not directory.is_dir():
        raise ConfigError(str(path), "<path>", str(path), "must be a config directory")
    return read_directory(directory, experiment, read_yaml_file)


def read_directory(directory: Path, experiment: str | None, load: Loader) -> Translation:
    """Read a config directory (``load`` reads one YAML file into a mapping) and translate it
    onto the strict form; see the module docstring."""
    chosen = choose_experiment(directory, experiment)
    bodies: list[tuple[Path, str, Any]] = []
    for file in sorted(p for p in directory.iterdir() if p.suffix.lower() in (".yaml", ".yml")):
        if _EXPERIMENT_NAME.match(file.name):
            continue
        lower = file.name.lower()
        if file.name != lower and (lower in _SECTION_FILES or _EXPERIMENT_NAME.match(lower)):
            raise ConfigError(
                str(file),
                "<file>",
                file.name,
                f"config file names are lowercase: this file is not read as {lower}; "
                f"rename it to {lower}",
            )
        if file.name not in _SECTION_FILES:
            raise ConfigError(
                str(file),
                "<file>",
                file.name,
                f"unknown config file; expected some of "
                f"{[s + '.yaml' for s in SECTIONS]} or experiment_<algo>.yaml",
            )
        section = _SECTION_FILES[file.name]
        twin = next((f for f, s, _ in bodies if s == section), None)
        if twin is not None:
            raise ConfigError(
                str(file),
                "<file>",
                file.name,
                f"section {section!r} is already given by {twin.name}; keep one file per section",
            )
        bodies.append((file, section, _single_section(file, load(file), section)))
    legacy = False
    if chosen is not None:
        raw = load(chosen)
        legacy = set(raw) == {"algorithm"}
        body = raw["algorithm"] if legacy else _single_section(chosen, raw, "experiment")
        bodies.append((chosen, "experiment", {"algorithm": body} if legacy else body))
    if not bodies:
        raise ConfigError(
            str(directory),
            "<path>",
            str(directory),
            f"holds no config files; expected some of {[s + '.yaml' for s in SECTIONS]}",
        )
    ppage = (
        legacy
        or _uses_ppage_keys(bodies)
        or (chosen is not None and chosen.name != EXPERIMENT_FILE)
        or any(name != EXPERIMENT_FILE for name in experiment_files(directory))
    )
    out = Translation([], None if chosen is None else chosen.name, ppage)
    if legacy:
        out.notices.append(
            f"{chosen}: <top level> = ['algorithm']: PPAGE's legacy form without "
            f"the experiment: wrapper (PPAGE's loaders cannot read it); read as "
            f"experiment.algorithm"
        )
    for file, section, body in bodies:
        body = copy.deepcopy(body)
        if isinstance(body, dict):
            _TRANSLATORS[section](body, _Report(str(file), out))
        out.sections.append((str(file), section, body))
    return out


def _single_section(file: Path, body: dict, section: str) -> Any:
    if set(body) != {section}:
        raise ConfigError(
            str(file),
            "<top level>",
            sorted(body),
            f"{file.name} holds exactly one top-level key, {section!r}",
        )
    return body[section]


def _uses_ppage_keys(bodies: list[tuple[Path, str, Any]]) -> bool:
    for _, section, body in bodies:
        if not isinstance(body, dict):
            continue
        if section == "agents" and any(
            isinstance(body.get(role), dict) and "base_type" in body[role]
            for role in ("predators", "preys")
        ):
            return True
        if section == "experiment":
            params = _params(body)
            if params is not None and set(params) & (set(PARAM_NOTICES) | set(MOVED_PARAMS)):
                return True
    return False


def _params(experiment: dict) -> dict | None:
    algorithm = experiment.get("algorithm")
    params = algorithm.get("params") if isinstance(algorithm, dict) else None
    return params if isinstance(params, dict) else None


@dataclasses.dataclass
class _Report:
    source: str
    out: Translation

    def notice(self, key: str, value: Any, why: str) -> None:
        self.out.notices.append(
            f"{self.source}: {key} = {short_repr(value)} has no effect here: {why}"
        )

    def mapped(self, key: str, value: Any, what: str) -> None:
        """``what``: "-> where it goes" or "(what is done with it)"."""
        self.out.mapped.append(f"{self.source}: {key} = {short_repr(value)} {what}")

    def fail(self, key: str, value: Any, allowed: str) -> NoReturn:
        raise ConfigError(self.source, key, value, allowed)


def _drop(body: dict, key: str, dotted: str, report: _Report, why: str) -> None:
    report.notice(dotted, body.pop(key), why)


def _env(body: dict, report: _Report) -> None:
    if not report.out.ppage:
        return
    for key in ("render_mode", "window_size"):
        if key not in body:
            continue
        try:  # kept when valid here; PPAGE's "human" is dropped
            CORE_SCHEMA["env"][key].validate(body[key])
            report.notice(f"env.{key}", body[key], SECTION_NOTICES[f"env.{key}"])
        except ValueError as err:
            _drop(
                body,
                key,
                f"env.{key}",
                report,
                f"{SECTION_NOTICES[f'env.{key}']}; dropped, as here it {err}",
            )
    if "seed" in body:
        report.mapped(
            "env.seed",
            body["seed"],
            "-> env.seed (the PettingZoo adapter's seed "
            "when none is given; training layouts follow "
            "experiment.seed)",
        )


def _agents(body: dict, report: _Report) -> None:
    for role in ("predators", "preys"):
        if isinstance(body.get(role), dict) and "base_type" in body[role]:
            _drop(
                body[role],
                "base_type",
                f"agents.{role}.base_type",
                report,
                SECTION_NOTICES[f"agents.{role}.base_type"],
            )
    naming = body.get("naming")
    if isinstance(naming, dict) and report.out.ppage:
        for key, role in (("predator_prefix", "predators"), ("prey_prefix", "preys")):
            if key in naming:
                report.mapped(
                    f"agents.naming.{key}",
                    naming[key],
                    f"-> agent names {naming[key]}_1, {naming[key]}_2, ... ({role})",
                )


def _observations(body: dict, report: _Report) -> None:
    if report.out.ppage and body.get("per_agent") is not None:
        _drop(
            body,
            "per_agent",
            "observations.per_agent",
            report,
            SECTION_NOTICES["observations.per_agent"],
        )


def _rewards(body: dict, report: _Report) -> None:
    if not report.out.ppage:
        return
    if "normalization" in body:
        _drop(
            body,
            "normalization",
            "rewards.normalization",
            report,
            SECTION_NOTICES["rewards.normalization"],
        )
    shaping = body.get("shaping")
    for i, entry in enumerate(shaping if isinstance(shaping, list) else []):
        if not isinstance(entry, dict):
            continue
        own = _own_agents(entry.get("name"))
        if "applies_to" in entry and own is not None and entry["applies_to"] != own:
            _drop(
                entry,
                "applies_to",
                f"rewards.shaping[{i}].applies_to",
                report,
                f"PPAGE ignores it (the term's formula rewards the {own} agents); dropped "
                f"to match PPAGE",
            )
        if "params" in entry:
            _drop(
                entry,
                "params",
                f"rewards.shaping[{i}].params",
                report,
                "PPAGE drops a shaping entry's params (the term runs with its defaults); "
                "dropped to match PPAGE",
            )


def _own_agents(term: Any) -> str | None:
    """The agents a reward term's formula rewards (its registered applies_to), or None (the
    strict validator names an unknown term)."""
    declared = REWARD_TERMS.get(term) if isinstance(term, str) else None
    return None if declared is None else declared.applies_to


def _actions(body: dict, report: _Report) -> None:
    """PPAGE's action tables (discrete_5, cross, speed_discrete_5) all exist here."""


def _experiment(body: dict, report: _Report) -> None:
    params = _params(body)
    algorithm = body.get("algorithm")
    name = algorithm.get("name") if isinstance(algorithm, dict) else None
    if params is None:
        return
    if report.out.ppage and name in PPAGE_ALGORITHMS and name not in ALGORITHM_PARAMS:
        report.fail(
            "experiment.algorithm.name",
            name,
            f"PPAGE's {name!r} is not available in this version of ppage-jax; "
            f"available: {sorted(ALGORITHM_PARAMS)}",
        )
    for key in [k for k in params if k in PARAM_NOTICES]:
        _drop(params, key, f"experiment.algorithm.params.{key}", report, PARAM_NOTICES[key])
    if (
        "episodes" not in params
        and report.out.ppage
        and name in PPAGE_EPISODES
        and "episodes" not in body
        and "total_timesteps" not in body
    ):
        params["episodes"] = PPAGE_EPISODES[name]
        report.mapped(
            "experiment.algorithm.params.episodes",
            params["episodes"],
            "(PPAGE's default budget; the file leaves it out)",
        )
    if "episodes" in params:
        _move(body, params, "episodes", report, also=("total_timesteps",))
        body["total_timesteps"] = None
    if "seed" in params:
        if params["seed"] is None:
            _drop(
                params,
                "seed",
                "experiment.algorithm.params.seed",
                report,
                "PPAGE then seeds from the clock, while runs here are always seeded "
                "(experiment.seed)",
            )
        else:
            _move(body, params, "seed", report)
    if report.out.ppage and isinstance(name, str):
        for key, value in PPAGE_DEFAULTS.get(name, {}).items():
            if key not in params:
                params[key] = _ppage_default(name, key, value, params)
                report.mapped(
                    f"experiment.algorithm.params.{key}",
                    params[key],
                    "(PPAGE's default; the file leaves it out)",
                )
    if "action_dim" in params and report.out.ppage:
        report.mapped(
            "experiment.algorithm.params.action_dim",
            params["action_dim"],
            "(checked against the size of the action table, actions.type)",
        )


def _ppage_default(name: str, key: str, value: Any, params: dict) -> Any:
    if (name, key) == ("dqn", "min_replay_size"):  # PPAGE: min_replay_size = batch_size
        return params["batch_size"]
    return value


def _move(body: dict, params: dict, key: str, report: _Report, also: tuple[str, ...] = ()) -> None:
    dotted = f"experiment.algorithm.params.{key}"
    for other in (key, *also):
        if body.get(other) is not None:
            report.fail(
                dotted,
                params[key],
                f"PPAGE's {key} is experiment.{key} here, and experiment.{other} = "
                f"{short_repr(body[other])} is set in the same file; keep one",
            )
    body[key] = params.pop(key)
    report.mapped(dotted, body[key], f"-> experiment.{key}")


_TRANSLATORS: dict[str, Callable[[dict, _Report], None]] = {
    "env": _env,
    "agents": _agents,
    "observations": _observations,
    "rewards": _rewards,
    "actions": _actions,
    "experiment": _experiment,
}
