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

from ppage_jax.state import EnvParams
from ppage_jax.train import pg, progress
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.hyperparams_ppage import A2CHyperparams
from ppage_jax.train.pg import RunnerState

Hyperparams = A2CHyperparams
STOCHASTIC = True  # sample_actions draws from the learned policy


def network(tc: TrainConfig) -> pg.SeparateNetworks:
    return pg.SeparateNetworks(tc.env.num_actions, tc.hp.hidden_layers)


def optimizer(hp: A2CHyperparams) -> optax.GradientTransformation:
    """The actor's and the critic's optimisers, each on its own network's parameters."""
    actor = optax.chain(
        optax.clip_by_global_norm(hp.grad_clip),
        optax.add_decayed_weights(hp.actor_weight_decay),
        optax.adam(hp.actor_lr),
    )
    critic = optax.chain(optax.clip_by_global_norm(hp.grad_clip), optax.adam(hp.critic_lr))

    def labels(params):
        return pg.layer_labels(params, lambda n: "actor" if pg.is_policy_layer(n) else "critic")

    return optax.multi_transform({"actor": actor, "critic": critic}, labels)


def settings(hp: A2CHyperparams) -> pg.NStepSettings:
    return pg.NStepSettings(
        n_steps=hp.n_steps,
        gamma=hp.gamma,
        entropy_coef=hp.entropy_coef,
        value_coef=hp.value_loss_coef,
        reward_scale=hp.reward_scale,
    )


def init(key: jax.Array, tc: TrainConfig, params: EnvParams) -> RunnerState:
    """Networks, optimisers and the first observations."""
    return pg.init_runner(tc, key, params, network(tc), optimizer(tc.hp))


def update(runner: RunnerState, tc: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """``num_steps / n_steps`` synchronous n-step rounds; a metrics row."""
    return pg.sync_update(runner, tc, params, settings(tc.hp))


def train(key: jax.Array, config: TrainConfig, params: EnvParams) -> tuple[RunnerState, dict]:
    """Train A2C: pure, jittable, vmappable over ``key`` and ``params``."""
    return progress.train_loop(init, update, key, config, params)


def policy_state(runner: RunnerState) -> dict:
    """role -> network params."""
    return pg.policy_params(runner)


def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Argmax-logit actions int32[E, A] for the learning roles (0 for the others)."""
    return pg.greedy_policy_actions(tc, network(tc), policy, obs)


def sample_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
    """Actions int32[E, A] sampled from the learned policy (0 for the other roles)."""
    return pg.sampled_policy_actions(tc, network(tc), policy, key, obs)
