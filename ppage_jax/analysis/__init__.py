"""Analysis built on the simulator: statistics, the reward audit and reward-ablation sweeps."""
