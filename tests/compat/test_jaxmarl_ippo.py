"""A JaxMARL-style IPPO loop (feed-forward, shared parameters, as in JaxMARL's ippo_ff
baselines) runs unchanged on the JaxMARL adapter: dict observations and actions, batchify /
unbatchify over ``env.agents``, ``jax.vmap(env.step)`` with auto-reset, infos reshaped to
``NUM_ACTORS``, GAE and a clipped PPO update."""
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ppage_jax.compat.jaxmarl import JaxMARLEnv


class ActorCritic(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        h = nn.tanh(nn.Dense(32)(x))
        logits = nn.Dense(self.action_dim)(nn.tanh(nn.Dense(32)(h)))
        value = nn.Dense(1)(nn.tanh(nn.Dense(32)(h)))
        return logits, jnp.squeeze(value, axis=-1)


class Transition(NamedTuple):
    done: jnp.ndarray
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray
    info: dict


def batchify(x: dict, agent_list, num_actors):
    x = jnp.stack([x[a] for a in agent_list])
    return x.reshape((num_actors, -1))


def unbatchify(x: jnp.ndarray, agent_list, num_envs, num_actors):
    x = x.reshape((num_actors, num_envs, -1))
    return {a: x[i] for i, a in enumerate(agent_list)}


def make_train(config, env):
    config["NUM_ACTORS"] = env.num_agents * config["NUM_ENVS"]

    def train(rng):
        network = ActorCritic(env.action_space(env.agents[0]).n)
        rng, _rng = jax.random.split(rng)
        init_x = jnp.zeros(env.observation_space(env.agents[0]).shape)
        network_params = network.init(_rng, init_x)
        tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(config["LR"], eps=1e-5))
        opt_state = tx.init(network_params)

        rng, _rng = jax.random.split(rng)
        reset_rng = jax.random.split(_rng, config["NUM_ENVS"])
        obsv, env_state = jax.vmap(env.reset, in_axes=(0,))(reset_rng)

        def _update_step(runner_state, unused):
            def _env_step(runner_state, unused):
                params, opt_state, env_state, last_obs, rng = runner_state
                obs_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
                rng, _rng = jax.random.split(rng)
                logits, value = network.apply(params, obs_batch)
                action = jax.random.categorical(_rng, logits)
                log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None],
                                               axis=-1)[:, 0]
                env_act = unbatchify(action, env.agents, config["NUM_ENVS"], env.num_agents)
                env_act = {k: v.flatten() for k, v in env_act.items()}
                rng, _rng = jax.random.split(rng)
                rng_step = jax.random.split(_rng, config["NUM_ENVS"])
                obsv, env_state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0))(
                    rng_step, env_state, env_act)
                info = jax.tree.map(lambda x: x.reshape((config["NUM_ACTORS"])), info)
                transition = Transition(
                    batchify(done, env.agents, config["NUM_ACTORS"]).squeeze(), action, value,
                    batchify(reward, env.agents, config["NUM_ACTORS"]).squeeze(), log_prob,
                    obs_batch, info)
                return (params, opt_state, env_state, obsv, rng), (transition, done["__all__"])

            runner_state, (traj, episode_end) = jax.lax.scan(
                _env_step, runner_state, None, config["NUM_STEPS"])
            params, opt_state, env_state, last_obs, rng = runner_state
            _, last_val = network.apply(params, batchify(last_obs, env.agents,
                                                         config["NUM_ACTORS"]))

            def _get_advantages(gae_and_next_value, transition):
                gae, next_value = gae_and_next_value
                delta = transition.reward + config["GAMMA"] * next_value * (
                    1 - transition.done) - transition.value
                gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (
                    1 - transition.done) * gae
                return (gae, transition.value), gae

            _, advantages = jax.lax.scan(_get_advantages, (jnp.zeros_like(last_val), last_val),
                                         traj, reverse=True)
            targets = advantages + traj.value

            def _loss_fn(params, traj, gae, targets):
                logits, value = network.apply(params, traj.obs)
                log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits),
                                               traj.action[..., None], axis=-1)[..., 0]
                value_loss = 0.5 * jnp.square(value - targets).mean()
                ratio = jnp.exp(log_prob - traj.log_prob)
                gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                actor_loss = -jnp.minimum(
                    ratio * gae,
                    jnp.clip(ratio, 1.0 - config["CLIP_EPS"], 1.0 + config["CLIP_EPS"]) * gae
                ).mean()
                entropy = -(jax.nn.softmax(logits) * jax.nn.log_softmax(logits)).sum(-1).mean()
                return actor_loss + config["VF_COEF"] * value_loss - config["ENT_COEF"] * entropy

            def _update_epoch(carry, unused):
                params, opt_state = carry
                loss, grads = jax.value_and_grad(_loss_fn)(params, traj, advantages, targets)
                updates, opt_state = tx.update(grads, opt_state)
                return (optax.apply_updates(params, updates), opt_state), loss

            (params, opt_state), losses = jax.lax.scan(
                _update_epoch, (params, opt_state), None, config["UPDATE_EPOCHS"])
            metric = {"loss": losses[-1], "episodes": episode_end.sum(),
                      "reward": traj.reward.mean(),
                      "captured": traj.info["captured"].any(),
                      "term_sum": sum(v.sum() for k, v in traj.info.items()
                                      if k.startswith("reward_terms/")),
                      "reward_sum": traj.reward.sum()}
            return (params, opt_state, env_state, last_obs, rng), metric

        rng, _rng = jax.random.split(rng)
        runner_state = (network_params, opt_state, env_state, obsv, _rng)
        runner_state, metric = jax.lax.scan(_update_step, runner_state, None,
                                            config["NUM_UPDATES"])
        return {"runner_state": runner_state, "metrics": metric,
                "init_params": network_params}

    return train


def test_jaxmarl_style_ippo_runs_unchanged():
    env = JaxMARLEnv("configs/1v1")
    env = JaxMARLEnv(env.env.config.with_overrides({"env.termination.max_steps": 8}))
    config = {"NUM_ENVS": 8, "NUM_STEPS": 16, "NUM_UPDATES": 3, "UPDATE_EPOCHS": 2,
              "LR": 3e-3, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2,
              "VF_COEF": 0.5, "ENT_COEF": 0.01}
    out = jax.jit(make_train(config, env))(jax.random.PRNGKey(0))
    metrics = jax.tree.map(np.asarray, out["metrics"])
    assert metrics["loss"].shape == (3,) and np.isfinite(metrics["loss"]).all()
    # every 8-turn episode ends inside the 16-turn rollouts: at least 2 per grid per update
    assert (metrics["episodes"] >= 2 * config["NUM_ENVS"]).all()
    # the per-term infos add up to the rewards the loop saw
    np.testing.assert_allclose(metrics["term_sum"], metrics["reward_sum"], rtol=1e-5)
    moved = jax.tree.map(lambda a, b: np.abs(np.asarray(a) - np.asarray(b)).max(),
                         out["runner_state"][0], out["init_params"])
    assert max(jax.tree.leaves(moved)) > 0
