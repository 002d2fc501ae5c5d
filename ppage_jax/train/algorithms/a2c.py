"""A2C: PPAGE's synchronous advantage actor-critic, vectorised over grids.

Each learning role has a separate actor MLP and critic MLP (PPAGE's ActorNetwork and
CriticNetwork), shared by the role's agents (one-hot agent id appended), each with its own
Adam step size (``actor_learning_rate``, ``critic_learning_rate``), gradient-norm clip
(``grad_clip``, applied to each network apart) and, for the actor, L2 weight decay
(``actor_weight_decay``, as PyTorch's ``Adam(weight_decay=...)``).

Every round, all grids take ``n_steps`` turns sampling from the policy; n-step returns
bootstrap on the critic's value of the last observation, cut by termination (the episode's
or the prey's own capture) and restarted where a grid's episode ended inside the rollout.
The loss is PPAGE's: ``-mean(log pi(a|s) * A) - entropy_coef * mean(H) +
value_loss_coef * Huber(V(s), R)`` with ``A = R - V(s)`` held fixed, averaged over the valid
transitions (captured prey weigh nothing). An update (one metrics row) is
``num_steps / n_steps`` rounds.

Differences from PPAGE's loop: PPAGE cuts the bootstrap at truncation too (``done``), while
here, as in every learner of this package, only termination does; and PPAGE's rollouts stop
at an episode's end, while here the grids auto-reset and the returns restart there.

``train(key, config, params) -> (runner_state, metrics)``: see ``ppage_jax/train/__init__.py``.
"""

from __future__ import annotations

import jax
import optax

from ppage_jax.config.experiment.actor_critic import A2CHyperparams
from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, optim, pg
from ppage_jax.train.kit.pg import RunnerState

Hyperparams = A2CHyperparams
STOCHASTIC = True  # sample_actions draws from the learned policy


def network(tc: TrainConfig) -> pg.SeparateNetworks:
    return pg.SeparateNetworks(tc.env.num_actions, tc.hp.hidden_layers)


def optimizer_settings(hp: A2CHyperparams) -> dict:
    """The injected optimiser settings (:mod:`.optim`)."""
    return {
        "actor_lr": hp.actor_lr,
        "critic_lr": hp.critic_lr,
        "grad_clip": hp.grad_clip,
        "weight_decay": hp.actor_weight_decay,
    }


def optimizer(hp: A2CHyperparams) -> optax.GradientTransformation:
    """The actor's and the critic's optimisers, each on its own network's parameters."""

    def labels(params):
        return pg.layer_labels(params, lambda n: "actor" if pg.is_policy_layer(n) else "critic")

    def factory(actor_lr, critic_lr, grad_clip, weight_decay):
        actor = optax.chain(
            optax.clip_by_global_norm(grad_clip),
            optax.add_decayed_weights(weight_decay),
            optax.adam(actor_lr),
        )
        critic = optax.chain(optax.clip_by_global_norm(grad_clip), optax.adam(critic_lr))
        return optax.multi_transform({"actor": actor, "critic": critic}, labels)

    return optim.injected(factory, **optimizer_settings(hp))


def settings(hp: A2CHyperparams) -> pg.NStepSettings:
    return pg.nstep_settings(hp, hp.value_loss_coef, optimizer_settings(hp))


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    """Networks, optimisers and the first observations."""
    return pg.init_runner(tc, key, params, network(tc), optimizer(tc.hp))


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps / n_steps`` synchronous n-step rounds; a metrics row."""
    return pg.sync_update(runner, tc, params, settings(tc.hp))


train = loop.trainer(init, update, "A2C")


policy_state, greedy_actions, sample_actions = pg.policy_functions(network)
