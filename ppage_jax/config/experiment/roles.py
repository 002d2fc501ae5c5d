"""What ``experiment.roles`` may say for each role: learn, play a baseline policy, or play a
policy another run trained (frozen)."""

from __future__ import annotations

# experiment.roles keys (PPAGE's plural config names), in the order of ppage_jax.defaults.ROLES.
ROLE_KEYS = ("predators", "preys")
LEARN = "learn"
# The baseline policies each role may play instead of learning, by name
# (implemented in ppage_jax.policies: PREDATOR_POLICIES and PREY_POLICIES).
BASELINES: dict[str, tuple[str, ...]] = {
    "predator": ("noop", "random", "chase", "intercept"),
    "prey": ("noop", "random", "evade"),
}
# A frozen role's setting: {policy: RUN_DIR, seed: which trained seed, greedy: argmax}.
FROZEN_DEFAULTS = {"policy": None, "seed": 0, "greedy": False}
# The files of a run directory a frozen policy is read from (written by ppage-jax run).
RUN_CONFIG, RUN_CHECKPOINT = "config.yaml", "checkpoint.msgpack"
