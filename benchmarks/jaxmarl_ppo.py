"""JaxMARL-style IPPO and MAPPO on the JaxMARL adapter, then trained predators against random
predators facing the same trained prey.

The training loop follows JaxMARL's feed-forward baselines (``ippo_ff``: one actor-critic
shared by every agent; ``mappo_ff``: the critic reads ``obs["world_state"]`` reshaped to
``NUM_ACTORS`` rows): dict observations and actions, batchify / unbatchify over
``env.agents``, ``jax.vmap(env.step)`` with auto-reset, every info leaf reshaped to
``NUM_ACTORS``, GAE and a clipped PPO update. Only the env line is specific to PPAGE
(``JaxMARLEnv(...)`` instead of ``jaxmarl.make(...)``). ``tests/compat/test_jaxmarl_ippo.py``
runs the same ``make_train`` briefly.

Evaluation: ``--episodes`` held-out layouts, actions sampled from the policy; the predators
either use the trained policy or act uniformly at random while the prey always use the
trained policy. Reported: the share of episodes that end in a capture within ``max_steps``,
the mean turns until the episode ends, and the predators' mean return.

    python benchmarks/jaxmarl_ppo.py --algorithm ippo
    python benchmarks/jaxmarl_ppo.py --algorithm mappo --updates 300
"""

from __future__ import annotations

import argparse
import json
import time
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from ppage_jax.compat.jaxmarl import JaxMARLEnv


class ActorCritic(nn.Module):
    """Actor on the agent's observation; critic on it (IPPO) or on the world state (MAPPO)."""

    action_dim: int
    hidden: int = 32

    @nn.compact
    def __call__(self, x, critic_x):
        logits = nn.Dense(self.action_dim)(nn.tanh(nn.Dense(self.hidden)(x)))
        value = nn.Dense(1)(nn.tanh(nn.Dense(self.hidden, name="critic_hidden")(critic_x)))
        return logits, jnp.squeeze(value, axis=-1)


class Transition(NamedTuple):
    done: jnp.ndarray
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray
    critic_obs: jnp.ndarray
    info: dict


def batchify(x: dict, agent_list, num_actors):
    x = jnp.stack([x[a] for a in agent_list])
    return x.reshape((num_actors, -1))


def unbatchify(x: jnp.ndarray, agent_list, num_envs, num_actors):
    x = x.reshape((num_actors, num_envs, -1))
    return {a: x[i] for i, a in enumerate(agent_list)}


def make_network(config, env) -> ActorCritic:
    return ActorCritic(env.action_space(env.agents[0]).n, config.get("HIDDEN", 32))


def make_train(config, env):
    config["NUM_ACTORS"] = env.num_agents * config["NUM_ENVS"]

    def critic_input(obs, obs_batch):
        if not config["MAPPO"]:
            return obs_batch
        world_state = obs["world_state"].swapaxes(0, 1)  # as in JaxMARL's mappo_ff
        return world_state.reshape((config["NUM_ACTORS"], -1))

    def train(rng):
        network = make_network(config, env)
        rng, _rng = jax.random.split(rng)
        init_x = jnp.zeros(env.observation_space(env.agents[0]).shape)
        init_c = jnp.zeros(env.world_state_size()) if config["MAPPO"] else init_x
        network_params = network.init(_rng, init_x, init_c)
        tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(config["LR"], eps=1e-5))
        opt_state = tx.init(network_params)

        rng, _rng = jax.random.split(rng)
        reset_rng = jax.random.split(_rng, config["NUM_ENVS"])
        obsv, env_state = jax.vmap(env.reset, in_axes=(0,))(reset_rng)

        def _update_step(runner_state, unused):
            def _env_step(runner_state, unused):
                params, opt_state, env_state, last_obs, rng = runner_state
                obs_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
                critic_obs = critic_input(last_obs, obs_batch)
                rng, _rng = jax.random.split(rng)
                logits, value = network.apply(params, obs_batch, critic_obs)
                action = jax.random.categorical(_rng, logits)
                log_prob = jnp.take_along_axis(
                    jax.nn.log_softmax(logits), action[:, None], axis=-1
                )[:, 0]
                env_act = unbatchify(action, env.agents, config["NUM_ENVS"], env.num_agents)
                env_act = {k: v.flatten() for k, v in env_act.items()}
                rng, _rng = jax.random.split(rng)
                rng_step = jax.random.split(_rng, config["NUM_ENVS"])
                obsv, env_state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0))(
                    rng_step, env_state, env_act
                )
                info = jax.tree.map(lambda x: x.reshape(config["NUM_ACTORS"]), info)
                transition = Transition(
                    batchify(done, env.agents, config["NUM_ACTORS"]).squeeze(),
                    action,
                    value,
                    batchify(reward, env.agents, config["NUM_ACTORS"]).squeeze(),
                    log_prob,
                    obs_batch,
                    critic_obs,
                    info,
                )
                return (params, opt_state, env_state, obsv, rng), (transition, done["__all__"])

            runner_state, (traj, episode_end) = jax.lax.scan(
                _env_step, runner_state, None, config["NUM_STEPS"]
            )
            params, opt_state, env_state, last_obs, rng = runner_state
            last_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
            _, last_val = network.apply(params, last_batch, critic_input(last_obs, last_batch))

            def _get_advantages(gae_and_next_value, transition):
                gae, next_value = gae_and_next_value
                delta = (
                    transition.reward
                    + config["GAMMA"] * next_value * (1 - transition.done)
                    - transition.value
                )
                gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - transition.done) * gae
                return (gae, transition.value), gae

            _, advantages = jax.lax.scan(
                _get_advantages, (jnp.zeros_like(last_val), last_val), traj, reverse=True
            )
            targets = advantages + traj.value

            def _loss_fn(params, traj, gae, targets):
                logits, value = network.apply(params, traj.obs, traj.critic_obs)
                log_prob = jnp.take_along_axis(
                    jax.nn.log_softmax(logits), traj.action[..., None], axis=-1
                )[..., 0]
                value_loss = 0.5 * jnp.square(value - targets).mean()
                ratio = jnp.exp(log_prob - traj.log_prob)
                gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                actor_loss = -jnp.minimum(
                    ratio * gae,
                    jnp.clip(ratio, 1.0 - config["CLIP_EPS"], 1.0 + config["CLIP_EPS"]) * gae,
                ).mean()
                entropy = -(jax.nn.softmax(logits) * jax.nn.log_softmax(logits)).sum(-1).mean()
                return actor_loss + config["VF_COEF"] * value_loss - config["ENT_COEF"] * entropy

            def _update_epoch(carry, unused):
                params, opt_state = carry
                loss, grads = jax.value_and_grad(_loss_fn)(params, traj, advantages, targets)
                updates, opt_state = tx.update(grads, opt_state)
                return (optax.apply_updates(params, updates), opt_state), loss

            (params, opt_state), losses = jax.lax.scan(
                _update_epoch, (params, opt_state), None, config["UPDATE_EPOCHS"]
            )
            metric = {
                "loss": losses[-1],
                "episodes": episode_end.sum(),
                "reward": traj.reward.mean(),
                "captured": traj.info["captured"].any(),
                "term_sum": sum(
                    v.sum() for k, v in traj.info.items() if k.startswith("reward_terms/")
                ),
                "reward_sum": traj.reward.sum(),
            }
            return (params, opt_state, env_state, last_obs, rng), metric

        rng, _rng = jax.random.split(rng)
        runner_state = (network_params, opt_state, env_state, obsv, _rng)
        runner_state, metric = jax.lax.scan(_update_step, runner_state, None, config["NUM_UPDATES"])
        return {"runner_state": runner_state, "metrics": metric, "init_params": network_params}

    return train


def evaluate(
    config, env: JaxMARLEnv, params, key: jax.Array, episodes: int, random_predators: bool
) -> dict[str, float]:
    """Capture rate, mean turns and predator return over ``episodes`` fresh layouts."""
    grid, network = env.env, make_network(config, env)
    is_predator = jnp.asarray(grid.is_predator)
    max_steps = int(grid.spec.max_steps)
    critic_x = jnp.zeros(
        (env.num_agents, env.world_state_size() if config["MAPPO"] else grid.observation_size)
    )

    def episode(key):
        k_reset, k_run = jax.random.split(key)
        obs, state = grid.reset(k_reset, env.params)

        def turn(carry, k):
            obs, state, done, turns, pred_return = carry
            k_pol, k_rand, k_step = jax.random.split(k, 3)
            logits, _ = network.apply(params, obs, critic_x)
            actions = jax.random.categorical(k_pol, logits)
            uniform = jax.random.randint(k_rand, actions.shape, 0, grid.num_actions)
            actions = jnp.where(is_predator & random_predators, uniform, actions)
            obs, state, reward, terminated, truncated, _ = grid.step(
                k_step, state, actions, env.params
            )
            live = ~done
            pred_return += jnp.where(live, (reward * is_predator).sum(), 0.0)
            turns += live.astype(jnp.int32)
            done = done | terminated | truncated
            return (obs, state, done, turns, pred_return), terminated & live

        init = (obs, state, jnp.bool_(False), jnp.int32(0), jnp.float32(0))
        (_, _, _, turns, pred_return), ended_by_capture = jax.lax.scan(
            turn, init, jax.random.split(k_run, max_steps)
        )
        return ended_by_capture.any(), turns, pred_return

    captured, turns, pred_return = jax.jit(jax.vmap(episode))(jax.random.split(key, episodes))
    return {
        "capture_rate": float(captured.mean()),
        "mean_turns": float(turns.mean()),
        "predator_return": float(pred_return.mean() / grid.layout.n_predators),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algorithm", choices=("ippo", "mappo"), default="ippo")
    parser.add_argument("--config", default="1v1")
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=64, help="turns per rollout")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    mappo = args.algorithm == "mappo"
    env = JaxMARLEnv(
        args.config, world_state=mappo, env={"termination": {"max_steps": args.max_steps}}
    )
    config = {
        "NUM_ENVS": args.envs,
        "NUM_STEPS": args.steps,
        "NUM_UPDATES": args.updates,
        "UPDATE_EPOCHS": 4,
        "LR": 2.5e-3,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "VF_COEF": 0.5,
        "ENT_COEF": 0.01,
        "MAPPO": mappo,
        "HIDDEN": 64,
    }
    start = time.perf_counter()
    out = jax.block_until_ready(jax.jit(make_train(config, env))(jax.random.PRNGKey(args.seed)))
    train_s = time.perf_counter() - start
    params = out["runner_state"][0]
    eval_key = jax.random.PRNGKey(10_000 + args.seed)  # held-out layouts, same for both
    result = {
        "algorithm": args.algorithm,
        "config": args.config,
        "max_steps": args.max_steps,
        "env_steps": args.envs * args.steps * args.updates,
        "train_seconds": round(train_s, 1),
        "episodes": args.episodes,
        "trained_predators": evaluate(config, env, params, eval_key, args.episodes, False),
        "random_predators": evaluate(config, env, params, eval_key, args.episodes, True),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
