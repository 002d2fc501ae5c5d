"""What the PPO learners (``ippo``, ``mappo``) share: the actor-critic network, the rollout,
GAE, the clipped loss, the minibatch update and the policy functions (PureJaxRL style).

Each learning role has one actor-critic network shared by all its agents; the agent's one-hot
id within the role is appended to its observation. The actor reads the role's observation
through the encoder that fits it (:mod:`ppage_jax.train.kit.encoders`). The critic reads the same
observation (``ippo``) or, given a ``critic_input`` function, a centralised input such as the
global state (``mappo``). Every update collects ``num_steps`` turns from ``num_envs`` grids,
computes GAE per agent, and runs ``update_epochs`` epochs of ``num_minibatches`` clipped-PPO
minibatch steps per role.

- Bootstrap: ``V`` of the state after every step (``final_obs``, ``final_state``), cut only by
  termination (the episode's, or the prey's own capture); truncation bootstraps. Only a
  truncated step needs a value pass of its own: elsewhere the state after the step is the one
  the next step acts on, whose value the rollout has (:func:`rollout`).
- Masking: transitions of a prey that was already captured before the step have weight 0 in
  every loss term and in the advantage normalisation.
- Kickstarting (``teacher``): the rollout also records the action a baseline teacher takes in
  each state (the BFS chase for predators, greedy evade for prey; they read the state), and
  the loss adds ``w * cross-entropy(teacher action, policy)`` with ``w = teacher_coef``
  annealed linearly to 0 over the first ``teacher_fraction`` of the optimiser steps
  (Schmitt et al., 2018). The teacher guides only: the policy acts on its own observation.
- Residual prior (``prior``): the actor also reads the action the baseline takes in the
  current state (one-hot, after the encoder) and its logits add ``prior_logit`` to that
  action, so the policy starts as a noisy copy of the baseline and learns corrections to it
  (residual policy learning, Silver et al., 2018). Such a policy reads the state as well as
  its observation (``READS_STATE``; outside training the baseline reads the env's default
  speeds); the rollout stores the prior's action, so the loss recomputes the same logits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from flax.training.train_state import TrainState

from ppage_jax.config.experiment.ppo import TEACHERS, IPPOHyperparams
from ppage_jax.state import EnvParams, State
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, networks, optim, pg, roles
from ppage_jax.train.kit.encoders import (
    Encoder,
    InputSpec,
    SetInput,
    activation_fn,
    compact,
    input_spec,
    prepare,
    scaled_init,
)
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.return_scale import normalise, return_scale_init
from ppage_jax.train.kit.rollout import EnvCarry, env_reset, env_step, masked_mean
from ppage_jax.types import Replaceable

# critic_input(tc, role, state[E]) -> float[E, n_role, G]: a centralised critic's input.
CriticInput = Callable[[TrainConfig, str, State], jax.Array]


# --------------------------------------------------------------------------- network
class ActorCritic(nn.Module):
    """Actor and critic: ``(x float[..., F], critic_x) -> (logits [..., nA], value [...])``;
    ``x`` may also be what :func:`~ppage_jax.train.kit.encoders.prepare` made of it (the
    same outputs). Both read ``x`` through one encoder (``spec``; none for ``mlp``), then their own
    ``hidden_layers``; with ``critic_x`` (a centralised input) the critic reads that instead,
    through its MLP layers. ``actor_only`` skips the critic (value None). With
    ``prior_input`` the actor's layers also read ``prior`` (int actions [...], one-hot; zeros
    when not given, as in a value-only call).

    The encoder is shared (trained by both losses, as PPO's convolutional torsos are) because
    it costs most of a step: one encoder per head made IPPO on the default config 1.45x
    slower (11 k against 16 k env-steps/s on two CPU cores)."""

    num_actions: int
    hidden_layers: Sequence[int]
    activation: str = "tanh"
    spec: InputSpec | None = None
    encoder_width: int = 16
    prior_input: bool = False  # the actor also reads the residual prior's action, one-hot

    @nn.compact
    def __call__(
        self,
        x: jax.Array | SetInput,
        critic_x: jax.Array | None = None,
        actor_only: bool = False,
        prior: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array | None]:
        act = activation_fn(self.activation)

        def mlp(h, name):
            # PureJaxRL's gains: sqrt(2) hidden, 0.01 policy head, 1 value head.
            for i, width in enumerate(self.hidden_layers):
                h = act(nn.Dense(width, kernel_init=scaled_init(np.sqrt(2)), name=f"{name}_{i}")(h))
            return h

        if self.spec is not None and self.spec.network != "mlp":
            x = Encoder(self.spec, self.encoder_width, self.activation, name="encoder")(x)
        assert not isinstance(x, SetInput), "only the set encoder reads a SetInput"
        actor_x = x
        if self.prior_input:  # a value-only call (no prior given) feeds zeros
            shown = jnp.zeros(x.shape[:-1] + (self.num_actions,), x.dtype)
            if prior is not None:
                shown = jax.nn.one_hot(prior, self.num_actions, dtype=x.dtype)
            actor_x = jnp.concatenate([x, shown], axis=-1)
        logits = nn.Dense(self.num_actions, kernel_init=scaled_init(0.01), name="actor_out")(
            mlp(actor_x, "actor")
        )
        if actor_only:
            return logits, None
        critic = mlp(x if critic_x is None else critic_x, "critic")
        value = nn.Dense(1, kernel_init=scaled_init(1.0), name="critic_out")(critic)
        return logits, value[..., 0]


def network(tc: TrainConfig) -> ActorCritic:
    """The actor-critic of ``tc`` (its encoder chosen by ``hp.network``)."""
    hp = tc.hp
    return ActorCritic(
        tc.env.num_actions,
        hp.hidden_layers,
        hp.activation,
        input_spec(tc.env, hp.network, networks.obs_scale(tc)),
        hp.encoder_width,
        hp.prior is not None,
    )


# --------------------------------------------------------------------------- state
@struct.dataclass
class RunnerState(Replaceable):
    learners: dict  # role -> flax TrainState (learning roles only)
    env: EnvCarry
    key: jax.Array
    progress: Progress
    # role -> ReturnScale with ``normalize_rewards`` (:mod:`.return_scale`), else empty
    scales: dict = struct.field(default_factory=dict)


def optimizer(tc: TrainConfig) -> optax.GradientTransformation:
    """Adam after global-norm clipping, both settings injected (:mod:`.optim`): each step
    sets them from ``hp`` (the learning rate annealed linearly to 0 with ``anneal_lr``,
    :func:`learning_rate`)."""
    hp = tc.hp
    return optim.injected(
        functools.partial(optim.adam_clipped, eps=1e-5),
        learning_rate=hp.learning_rate,
        max_norm=hp.max_grad_norm,
    )


def optimiser_steps(tc: TrainConfig) -> int:
    """Optimiser steps of the whole run, per role."""
    hp = tc.hp
    return tc.num_updates * hp.update_epochs * hp.num_minibatches


def anneal_steps(tc: TrainConfig) -> int:
    """Optimiser steps over which the learning rate anneals to 0 (0: it does not)."""
    return optimiser_steps(tc) if tc.hp.anneal_lr else 0


def teacher_weight(hp: IPPOHyperparams, step: jax.Array, total: int) -> jax.Array:
    """The kickstarting weight at optimiser step ``step`` of ``total``: ``teacher_coef``,
    annealed linearly to 0 over ``teacher_fraction * total`` steps (0 without a teacher)."""
    if hp.teacher is None:
        return jnp.float32(0.0)
    span = jnp.maximum(jnp.asarray(hp.teacher_fraction, jnp.float32) * total, 1.0)
    return hp.teacher_coef * jnp.clip(1.0 - step.astype(jnp.float32) / span, 0.0, 1.0)


def guide_actions(
    tc: TrainConfig,
    guide: str | None,
    key: jax.Array,
    obs: jax.Array,
    state: State,
    params: EnvParams,
) -> dict:
    """role -> int32[E, n_role]: the action the baseline guide (a ``TEACHERS`` name) takes for
    each learning agent in each of the states [E] (empty for ``guide=None``)."""
    if guide is None:
        return {}
    out = {}
    for i, role in enumerate(tc.learning_roles):
        policy = roles.baseline_policies(role)[TEACHERS[guide][role]](tc.env, params)
        keys = jax.random.split(jax.random.fold_in(key, i), obs.shape[0])
        out[role] = jax.vmap(policy)(keys, obs, state)[:, tc.agents_of(role)]
    return out


def actor_logits(hp: IPPOHyperparams, logits: jax.Array, prior: jax.Array | None) -> jax.Array:
    """The policy's logits: the network's, plus ``prior_logit`` on the prior's action."""
    if prior is None:
        return logits
    bonus = jax.nn.one_hot(prior, logits.shape[-1], dtype=logits.dtype)
    return logits + jnp.asarray(hp.prior_logit, logits.dtype) * bonus


def learning_rate(hp: IPPOHyperparams, step: jax.Array, anneal: int = 0) -> jax.Array:
    """The step size at optimiser step ``step``: ``hp.learning_rate``, annealed linearly to 0
    over ``anneal`` steps when ``anneal > 0``."""
    if not anneal:
        return jnp.asarray(hp.learning_rate, jnp.float32)
    return jnp.asarray(optax.linear_schedule(hp.learning_rate, 0.0, anneal)(step))


def _critic_x(
    critic_input: CriticInput | None, tc: TrainConfig, role: str, state: State | None
) -> jax.Array | None:
    if critic_input is None:
        return None
    assert state is not None, "a critic input reads the grids' states"
    return critic_input(tc, role, state)


def init(
    key: jax.Array, tc: TrainConfig, params: EnvParams, critic_input: CriticInput | None = None
) -> RunnerState:
    """Networks, optimisers and the first observations."""
    k_env, k_net, key = jax.random.split(key, 3)
    env = env_reset(tc, k_env, params)
    net = network(tc)
    first = jax.tree.map(lambda a: a[:1], env.state)
    learners = {}
    for i, role in enumerate(tc.learning_roles):
        x = networks.role_input(tc, role, env.obs[0])
        c = _critic_x(critic_input, tc, role, first)
        prior = jnp.zeros(x.shape[:-1], jnp.int32) if tc.hp.prior is not None else None
        weights = net.init(
            jax.random.fold_in(k_net, i), x, None if c is None else c[0], prior=prior
        )
        if tc.start is not None:  # experiment.start_from: fine-tune that run's policy
            weights = jax.tree.map(jnp.asarray, tc.start.weights[role])
        learners[role] = TrainState.create(apply_fn=net.apply, params=weights, tx=optimizer(tc))
    scales = {}
    if tc.hp.normalize_rewards:
        scales = {
            role: return_scale_init((tc.num_envs, len(tc.agents_of(role))))
            for role in tc.learning_roles
        }
    return RunnerState(learners, env, key, loop.progress_init(), scales)


# --------------------------------------------------------------------------- rollout
@struct.dataclass
class Trajectory(Replaceable):
    """One role's rollout, time-major: [T, E, n_role, ...]."""

    x: jax.Array | SetInput  # actor (and decentralised critic) input, prepared (encoders.prepare)
    critic_x: jax.Array | None  # centralised critic input (None: the critic reads x)
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    next_value: jax.Array  # V after the step (final_obs / final_state): the bootstrap
    reward: jax.Array
    agent_terminal: jax.Array
    episode_end: jax.Array  # [T, E, n_role] (broadcast from the grid's flag)
    valid: jax.Array
    teacher_action: jax.Array | None = None  # kickstarting: the teacher's action
    prior_action: jax.Array | None = None  # residual prior: the baseline's action


def policy_actions(
    tc: TrainConfig,
    learners: dict,
    key: jax.Array,
    obs: jax.Array,
    state: State | None = None,
    critic_input: CriticInput | None = None,
    greedy: bool = False,
    priors: dict | None = None,
) -> tuple[jax.Array, dict]:
    """Actions int32[E, A] for the learning roles (0 elsewhere) and, per role, the
    (prepared input as stored, critic input, action, log_prob, value) used by the rollout.
    ``priors``: role -> the residual prior's actions (:func:`actor_logits`)."""
    parts = {}
    spec = network(tc).spec
    assert spec is not None  # network() always reads through an InputSpec
    for i, role in enumerate(tc.learning_roles):
        x = prepare(spec, networks.role_input(tc, role, obs))
        c = _critic_x(critic_input, tc, role, state)
        prior = (priors or {}).get(role)
        logits, value = learners[role].apply_fn(learners[role].params, x, c, prior=prior)
        logits = actor_logits(tc.hp, logits, prior)
        if greedy:
            action = jnp.argmax(logits, axis=-1)
        else:
            action = jax.random.categorical(jax.random.fold_in(key, i), logits)
        log_prob, _ = pg.log_prob_entropy(logits, action)
        parts[role] = (compact(spec, x), c, action, log_prob, value)
    return pg.role_actions(tc, {role: p[2] for role, p in parts.items()}, obs), parts


def rollout(
    runner: RunnerState, tc: TrainConfig, params: EnvParams, critic_input: CriticInput | None = None
) -> tuple[RunnerState, dict, dict]:
    """``num_steps`` turns of every grid: new runner, per-role Trajectory, stacked finished.

    ``next_value`` (the bootstrap, ``V`` of the state after step t) needs no value pass of
    its own where the episode goes on: that state is the one step t+1 acts on, so it is
    ``value[t+1]``, and after the last step a pass on the runner's final observations gives
    ``value[T]`` (PureJaxRL's bootstrap). Where the agent is terminal (its grid terminated,
    or the prey was caught) the bootstrap is multiplied by 0 and any finite value does; it
    is ``value[t+1]`` too. Only an agent whose grid was truncated (reset while the agent
    was not terminal) needs ``V(final_obs)`` (``V(final_state)`` for a centralised critic).
    Each step keeps the final observations and states of at most ``truncated_grids(E)``
    such grids (gathered), and after the scan one pass per role reads them all together
    with the last observations; a step with more truncated grids than that (a wave of
    truncations, as without staggered starts) runs a pass on every grid itself
    (``lax.cond``; under ``vmap`` over seeds it becomes a select that runs that pass on
    every step: the results are the same, the saving is lost).
    """
    some = truncated_grids(tc.num_envs)

    def bootstrap(role: str, obs: jax.Array, state: State) -> jax.Array:
        """V float32[N, n_role] of ``role``'s agents in the states [N] (logits unused)."""
        learner = runner.learners[role]
        return learner.apply_fn(
            learner.params,
            networks.role_input(tc, role, obs),
            _critic_x(critic_input, tc, role, state),
        )[1]

    def one_step(carry, _):
        env, key, scales = carry
        key, k_act, k_fixed, k_env = jax.random.split(key, 4)
        # Streams of their own that leave the others as they are without a prior or teacher.
        priors = guide_actions(
            tc, tc.hp.prior, jax.random.fold_in(k_fixed, 2), env.obs, env.state, params
        )
        actions, parts = policy_actions(
            tc, runner.learners, k_act, env.obs, env.state, critic_input, priors=priors
        )
        taught = (  # the same baseline as the prior: its actions, not a second search
            priors
            if tc.hp.teacher == tc.hp.prior
            else guide_actions(
                tc, tc.hp.teacher, jax.random.fold_in(k_fixed, 1), env.obs, env.state, params
            )
        )
        actions = roles.fixed_role_actions(tc, k_fixed, env.obs, env.state, params, actions)
        env, step = env_step(tc, k_env, env, actions, params, tc.hp.gamma)
        # the grids reset while an agent was not terminal: V(final_obs) is their bootstrap
        cut = (step.episode_end[:, None] & ~step.agent_terminal).any(-1)
        wave = cut.sum() > some  # too many to gather: a pass on every grid, now
        grids = jnp.nonzero(cut, size=some, fill_value=0)[0]  # extras: grid 0 again
        kept = jax.tree.map(lambda a: a[grids], (step.final_obs, step.final_state))
        out, scales = {}, dict(scales)
        for role, (x, c, action, log_prob, value) in parts.items():
            rows = tc.agents_of(role)
            reward = step.reward[:, rows] * tc.hp.reward_scale
            if role in scales:  # the running return-scale normaliser
                ended = step.agent_terminal[:, rows] | step.episode_end[:, None]
                scales[role], reward = normalise(
                    scales[role], reward, step.valid[:, rows], ended, tc.hp.gamma
                )
            every_grid = jax.lax.cond(
                wave,
                lambda role=role: bootstrap(role, step.final_obs, step.final_state),
                lambda value=value: jnp.zeros_like(value),
            )
            out[role] = Trajectory(
                x=x,
                critic_x=c,
                action=action,
                log_prob=log_prob,
                value=value,
                next_value=every_grid,  # the bootstrap of a wave; the rest set after the scan
                reward=reward,
                agent_terminal=step.agent_terminal[:, rows],
                episode_end=jnp.broadcast_to(step.episode_end[:, None], (tc.num_envs, len(rows))),
                valid=step.valid[:, rows],
                teacher_action=taught.get(role),
                prior_action=priors.get(role),
            )
        return (env, key, scales), (out, step.finished, (grids, kept, wave))

    (env, key, scales), (trajectories, finished, (grids, kept, wave)) = jax.lax.scan(
        one_step, (runner.env, runner.key, runner.scales), None, length=tc.hp.num_steps
    )
    # one pass per role: the last observations (value[T]), then every step's gathered grids
    flat = jax.tree.map(lambda a: a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:]), kept)
    inputs = jax.tree.map(
        lambda last, gathered: jnp.concatenate([last, gathered]), (env.obs, env.state), flat
    )
    steps = jnp.broadcast_to(jnp.arange(tc.hp.num_steps)[:, None], grids.shape)

    def with_bootstrap(role: str, traj: Trajectory) -> Trajectory:
        values = bootstrap(role, *inputs)
        last, at_cut = values[: tc.num_envs], values[tc.num_envs :]
        following = jnp.concatenate([traj.value[1:], last[None]], axis=0)  # value[t + 1]
        at_cut = at_cut.reshape(grids.shape + at_cut.shape[1:])  # [T, some, n_role]
        # a grid gathered twice (the extras: grid 0) gets the same value each time
        gathered = jnp.zeros_like(traj.value).at[steps, grids].set(at_cut)
        final = jnp.where(wave[:, None, None], traj.next_value, gathered)
        truncated = traj.episode_end & ~traj.agent_terminal
        return traj.replace(next_value=jnp.where(truncated, final, following))

    trajectories = {role: with_bootstrap(role, traj) for role, traj in trajectories.items()}
    return runner.replace(env=env, key=key, scales=scales), trajectories, finished


def truncated_grids(num_envs: int) -> int:
    """How many truncated grids a rollout step's bootstrap pass gathers (more than that:
    a pass on every grid): 1/16 of the grids, at least 8 (all of them below 8)."""
    return min(num_envs, max(8, num_envs // 16))


def gae(traj: Trajectory, gamma: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimates and value targets, [T, E, n].

    delta_t = r_t + gamma * V(final_obs_t) * (1 - agent_terminal_t) - V(s_t); the recursion
    is cut at the end of the grid's episode and at the agent's own termination.
    """
    not_terminal = 1.0 - traj.agent_terminal.astype(jnp.float32)
    delta = traj.reward + gamma * traj.next_value * not_terminal - traj.value
    carry_on = not_terminal * (1.0 - traj.episode_end.astype(jnp.float32))

    def back(next_adv, inputs):
        d, c = inputs
        adv = d + gamma * lam * c * next_adv
        return adv, adv

    _, advantages = jax.lax.scan(back, jnp.zeros_like(delta[0]), (delta, carry_on), reverse=True)
    return advantages, advantages + traj.value


# --------------------------------------------------------------------------- learning
def ppo_loss(
    net_params,
    apply_fn,
    hp: IPPOHyperparams,
    batch: Trajectory,
    advantages: jax.Array,
    targets: jax.Array,
    teacher: jax.Array | float = 0.0,
) -> tuple[jax.Array, dict]:
    """Clipped PPO loss over the valid entries of a minibatch [B, n], plus ``teacher`` times
    the cross-entropy to the teacher's actions when the batch has them."""
    logits, value = apply_fn(net_params, batch.x, batch.critic_x, prior=batch.prior_action)
    logits = actor_logits(hp, logits, batch.prior_action)
    log_prob, entropy = pg.log_prob_entropy(logits, batch.action)
    mask = batch.valid
    adv_mean = masked_mean(advantages, mask)
    adv_std = jnp.sqrt(masked_mean((advantages - adv_mean) ** 2, mask))
    adv = (advantages - adv_mean) / (adv_std + 1e-8)
    ratio = jnp.exp(log_prob - batch.log_prob)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - hp.clip_eps, 1 + hp.clip_eps) * adv)
    actor_loss = -masked_mean(surrogate, mask)
    value_clipped = batch.value + jnp.clip(value - batch.value, -hp.clip_eps, hp.clip_eps)
    value_loss = 0.5 * masked_mean(
        jnp.maximum((value - targets) ** 2, (value_clipped - targets) ** 2), mask
    )
    entropy = masked_mean(entropy, mask)
    total = actor_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    aux = {"actor_loss": actor_loss, "value_loss": value_loss, "entropy": entropy}
    if batch.teacher_action is not None:
        imitation = -masked_mean(pg.log_prob_entropy(logits, batch.teacher_action)[0], mask)
        total = total + teacher * imitation
        aux["teacher_loss"] = imitation
    return total, aux


def learn(
    learner: TrainState,
    traj: Trajectory,
    hp: IPPOHyperparams,
    key: jax.Array,
    anneal: int = 0,
    total: int = 0,
) -> tuple[TrainState, dict]:
    """``update_epochs`` x ``num_minibatches`` PPO steps on one role's trajectory (the step
    size annealed over ``anneal`` optimiser steps, :func:`learning_rate`; a teacher's weight
    over ``teacher_fraction`` of ``total``, :func:`teacher_weight`)."""
    advantages, targets = gae(traj, hp.gamma, hp.gae_lambda)
    batch_size = traj.reward.shape[0] * traj.reward.shape[1]
    flat = jax.tree.map(
        lambda a: a.reshape((batch_size,) + a.shape[2:]), (traj, advantages, targets)
    )
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

    def epoch(learner, k):
        order = jax.random.permutation(k, batch_size)
        shuffled = jax.tree.map(
            lambda a: a[order].reshape((hp.num_minibatches, -1) + a.shape[1:]), flat
        )

        def minibatch(learner, mb):
            batch, adv, tgt = mb
            weight = teacher_weight(hp, learner.step, total)
            (_, aux), grads = grad_fn(learner.params, learner.apply_fn, hp, batch, adv, tgt, weight)
            settings = {
                "learning_rate": learning_rate(hp, learner.step, anneal),
                "max_norm": hp.max_grad_norm,
            }
            return optim.refresh(learner, settings).apply_gradients(grads=grads), aux

        return jax.lax.scan(minibatch, learner, shuffled)

    learner, aux = jax.lax.scan(epoch, learner, jax.random.split(key, hp.update_epochs))
    return learner, jax.tree.map(jnp.mean, aux)


def update(
    runner: RunnerState, tc: TrainConfig, params: EnvParams, critic_input: CriticInput | None = None
) -> tuple[RunnerState, dict]:
    """One rollout and one PPO update of every learning role; returns a metrics row."""
    runner, trajectories, finished = rollout(runner, tc, params, critic_input)
    key, k_learn = jax.random.split(runner.key)
    learners, losses = {}, {}
    for i, role in enumerate(tc.learning_roles):
        learners[role], aux = learn(
            runner.learners[role],
            trajectories[role],
            tc.hp,
            jax.random.fold_in(k_learn, i),
            anneal_steps(tc),
            optimiser_steps(tc),
        )
        for name, value in aux.items():
            losses[f"{name}/{role}"] = value
    row = loop.episode_metrics(tc, finished)
    row["losses"] = losses
    runner = runner.replace(
        learners=learners, key=key, progress=loop.advance(runner.progress, tc, row)
    )
    return runner, row


# --------------------------------------------------------------------------- policy
def policy_state(runner: RunnerState) -> dict:
    """What the policy needs (and what checkpoints hold): role -> network params (the
    critic's included)."""
    return {role: learner.params for role, learner in runner.learners.items()}


READS_STATE = True  # greedy_actions / sample_actions take the states (a residual prior)
PRIOR_STREAM = 1_000_003  # the prior's random stream outside training: fold_in(key, PRIOR_STREAM)


def _logits(
    tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array, state: State | None
) -> dict:
    """role -> the policy's logits [E, n_role, nA] (the prior's bonus added when it has one)."""
    priors = {}
    if tc.hp.prior is not None:
        if state is None:
            raise ValueError(
                f"a policy with prior: {tc.hp.prior} reads the state; pass state= with obs"
            )
        priors = guide_actions(
            tc,
            tc.hp.prior,
            jax.random.fold_in(key, PRIOR_STREAM),
            obs,
            state,
            tc.env.default_params,
        )
    out = {}
    for role in tc.learning_roles:
        x = networks.role_input(tc, role, obs)
        prior = priors.get(role)
        logits = network(tc).apply(policy[role], x, actor_only=True, prior=prior)[0]
        out[role] = actor_logits(tc.hp, logits, prior)
    return out


def greedy_actions(
    tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array, state: State | None = None
) -> jax.Array:
    """Argmax actions int32[E, A] for the learning roles (0 for the others); ``state`` [E]
    is needed with a ``prior``."""
    logits = _logits(tc, policy, key, obs, state)
    return pg.role_actions(tc, {role: jnp.argmax(lg, -1) for role, lg in logits.items()}, obs)


def sample_actions(
    tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array, state: State | None = None
) -> jax.Array:
    """Actions int32[E, A] sampled from the learned policy (0 for the other roles); ``state``
    [E] is needed with a ``prior``."""
    return pg.role_actions(tc, pg.sample(key, _logits(tc, policy, key, obs, state)), obs)


Hyperparams = IPPOHyperparams
STOCHASTIC = True  # sample_actions draws from the learned policy

train = loop.trainer(init, update, "IPPO")
