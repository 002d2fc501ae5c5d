"""Every algorithm's hyperparameters, declared once: default, validity check, one-line doc.

A declaration is a frozen dataclass whose fields are made with :func:`param`. The config
validator (:mod:`ppage_jax.config.experiment`) reads the checks and defaults from it, the learner
reads its values (``tc.hp``), and :func:`ppage_jax.config.algorithms.markdown_table` writes the
documentation from it. Each algorithm's declaration is listed by name in
:data:`ppage_jax.config.algorithms.ALGORITHM_PARAMS`. This module imports no learner (no flax,
no optax): loading a config stays light.

Shared bases: :class:`Hyperparams` (``num_steps``, every algorithm), :class:`LearnerHyperparams`
(``gamma``), :class:`NetworkHyperparams` (the network learners' ``learning_rate``,
``hidden_layers``, ``obs_scale``, ``reward_scale``) and :class:`EpsilonGreedyHyperparams`
(PPAGE's epsilon schedule). A class docstring's first paragraph describes the algorithm in the
documentation; :meth:`Hyperparams.check` holds its cross-key rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ppage_jax.actions import ACTION_TABLES
from ppage_jax.config import schema
from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.fields import NON_NEGATIVE, UNIT_INTERVAL, Field, positive

# fail(dotted_key, value, allowed) raises a ConfigError naming the file the key came from.
Fail = Callable[..., None]


def param(default: Any, check: Field, doc: str, traced: bool = False) -> Any:
    """A hyperparameter field: its ``default`` (a list is stored as a tuple), the
    :class:`~ppage_jax.config.Field` its configured value must pass, and a one-line ``doc``.
    ``traced``: a float the learner reads as a traced value, so it may change between runs
    of one compiled program (sweep arms, curricula)."""
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(
        default=default, metadata={"check": check, "doc": doc, "traced": traced}
    )


def redefault(cls: type, name: str, default: Any) -> Any:
    """Field ``name`` of the declaration ``cls`` with another default (same check, doc and
    tracing)."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return param(
        default,
        field.metadata["check"],
        field.metadata["doc"],
        field.metadata.get("traced", False),
    )


def same_as(cls: type, name: str) -> Any:
    """Field ``name`` declared as in the declaration ``cls`` (its default, check, doc and
    tracing), for a declaration that shares it without inheriting ``cls``'s field order."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return redefault(cls, name, field.default)


# --------------------------------------------------------------------------- shared bases
@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """The base of every declaration."""

    num_steps: int = param(32, positive(int), "turns per grid per update (one metrics row)")

    def check(self, data: dict, fail: Fail) -> None:
        """Cross-key rules over the merged config ``data``; report through ``fail``."""

    def traced_value(self, name: str) -> float:
        """The value the learner uses for traced hyperparameter ``name`` (a declaration whose
        field falls back on another, such as A2C's step sizes, resolves it here)."""
        return getattr(self, name)


@dataclasses.dataclass(frozen=True)
class LearnerHyperparams(Hyperparams):
    """What every learning algorithm has."""

    gamma: float = param(0.99, UNIT_INTERVAL, "discount factor", traced=True)


HIDDEN_LAYERS = Field(
    list,
    False,
    lambda v: (
        len(v) > 0 and all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in v)
    ),
    "of positive integers, at least one",
)


@dataclasses.dataclass(frozen=True)
class NetworkHyperparams(LearnerHyperparams):
    """What every neural-network learner has."""

    learning_rate: float = param(1e-3, positive(), "Adam step size", traced=True)
    hidden_layers: tuple[int, ...] = param((64, 64), HIDDEN_LAYERS, "widths of the MLP layers")
    obs_scale: float | None = param(
        None,
        Field(
            float,
            True,
            lambda v: v > 0,
            "> 0; null means 1 / env.size, or 1 for the spatial grid observation",
        ),
        "factor applied to observations before the network",
    )
    reward_scale: float = param(
        0.01, positive(), "factor applied to rewards before learning", traced=True
    )


@dataclasses.dataclass(frozen=True)
class EpsilonGreedyHyperparams(LearnerHyperparams):
    """PPAGE's epsilon-greedy exploration, decaying once per finished episode."""

    epsilon: float = param(1.0, UNIT_INTERVAL, "initial exploration probability", traced=True)
    epsilon_decay: float = param(
        0.995,
        UNIT_INTERVAL,
        "epsilon factor per finished episode (all grids count)",
        traced=True,
    )
    min_epsilon: float = param(0.05, UNIT_INTERVAL, "floor of the decayed epsilon", traced=True)


# --------------------------------------------------------------------------- algorithms
@dataclasses.dataclass(frozen=True)
class RandomHyperparams(Hyperparams):
    """No learning: the learning roles act uniformly at random (the baseline; same outputs
    as a trained run)."""


# The encoders a network may put in front of its MLP layers.
NETWORKS = ("mlp", "cnn", "set")


def network_error(network: str, builder: str) -> str | None:
    """Why encoder ``network`` cannot read observation ``builder`` (None when it can), from
    how the builder's registration says it is read (``reads_as``)."""
    reads_as = schema.OBSERVATION_READINGS.get(builder, "flat")
    if network == "cnn" and reads_as != "spatial":
        return f"cnn needs a spatial observation; the observation {builder!r} is {reads_as}"
    if network == "set" and reads_as != "slots":
        return f"set needs a slot observation; the observation {builder!r} is {reads_as}"
    return None


@dataclasses.dataclass(frozen=True)
class EncoderHyperparams(NetworkHyperparams):
    """A network learner whose torso fits the observation (``network``)."""

    network: str | None = param(
        None,
        Field(
            str,
            True,
            lambda v: v in NETWORKS,
            f"one of {list(NETWORKS)}; null: cnn for a spatial observation (grid), set for a "
            f"slot observation (local_radius, absolute, relative), mlp otherwise",
        ),
        "encoder before the MLP layers: none (mlp), a conv torso over the grid view (cnn), "
        "or the slots summed into an egocentric window, then the conv torso (set)",
    )
    encoder_width: int = param(
        16,
        positive(int),
        "cnn and set: channels of the strided 3x3 convolution",
    )

    def check(self, data: dict, fail: Fail) -> None:
        if self.network is not None:
            error = network_error(self.network, env_spec(data).observation_type)
            if error is not None:
                fail("experiment.algorithm.params.network", self.network, error)


# Baseline guides (IPPO, MAPPO), for a kickstarting ``teacher`` or a residual ``prior``:
# name -> the baseline of each role.
TEACHERS = {
    "greedy": {"predator": "chase", "prey": "evade"},
    "intercept": {"predator": "intercept", "prey": "evade"},
}
GUIDE = Field(str, True, lambda v: v in TEACHERS, f"one of {list(TEACHERS)}")  # or null


@dataclasses.dataclass(frozen=True)
class IPPOHyperparams(EncoderHyperparams):
    """PPO per role, one actor and one critic shared by the role's agents (one-hot agent id
    appended), each reading the observation through the encoder ``network``, GAE, clipping
    (PureJaxRL style)."""

    anneal_lr: bool = param(
        True,
        Field(bool),
        "decay the learning rate linearly to 0 over the run (false: constant, so a longer "
        "budget extends the curve)",
    )
    normalize_rewards: bool = param(
        False,
        Field(bool),
        "divide rewards by the running std of the discounted return (SB3's VecNormalize "
        "reward scaling), so every reward design reaches the learner at a usable scale",
    )
    update_epochs: int = param(2, positive(int), "passes over each rollout")
    num_minibatches: int = param(
        4, positive(int), "minibatches per epoch (must divide num_envs * num_steps)"
    )
    gae_lambda: float = param(0.95, UNIT_INTERVAL, "GAE lambda", traced=True)
    clip_eps: float = param(0.2, positive(), "PPO ratio and value clipping", traced=True)
    ent_coef: float = param(0.01, NON_NEGATIVE, "entropy bonus weight", traced=True)
    vf_coef: float = param(0.5, NON_NEGATIVE, "value loss weight", traced=True)
    max_grad_norm: float = param(0.5, positive(), "global gradient-norm clip", traced=True)
    activation: str = param(
        "tanh",
        Field(str, False, lambda v: v in ("tanh", "relu"), "one of ['tanh', 'relu']"),
        "hidden activation",
    )
    teacher: str | None = param(
        None,
        GUIDE,
        "kickstarting: each learning role also imitates this baseline (greedy: the BFS chase "
        "for predators, greedy evade for prey; intercept: the intercept chase for predators, "
        "greedy evade for prey), weighted by teacher_coef; null: no teacher",
    )
    teacher_coef: float = param(
        1.0,
        NON_NEGATIVE,
        "weight of the cross-entropy to the teacher's action at the start of training",
        traced=True,
    )
    teacher_fraction: float = param(
        0.5,
        Field(float, False, lambda v: 0 < v <= 1, "in (0, 1]"),
        "share of the training steps over which teacher_coef anneals linearly to 0",
        traced=True,
    )
    prior: str | None = param(
        None,
        GUIDE,
        "residual policy: the actor's logits add prior_logit to this baseline's action "
        "(the teacher's names), so the policy reads the state as well as its observation and "
        "learns corrections to the baseline; null: none",
    )
    prior_logit: float = param(
        3.0,
        NON_NEGATIVE,
        "logit added to the prior baseline's action (3: the untrained policy takes it with "
        "probability 0.83 with five actions)",
        traced=True,
    )

    def check(self, data: dict, fail: Fail) -> None:
        super().check(data, fail)
        batch = data["experiment"]["num_envs"] * self.num_steps
        if batch % self.num_minibatches:
            fail(
                "experiment.algorithm.params.num_minibatches",
                self.num_minibatches,
                f"must divide num_envs * num_steps = {batch}",
            )


@dataclasses.dataclass(frozen=True)
class MAPPOHyperparams(IPPOHyperparams):
    """PPO per role with a centralised critic (JaxMARL's MAPPO): the actor as in `ippo`, the
    critic an MLP on `env.global_state` (positions, roles, captured flags, obstacle map) with
    the agent's one-hot id; the critic trains only, the policy acts on its own observation."""


@dataclasses.dataclass(frozen=True)
class DQNHyperparams(NetworkHyperparams, EpsilonGreedyHyperparams):
    """Independent DQN per role (network shared within the role), on-device ring replay,
    hard target syncs, Huber loss; ``double_dqn`` and ``dueling`` as PPAGE (D3QN = both)."""

    num_steps: int = redefault(Hyperparams, "num_steps", 16)
    hidden_layers: tuple[int, ...] = redefault(NetworkHyperparams, "hidden_layers", (128, 128))
    double_dqn: bool = param(
        False, Field(bool), "the online network picks the next action, the target values it"
    )
    dueling: bool = param(False, Field(bool), "Q = V + A - mean(A) heads")
    batch_size: int = param(256, positive(int), "grid-transitions per gradient step")
    buffer_size: int = param(50_000, positive(int), "grid-transitions kept per role (>= num_envs)")
    min_replay_size: int = param(
        1_000, positive(int), "transitions stored before learning starts (<= buffer_size)"
    )
    target_update_interval: int = param(
        100, positive(int), "gradient steps between hard target syncs"
    )
    grad_clip: float = param(5.0, positive(), "global gradient-norm clip", traced=True)
    gradient_steps: int = param(1, positive(int), "gradient steps per turn")

    def check(self, data: dict, fail: Fail) -> None:
        num_envs = data["experiment"]["num_envs"]
        if self.buffer_size < num_envs:
            fail(
                "experiment.algorithm.params.buffer_size",
                self.buffer_size,
                f"must hold at least one turn of every grid (>= num_envs = {num_envs})",
            )
        if self.min_replay_size > self.buffer_size:
            fail(
                "experiment.algorithm.params.min_replay_size",
                self.min_replay_size,
                f"must be <= buffer_size ({self.buffer_size})",
            )


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


# --------------------------------------------------------------------------- reading
def checks(cls: type[Hyperparams]) -> dict[str, Field]:
    """key -> the Field its configured value must pass."""
    return {f.name: f.metadata["check"] for f in dataclasses.fields(cls)}


def defaults(cls: type[Hyperparams]) -> dict[str, Any]:
    """key -> default, in config form (tuples as lists)."""
    return {
        f.name: list(f.default) if isinstance(f.default, tuple) else f.default
        for f in dataclasses.fields(cls)
    }


def from_params(cls: type[Hyperparams], params: dict) -> Hyperparams:
    """The frozen declaration from validated ``params`` (lists become tuples; keys the
    declaration lacks, such as PPAGE's ``action_dim``, are dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k in names
    }
    return cls(**values)


def traced_names(cls: type[Hyperparams]) -> tuple[str, ...]:
    """The traced hyperparameters of declaration ``cls``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("traced", False))


def check_value(cls: type[Hyperparams], name: str, value: object, algorithm: str) -> float:
    """``value`` for traced hyperparameter ``name`` of ``cls``, validated (a numeric string
    such as YAML's ``3e-4`` is read as a number); ValueError with a one-line reason."""
    allowed = traced_names(cls)
    if name not in allowed:
        raise ValueError(f"is not a traced hyperparameter of {algorithm}; traced: {list(allowed)}")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    return float(checks(cls)[name].validate(value))


def undeclared_fields(cls: type) -> list[str]:
    """Fields of ``cls`` not made with :func:`param` (no check or doc)."""
    return [
        f.name
        for f in dataclasses.fields(cls)
        if "check" not in f.metadata or "doc" not in f.metadata
    ]
