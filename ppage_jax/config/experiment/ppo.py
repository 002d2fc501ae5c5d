"""The PPO family's declarations: IPPO and MAPPO (PPO per role, MAPPO's critic centralised),
with the encoder a network reads its observation through and the baseline guides (a
kickstarting ``teacher``, a residual ``prior``)."""

from __future__ import annotations

import dataclasses

from ppage_jax.config import schema
from ppage_jax.config.env_spec import env_spec
from ppage_jax.config.experiment.base import Fail, Hyperparams, NetworkHyperparams, param
from ppage_jax.config.fields import NON_NEGATIVE, UNIT_INTERVAL, Field, positive

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


DECLARED: dict[str, type[Hyperparams]] = {"ippo": IPPOHyperparams, "mappo": MAPPOHyperparams}
