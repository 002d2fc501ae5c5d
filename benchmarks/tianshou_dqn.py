"""Tianshou DQN for the predator of the 1v1 config against a random prey, through the
PettingZoo adapter, then the trained predator against a random predator facing the same
random prey.

Tianshou needs PyTorch, which the project does not depend on; install it in its own
environment (a CPU wheel of torch, kept at that version while Tianshou installs)::

    python3.11 -m venv /tmp/tsvenv
    /tmp/tsvenv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
    echo "torch==2.13.0" > /tmp/torch-pin.txt
    /tmp/tsvenv/bin/pip install -c /tmp/torch-pin.txt tianshou==2.0.1 pettingzoo gymnasium
    /tmp/tsvenv/bin/pip install -c /tmp/torch-pin.txt -e .
    /tmp/tsvenv/bin/python benchmarks/tianshou_dqn.py

Training is Tianshou's own multi-agent setup, unchanged: the AEC env
(``ppage_jax.compat.pettingzoo.env``) wrapped in ``tianshou.env.PettingZooEnv``, a
``MultiAgentOffPolicyAlgorithm`` with a ``DQN`` for ``predator_1`` and
``MARLRandomDiscreteMaskedOffPolicyAlgorithm`` for ``prey_1``, a ``Collector`` on a
``DummyVectorEnv`` and ``run_training`` with ``OffPolicyTrainerParams``.

Tianshou stores the AEC turns of both agents in one sequence (predator, prey, predator, ...)
and the parallel-to-AEC conversion pays the rewards of a cycle on the last agent's turn, so
the predator's own turn carries reward 0 and the next turn carries its reward. DQN runs with
``n_step_return_horizon=2``: the predator's target then sums the cycle's reward and
bootstraps from its own next observation (with 1 it would bootstrap from the prey's).

Tianshou's ``PettingZooEnv`` reads an action mask only from a dict observation
(``{"observation", "action_mask"}``), not from ``info["action_mask"]``; :class:`MaskInObs`
(a PettingZoo ``BaseWrapper``) moves the adapter's mask there, so DQN's argmax and the random
prey skip moves that would leave the agent in place.

Evaluation: ``--episodes`` episodes (seeds ``10_000 + i``) on the Parallel API; the predator
either acts greedily with the trained Q-network (over the masked actions) or uniformly at
random over all actions, while the prey acts uniformly at random over all actions from a
generator seeded by the episode's seed (the same draws in both runs). Reported: the share of
episodes ending in a capture within ``--max-cycles`` turns and the mean turns until the
episode ends.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from pettingzoo.utils.wrappers import BaseWrapper
from tianshou.algorithm import DQN
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.multiagent.marl import MultiAgentOffPolicyAlgorithm
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.algorithm.random import MARLRandomDiscreteMaskedOffPolicyAlgorithm
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv, PettingZooEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Net

from ppage_jax.compat import pettingzoo as ppz

PREDATOR, PREY = "predator_1", "prey_1"


class MaskInObs(BaseWrapper):
    """Observations as ``{"observation", "action_mask"}``, where Tianshou looks for masks."""

    def observe(self, agent: str) -> dict:
        mask = self.infos[agent]["action_mask"]
        return {"observation": super().observe(agent), "action_mask": mask}


def make_env(max_cycles: int) -> PettingZooEnv:
    return PettingZooEnv(MaskInObs(ppz.env("1v1", max_cycles=max_cycles, action_masks=True)))


def build(args: argparse.Namespace) -> tuple[MultiAgentOffPolicyAlgorithm, PettingZooEnv]:
    env = make_env(args.max_cycles)
    net = Net(
        state_shape=env.observation_space.shape,
        action_shape=env.action_space.n,
        hidden_sizes=[64, 64],
    )
    policy = DiscreteQLearningPolicy(
        model=net, action_space=env.action_space, eps_training=args.eps, eps_inference=0.0
    )
    dqn = DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=args.lr),
        gamma=args.gamma,
        n_step_return_horizon=2,
        target_update_freq=500,
        huber_loss_delta=10.0,
    )
    prey = MARLRandomDiscreteMaskedOffPolicyAlgorithm(env.action_space)
    return MultiAgentOffPolicyAlgorithm(algorithms=[dqn, prey], env=env), env


def train(args: argparse.Namespace) -> tuple[MultiAgentOffPolicyAlgorithm, float]:
    algorithm, _ = build(args)
    envs = DummyVectorEnv([lambda: make_env(args.max_cycles) for _ in range(args.num_envs)])
    envs.seed(args.seed)
    buffer = VectorReplayBuffer(100_000, args.num_envs)
    collector = Collector(algorithm, envs, buffer, exploration_noise=True)
    collector.reset()
    start = time.perf_counter()
    algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=collector,
            test_collector=None,
            max_epochs=args.epochs,
            epoch_num_steps=args.epoch_steps,
            collection_step_num_env_steps=args.num_envs * 4,
            batch_size=64,
            update_step_num_gradient_steps_per_sample=0.25,
            test_in_training=False,
            verbose=False,
            show_progress=False,
        )
    )
    return algorithm, time.perf_counter() - start


def evaluate(q_net: Net | None, episodes: int, max_cycles: int) -> dict:
    """Capture rate and mean turns; greedy Q-network predator, or random when None."""
    env = ppz.parallel_env("1v1", max_cycles=max_cycles, action_masks=True)
    n = env.action_space(PREDATOR).n
    captures, turns = 0, []
    for i in range(episodes):
        seed = 10_000 + i
        prey_rng, pred_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
        obs, infos = env.reset(seed=seed)
        t, captured = 0, False
        while env.agents:
            if q_net is None:
                pred_action = int(pred_rng.integers(n))
            else:
                with torch.no_grad():
                    q, _ = q_net(obs[PREDATOR][None])
                mask = infos[PREDATOR]["action_mask"].astype(bool)
                pred_action = int(np.where(mask, q[0].numpy(), -np.inf).argmax())
            actions = {PREDATOR: pred_action, PREY: int(prey_rng.integers(n))}
            obs, _, terms, _, infos = env.step(actions)
            t += 1
            if any(terms.values()):
                captured = True
        captures += captured
        turns.append(t)
    return {"capture_rate": captures / episodes, "mean_turns": float(np.mean(turns))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument(
        "--epoch-steps", type=int, default=10_000, help="AEC env steps per epoch (two per turn)"
    )
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--max-cycles", type=int, default=200)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny networks: threads only contend with the env's
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    algorithm, train_s = train(args)
    q_net = algorithm.get_algorithm(PREDATOR).policy.model.eval()
    result = {
        "aec_env_steps": args.epochs * args.epoch_steps,
        "train_s": round(train_s, 1),
        "trained": evaluate(q_net, args.episodes, args.max_cycles),
        "random": evaluate(None, args.episodes, args.max_cycles),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
