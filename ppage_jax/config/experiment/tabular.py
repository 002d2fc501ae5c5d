"""The tabular family's declarations: PPAGE's hashed-table learners, one table per agent
(``iql``), one joint table per team (``cql``), either per team (``mixed``), and JAL-GT (a
joint-action table per agent, stage games solved for a correlated equilibrium)."""

from __future__ import annotations

import dataclasses

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.experiment.base import (
    EpsilonGreedyHyperparams,
    Fail,
    Hyperparams,
    param,
    redefault,
    same_as,
)
from ppage_jax.config.experiment.roles import LEARN, ROLE_KEYS
from ppage_jax.config.fields import Field, positive

# Tabular team learners: one table per agent (iql) or one joint table per team (cql).
TABLE_KINDS = ("iql", "cql")
# Largest joint-action table row a cql team may have (nA ** team size).
MAX_JOINT_ACTIONS = 4096


@dataclasses.dataclass(frozen=True)
class TabularHyperparams(EpsilonGreedyHyperparams):
    """Tabular Q-learning on hashed observation tables (PPAGE's tabular experiment values)."""

    num_steps: int = redefault(Hyperparams, "num_steps", 16)
    alpha: float = param(
        0.1,
        Field(float, False, lambda v: 0 < v <= 1, "in (0, 1]"),
        "Q-learning step size",
        traced=True,
    )
    table_size: int = param(
        65_536,
        Field(int, False, lambda v: v >= 1, ">= 1 (rows per table)"),
        "rows per table (observations are hashed into them)",
    )

    @property
    def kinds(self) -> dict[str, str]:
        """role -> ``"iql"`` or ``"cql"`` (each tabular algorithm says)."""
        raise NotImplementedError

    def check(self, data: dict, fail: Fail) -> None:
        """A cql team's joint action space must stay small (``nA ** team size``)."""
        spec = env_spec(data)
        num_actions = len(ACTION_TABLES[spec.action_type])
        for role, kind in self.kinds.items():
            n = spec.n_predators if role == "predator" else spec.n_prey
            if kind == "cql" and num_actions**n > MAX_JOINT_ACTIONS:
                fail(
                    "experiment.algorithm.name",
                    data["experiment"]["algorithm"]["name"],
                    f"a cql team of {n} {role}s has {num_actions}**{n} = {num_actions**n} "
                    f"joint actions; at most {MAX_JOINT_ACTIONS} are supported (use iql for "
                    f"the {role}s, e.g. algorithm mixed)",
                )


@dataclasses.dataclass(frozen=True)
class IQLHyperparams(TabularHyperparams):
    """Tabular Q-learning, one hashed table per agent (PPAGE's IQL)."""

    table_size: int = redefault(TabularHyperparams, "table_size", 262_144)

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": "iql", "prey": "iql"}


@dataclasses.dataclass(frozen=True)
class CQLHyperparams(TabularHyperparams):
    """Centralised tabular Q-learning: one table per team over the team's joint observation
    and joint action, team reward = sum of the members' rewards, each member acts on the
    marginal mean (PPAGE's CQL, "centralised")."""

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": "cql", "prey": "cql"}


_KIND = Field(str, False, lambda v: v in TABLE_KINDS, f"one of {list(TABLE_KINDS)}")


@dataclasses.dataclass(frozen=True)
class MixedHyperparams(TabularHyperparams):
    """PPAGE's mixed trainer: each team ``iql`` (a table per agent) or ``cql`` (a joint table
    for the team)."""

    predator_algo: str = param("cql", _KIND, "the predators' table kind")
    prey_algo: str = param("iql", _KIND, "the prey's table kind")

    @property
    def kinds(self) -> dict[str, str]:
        return {"predator": self.predator_algo, "prey": self.prey_algo}


# JAL-GT solves a stage game over the joint actions of every learning agent.
MAX_JALGT_AGENTS = 2


@dataclasses.dataclass(frozen=True)
class JALGTHyperparams(EpsilonGreedyHyperparams):
    """PPAGE's JAL-GT (Albrecht, Christianos & Tuyls 2024, algorithm 7): one joint-action
    value table per learning agent over the hashed joint observation; each visited stage game
    is solved for its social-welfare-maximising correlated equilibrium by linear programming
    on device; joint actions are sampled from it (each agent exploring with epsilon) and
    targets bootstrap on the next state's equilibrium value."""

    num_steps: int = same_as(TabularHyperparams, "num_steps")
    alpha: float = same_as(TabularHyperparams, "alpha")
    table_size: int = same_as(TabularHyperparams, "table_size")
    max_pivots: int = param(1000, positive(int), "simplex pivots allowed per stage-game solve")

    def check(self, data: dict, fail: Fail) -> None:
        """At most MAX_JALGT_AGENTS learning agents (the joint game grows as nA ** n)."""
        exp, spec = data["experiment"], env_spec(data)
        counts = dict(zip(ROLE_KEYS, (spec.n_predators, spec.n_prey), strict=True))
        n = sum(counts[key] for key in ROLE_KEYS if exp["roles"][key] == LEARN)
        if n > MAX_JALGT_AGENTS:
            k = len(ACTION_TABLES[spec.action_type])
            fail(
                "experiment.algorithm.name",
                exp["algorithm"]["name"],
                f"JAL-GT plays one game over the joint actions of all {n} learning agents "
                f"({k}**{n} = {k**n}); at most {MAX_JALGT_AGENTS} learning agents are "
                f"supported (e.g. 1 predator vs 1 prey, or set experiment.roles.preys to a "
                f"fixed policy)",
            )


DECLARED: dict[str, type[Hyperparams]] = {
    "iql": IQLHyperparams,
    "cql": CQLHyperparams,
    "mixed": MixedHyperparams,
    "jalgt": JALGTHyperparams,
    "jal_gt": JALGTHyperparams,  # PPAGE's other name of jalgt
}
