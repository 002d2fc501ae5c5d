"""What PPAGE's actor-critic baselines (``actor_critic``, ``a2c``, ``a3c``) share: their
networks, the PopArt-style return normaliser, the optimisers, acting, n-step rollouts and
returns, and the synchronous n-step update.

- Networks follow PPAGE's PyTorch ones (ReLU MLPs, PyTorch's default ``nn.Linear``
  initialisation): :class:`SharedTrunkNetwork` (actor_critic and a3c: one trunk, a
  ``policy_head`` and a ``value_head``) and :class:`SeparateNetworks` (a2c: an ``actor`` and a
  ``critic`` MLP). As in every learner here, one network per role is shared by the role's
  agents, the agent's one-hot id appended to its observation.
- :class:`ReturnNormaliser` is PPAGE's ``RunningReturnNormalizer``: a bias-corrected EMA of
  the raw critic targets' mean and second moment (``std = sqrt(var) + 1e-4``); every update
  of it rescales the value head so that its de-normalised output is unchanged (PopArt's
  "preserving outputs precisely"). A batch of targets is folded in one after another
  (time-major, then grid, then agent), as PPAGE folds in one target per step.
- Captured prey: transitions that are not valid (``rollout.Step.valid``) weigh nothing in any
  loss and are never folded into the normaliser.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from flax.training.train_state import TrainState

from ppage_jax.state import EnvParams
from ppage_jax.train.config import TrainConfig
from ppage_jax.train.kit import loop, networks, optim, roles, rollout
from ppage_jax.train.kit.loop import Progress
from ppage_jax.train.kit.rollout import EnvCarry
from ppage_jax.types import Replaceable

NORM_EPS = 1e-4  # PPAGE's normaliser: std floor, and the std before any target is seen


# --------------------------------------------------------------------------- networks
def _torch_kernel() -> Callable:
    """PyTorch's default ``nn.Linear`` weight init, U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def _torch_bias(fan_in: int) -> Callable:
    bound = 1.0 / np.sqrt(fan_in)
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(
        key, shape, dtype, -bound, bound
    )


def _dense(x: jax.Array, width: int, name: str) -> jax.Array:
    return nn.Dense(
        width, kernel_init=_torch_kernel(), bias_init=_torch_bias(x.shape[-1]), name=name
    )(x)


def _mlp(x: jax.Array, hidden: Sequence[int], prefix: str) -> jax.Array:
    for i, width in enumerate(hidden):
        x = nn.relu(_dense(x, width, f"{prefix}_{i}"))
    return x


class SharedTrunkNetwork(nn.Module):
    """PPAGE's ActorCriticNetwork: x float[..., F] -> (logits [..., nA], value [...])."""

    num_actions: int
    hidden_layers: Sequence[int]

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        h = _mlp(x, self.hidden_layers, "trunk")
        return (_dense(h, self.num_actions, "policy_head"), _dense(h, 1, "value_head")[..., 0])


class SeparateNetworks(nn.Module):
    """PPAGE's A2C ActorNetwork and CriticNetwork side by side (params ``actor`` and
    ``critic``): x float[..., F] -> (logits [..., nA], value [...])."""

    num_actions: int
    hidden_layers: Sequence[int]

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        logits = _dense(_mlp(x, self.hidden_layers, "actor"), self.num_actions, "actor_out")
        value = _dense(_mlp(x, self.hidden_layers, "critic"), 1, "critic_out")
        return logits, value[..., 0]


def layer_labels(params: Any, label: Callable[[str], Any]) -> Any:
    """A tree like ``params`` whose leaves are ``label(name of their top-level layer)``."""
    return {
        "params": {
            name: jax.tree.map(lambda _, n=name: label(n), sub)
            for name, sub in params["params"].items()
        }
    }


def adam_l2(
    learning_rate: float, weight_decay: float, grad_clip: float, decayed: Callable[[str], bool]
) -> optax.GradientTransformation:
    """PyTorch's ``clip_grad_norm_`` then ``Adam(weight_decay=...)`` on the layers ``decayed``
    names (L2 added to the clipped gradient, as torch's Adam does), plain Adam elsewhere. The
    three settings are injected (:func:`optimizer_settings` names them)."""

    def mask(params):
        return layer_labels(params, lambda n: bool(decayed(n)))

    def factory(learning_rate, weight_decay, grad_clip):
        return optax.chain(
            optax.clip_by_global_norm(grad_clip),
            optax.masked(optax.add_decayed_weights(weight_decay), mask),
            optax.adam(learning_rate),
        )

    return optim.injected(
        factory, learning_rate=learning_rate, weight_decay=weight_decay, grad_clip=grad_clip
    )


def optimizer_settings(hp: Any) -> dict:
    """The injected settings of :func:`adam_l2` from a shared-trunk learner's ``hp``."""
    return {
        "learning_rate": hp.learning_rate,
        "weight_decay": hp.actor_weight_decay,
        "grad_clip": hp.grad_clip,
    }


def shared_trunk_optimizer(hp: Any) -> optax.GradientTransformation:
    """``actor_critic``'s and ``a3c``'s optimiser: :func:`adam_l2` with the weight decay on
    the policy head."""
    return adam_l2(**optimizer_settings(hp), decayed=is_policy_layer)


def is_policy_layer(name: str) -> bool:
    """The layers PPAGE's actor weight decay applies to: the policy head, or the actor."""
    return name == "policy_head" or name.startswith("actor")


# --------------------------------------------------------------------------- normaliser
@struct.dataclass
class ReturnNormaliser(Replaceable):
    """Raw EMA accumulators of PPAGE's RunningReturnNormalizer (float32 scalars)."""

    mean: jax.Array
    sq: jax.Array
    count: jax.Array  # targets folded in


def normaliser_init() -> ReturnNormaliser:
    zero = jnp.zeros((), jnp.float32)
    return ReturnNormaliser(zero, zero, zero)


def norm_stats(norm: ReturnNormaliser, decay: float) -> tuple[jax.Array, jax.Array]:
    """Bias-corrected (mean, std); (0, 1e-4) before any target, as PPAGE."""
    seen = norm.count > 0
    correction = jnp.where(seen, 1.0 - jnp.power(jnp.float32(decay), norm.count), 1.0)
    mean = norm.mean / correction
    var = jnp.maximum(norm.sq / correction - mean**2, 0.0)
    return jnp.where(seen, mean, 0.0), jnp.where(seen, jnp.sqrt(var), 0.0) + NORM_EPS


def norm_observe(
    norm: ReturnNormaliser, values: jax.Array, mask: jax.Array, decay: float
) -> ReturnNormaliser:
    """Fold the ``values`` where ``mask`` is set into the EMA, one after another in flattened
    order (closed form: each weighs ``(1 - decay) * decay ** (valid values after it)``)."""
    v = values.reshape(-1).astype(jnp.float32)
    w = mask.reshape(-1).astype(jnp.float32)
    after = jnp.cumsum(w[::-1])[::-1] - w
    d = jnp.float32(decay)
    weight = w * (1.0 - d) * jnp.power(d, after)
    keep = jnp.power(d, w.sum())
    return ReturnNormaliser(
        mean=keep * norm.mean + (weight * v).sum(),
        sq=keep * norm.sq + (weight * v * v).sum(),
        count=norm.count + w.sum(),
    )


def rescale_value_head(
    params: Any, old: tuple[jax.Array, jax.Array], new: tuple[jax.Array, jax.Array]
) -> Any:
    """PopArt's output-preserving rescale of ``value_head`` from (old mean, old std) to the
    new ones: ``V_new * new_std + new_mean == V_old * old_std + old_mean`` for every input."""
    (old_mean, old_std), (new_mean, new_std) = old, new
    head = params["params"]["value_head"]
    head = {
        "kernel": head["kernel"] * (old_std / new_std),
        "bias": (head["bias"] * old_std + old_mean - new_mean) / new_std,
    }
    return {"params": {**params["params"], "value_head": head}}


# --------------------------------------------------------------------------- acting
def policy_outputs(
    tc: TrainConfig, apply_fn: Callable, params: dict, obs: jax.Array
) -> dict[str, tuple[jax.Array, jax.Array, jax.Array]]:
    """role -> (input x [E, n, F'], logits [E, n, nA], value [E, n]) for the learning roles;
    ``params`` maps role -> network params."""
    out = {}
    for role in tc.learning_roles:
        x = networks.role_input(tc, role, obs)
        logits, value = apply_fn(params[role], x)
        out[role] = (x, logits, value)
    return out


def role_actions(tc: TrainConfig, per_role: dict[str, jax.Array], obs: jax.Array) -> jax.Array:
    """int32[E, A] with each learning role's int[E, n] actions in its rows (0 elsewhere)."""
    actions = jnp.zeros(obs.shape[:2], jnp.int32)
    for role, action in per_role.items():
        actions = actions.at[:, tc.agents_of(role)].set(action.astype(jnp.int32))
    return actions


def sample(key: jax.Array, logits_by_role: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """role -> actions sampled from ``Categorical(logits)`` (PPAGE's select_actions)."""
    return {
        role: jax.random.categorical(jax.random.fold_in(key, i), logits)
        for i, (role, logits) in enumerate(logits_by_role.items())
    }


def greedy_policy_actions(
    tc: TrainConfig, net: nn.Module, policy: dict, obs: jax.Array
) -> jax.Array:
    """Argmax-logit actions int32[E, A] for the learning roles (0 for the others)."""
    outs = policy_outputs(tc, net.apply, policy, obs)
    return role_actions(tc, {r: jnp.argmax(o[1], -1) for r, o in outs.items()}, obs)


def sampled_policy_actions(
    tc: TrainConfig, net: nn.Module, policy: dict, key: jax.Array, obs: jax.Array
) -> jax.Array:
    """Actions int32[E, A] sampled from the learned policy (0 for the other roles)."""
    outs = policy_outputs(tc, net.apply, policy, obs)
    return role_actions(tc, sample(key, {r: o[1] for r, o in outs.items()}), obs)


def log_prob_entropy(logits: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """log pi(action) and the entropy of ``Categorical(logits)``."""
    log_probs = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_probs, action[..., None].astype(jnp.int32), -1)[..., 0]
    return log_prob, -(jnp.exp(log_probs) * log_probs).sum(-1)


# --------------------------------------------------------------------------- learners
@struct.dataclass
class Learner(Replaceable):
    """One role's network, optimiser state and return normaliser."""

    train: TrainState
    norm: ReturnNormaliser


@struct.dataclass
class RunnerState(Replaceable):
    learners: dict  # role -> Learner (learning roles only)
    env: EnvCarry
    key: jax.Array
    progress: Progress


def init_learners(
    tc: TrainConfig,
    key: jax.Array,
    obs: jax.Array,
    net: nn.Module,
    tx: optax.GradientTransformation,
) -> dict[str, Learner]:
    """A Learner per learning role; ``obs`` float32[A, F] of one grid sizes the input."""
    learners = {}
    for i, role in enumerate(tc.learning_roles):
        x = networks.role_input(tc, role, obs)
        learners[role] = Learner(
            TrainState.create(
                apply_fn=net.apply, params=net.init(jax.random.fold_in(key, i), x), tx=tx
            ),
            normaliser_init(),
        )
    return learners


def init_runner(
    tc: TrainConfig,
    key: jax.Array,
    params: EnvParams,
    net: nn.Module,
    tx: optax.GradientTransformation,
) -> RunnerState:
    """Networks, optimisers, normalisers and the first observations."""
    k_env, k_net, key = jax.random.split(key, 3)
    env = rollout.env_reset(tc, k_env, params)
    return RunnerState(
        init_learners(tc, k_net, env.obs[0], net, tx), env, key, loop.progress_init()
    )


# --------------------------------------------------------------------------- n-step
@dataclasses.dataclass(frozen=True)
class NStepSettings:
    """What the n-step update needs to know (from an algorithm's hyperparameters)."""

    n_steps: int
    gamma: float
    entropy_coef: float
    value_coef: float
    reward_scale: float
    normalize_returns: bool = False
    return_norm_decay: float = 0.999
    optimizer: dict | None = None  # injected optimiser settings set before each step


def nstep_settings(hp: Any, value_coef: float, optimizer: dict) -> NStepSettings:
    """The :class:`NStepSettings` of an n-step learner's ``hp`` (``a2c``, ``a3c``)."""
    return NStepSettings(
        n_steps=hp.n_steps,
        gamma=hp.gamma,
        entropy_coef=hp.entropy_coef,
        value_coef=value_coef,
        reward_scale=hp.reward_scale,
        normalize_returns=getattr(hp, "normalize_returns", False),
        return_norm_decay=getattr(hp, "return_norm_decay", 0.999),
        optimizer=optimizer,
    )


@struct.dataclass
class Trajectory(Replaceable):
    """One role's n-step rollout, time-major [T, E, n, ...]."""

    x: jax.Array
    action: jax.Array
    reward: jax.Array  # scaled by reward_scale
    next_value: jax.Array  # V(final_obs) on the normalised scale
    agent_terminal: jax.Array
    episode_end: jax.Array
    valid: jax.Array


def nstep_rollout(
    tc: TrainConfig,
    params_by_role: dict,
    apply_fn: Callable,
    env: EnvCarry,
    key: jax.Array,
    params: EnvParams,
    settings: NStepSettings,
) -> tuple[EnvCarry, dict[str, Trajectory], dict]:
    """``n_steps`` turns of ``tc.num_envs`` grids sampling actions from ``params_by_role``:
    the new carry, per-role Trajectory and the stacked per-step ``finished`` dicts."""

    def one_step(carry, _):
        env, key = carry
        key, k_act, k_fixed, k_env = jax.random.split(key, 4)
        outs = policy_outputs(tc, apply_fn, params_by_role, env.obs)
        chosen = sample(k_act, {r: o[1] for r, o in outs.items()})
        actions = roles.fixed_role_actions(
            tc, k_fixed, env.obs, env.state, params, role_actions(tc, chosen, env.obs)
        )
        env, step = rollout.env_step(tc, k_env, env, actions, params, settings.gamma)
        out = {}
        for role, (x, _, _) in outs.items():
            rows = tc.agents_of(role)
            _, next_value = apply_fn(
                params_by_role[role], networks.role_input(tc, role, step.final_obs)
            )
            out[role] = Trajectory(
                x=x,
                action=chosen[role],
                reward=step.reward[:, rows] * settings.reward_scale,
                next_value=next_value,
                agent_terminal=step.agent_terminal[:, rows],
                episode_end=jnp.broadcast_to(step.episode_end[:, None], next_value.shape),
                valid=step.valid[:, rows],
            )
        return (env, key), (out, step.finished)

    (env, _), (trajectories, finished) = jax.lax.scan(
        one_step, (env, key), None, length=settings.n_steps
    )
    return env, trajectories, finished


def nstep_returns(traj: Trajectory, next_value_raw: jax.Array, gamma: float) -> jax.Array:
    """Raw n-step returns [T, E, n]: ``R_t = r_t + gamma * (1 - terminal_t) * B_t`` with
    ``B_t = V(final_obs_t)`` where the grid's episode ended or the rollout stops, else
    ``R_{t+1}``. Only termination (the episode's or the prey's own capture) cuts it."""
    not_terminal = 1.0 - traj.agent_terminal.astype(jnp.float32)
    ends = traj.episode_end.at[-1].set(True)

    def back(next_return, inputs):
        r, nt, end, v = inputs
        ret = r + gamma * nt * jnp.where(end, v, next_return)
        return ret, ret

    _, returns = jax.lax.scan(
        back,
        jnp.zeros_like(traj.reward[0]),
        (traj.reward, not_terminal, ends, next_value_raw),
        reverse=True,
    )
    return returns


def nstep_loss(
    net_params: dict,
    apply_fn: Callable,
    traj: Trajectory,
    target: jax.Array,
    settings: NStepSettings,
) -> tuple[jax.Array, dict]:
    """PPAGE's A2C/A3C loss over the valid entries: ``-mean(log pi * A) - entropy_coef *
    mean(H) + value_coef * Huber(V, target)`` with ``A = target - V`` (no gradient)."""
    logits, value = apply_fn(net_params, traj.x)
    log_prob, entropy = log_prob_entropy(logits, traj.action)
    advantage = jax.lax.stop_gradient(target - value)
    mask = traj.valid
    entropy = rollout.masked_mean(entropy, mask)
    actor = -rollout.masked_mean(log_prob * advantage, mask) - settings.entropy_coef * entropy
    critic = rollout.masked_mean(optax.huber_loss(value, target, delta=1.0), mask)
    total = actor + settings.value_coef * critic
    return total, {"actor_loss": actor, "value_loss": critic, "entropy": entropy}


def nstep_gradients(
    net_params: dict,
    apply_fn: Callable,
    snapshot: ReturnNormaliser,
    traj: Trajectory,
    settings: NStepSettings,
) -> tuple[Any, jax.Array, dict]:
    """Gradients of :func:`nstep_loss` at ``net_params``, whose outputs are on the scale of
    the normaliser ``snapshot`` (PPAGE's A3C takes one snapshot per rollout); also the raw
    returns (to fold into the normaliser) and the loss parts."""
    if settings.normalize_returns:
        mean, std = norm_stats(snapshot, settings.return_norm_decay)
    else:
        mean, std = jnp.float32(0.0), jnp.float32(1.0)
    raw = nstep_returns(traj, traj.next_value * std + mean, settings.gamma)
    target = (raw - mean) / std
    grads, aux = jax.grad(nstep_loss, has_aux=True)(net_params, apply_fn, traj, target, settings)
    return grads, raw, aux


def apply_update(
    learner: Learner, grads: Any, raw_returns: jax.Array, valid: jax.Array, settings: NStepSettings
) -> Learner:
    """Step the optimiser with ``grads``; then fold the valid raw returns into the
    normaliser and rescale the value head to keep its outputs (when normalising)."""
    train = optim.refresh(learner.train, settings.optimizer).apply_gradients(grads=grads)
    norm = learner.norm
    if settings.normalize_returns:
        decay = settings.return_norm_decay
        new = norm_observe(norm, raw_returns, valid, decay)
        train = train.replace(
            params=rescale_value_head(train.params, norm_stats(norm, decay), norm_stats(new, decay))
        )
        norm = new
    return Learner(train, norm)


def _no_network(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("no learning role: nothing applies a network")


def nstep_round(
    tc: TrainConfig,
    learners: dict,
    env: EnvCarry,
    key: jax.Array,
    params: EnvParams,
    settings: NStepSettings,
) -> tuple[dict, EnvCarry, dict, dict]:
    """One synchronous n-step round: a rollout of every grid with the current parameters,
    then one update per learning role. Returns learners, carry, finished and losses."""
    current = {role: learner.train.params for role, learner in learners.items()}
    apply_fn = next(iter(learners.values())).train.apply_fn if learners else _no_network
    env, trajectories, finished = nstep_rollout(tc, current, apply_fn, env, key, params, settings)
    new, losses = {}, {}
    for role, traj in trajectories.items():
        learner = learners[role]
        grads, raw, aux = nstep_gradients(
            learner.train.params, apply_fn, learner.norm, traj, settings
        )
        new[role] = apply_update(learner, grads, raw, traj.valid, settings)
        losses.update({f"{name}/{role}": value for name, value in aux.items()})
    return new, env, finished, losses


def sync_update(
    runner: Any, tc: TrainConfig, params: EnvParams, settings: NStepSettings
) -> tuple[Any, dict]:
    """``num_steps / n_steps`` synchronous rounds (A2C): a metrics row. ``runner`` is any
    state with ``learners``, ``env``, ``key`` and ``progress`` (other fields pass through)."""

    def one_round(carry, _):
        learners, env, key = carry
        key, k_round = jax.random.split(key)
        learners, env, finished, losses = nstep_round(tc, learners, env, k_round, params, settings)
        return (learners, env, key), (finished, losses)

    (learners, env, key), (finished, losses) = jax.lax.scan(
        one_round,
        (runner.learners, runner.env, runner.key),
        None,
        length=tc.hp.num_steps // settings.n_steps,
    )
    finished = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), finished)  # [R*T, E]
    return finish_update(runner.replace(learners=learners, env=env, key=key), tc, finished, losses)


def finish_update(runner: Any, tc: TrainConfig, finished: dict, losses: dict) -> tuple[Any, dict]:
    """The metrics row of an update from its ``finished`` dicts stacked [T, E, ...] and its
    stacked ``losses``, and the runner with its progress advanced."""
    row = loop.episode_metrics(tc, finished)
    row["losses"] = jax.tree.map(jnp.mean, losses)
    return runner.replace(progress=loop.advance(runner.progress, tc, row)), row


def policy_params(runner: Any) -> dict:
    """role -> network params (what the greedy policy needs, and what checkpoints hold)."""
    return {role: learner.train.params for role, learner in runner.learners.items()}


def policy_functions(
    network: Callable[[TrainConfig], nn.Module],
) -> tuple[Callable, Callable, Callable]:
    """``(policy_state, greedy_actions, sample_actions)`` of a learner whose runner holds
    ``learners`` (:class:`Learner`) and whose network is ``network(tc)``."""

    def policy_state(runner: Any) -> dict:
        """role -> network params."""
        return policy_params(runner)

    def greedy_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
        """Argmax-logit actions int32[E, A] for the learning roles (0 for the others)."""
        return greedy_policy_actions(tc, network(tc), policy, obs)

    def sample_actions(tc: TrainConfig, policy: dict, key: jax.Array, obs: jax.Array) -> jax.Array:
        """Actions int32[E, A] sampled from the learned policy (0 for the other roles)."""
        return sampled_policy_actions(tc, network(tc), policy, key, obs)

    return policy_state, greedy_actions, sample_actions
