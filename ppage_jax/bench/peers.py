"""Peers measured in the same process: Jumanji's LevelBasedForaging and JaxMARL's MPE
simple_tag (the ``bench`` extra), beside ppage_jax's default config and its 2v2 local_only
scenario, timed in turns so the shared machine's load drifts over all of them alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppage_jax.bench.throughput import (
    AUTO_RESET,
    NO_RESET,
    Result,
    Timed,
    compile_loop,
    interleaved,
    place_batch,
    prepare_env,
)
from ppage_jax.config import load_config
from ppage_jax.env import make

# The "2v2, all speeds 1, local_only" scenario, compared with Jumanji's LBF.
TWO_V_TWO = {
    "agents.predators.count": 2,
    "agents.preys.count": 2,
    "agents.predators.speed": 1,
    "agents.preys.speed": 1,
    "observations.type": "local_only",
    "observations.params": {},
    "observations.per_agent": None,
}
PPAGE_2V2 = "ppage 2v2 speed 1 local_only"
PPAGE_PREFIX = "ppage "  # "ppage CONFIG": CONFIG measured again beside the peers
# (ours, theirs) pairs printed as ratios: the same loop as the peer was measured with.
PEER_RATIOS = (
    (PPAGE_2V2, "jumanji LevelBasedForaging-v0"),
    ("ppage configs/default", "jaxmarl MPE_simple_tag_v3"),
)  # auto-reset both


def prepare_jumanji_lbf(batch: int, steps: int) -> Timed | None:
    """Jumanji LevelBasedForaging-v0 (2 agents, 8x8), vmapped, stepped without resets;
    None when jumanji is not installed (``pip install -e ".[bench]"``)."""
    try:
        # the optional bench extra
        import jumanji  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    env = jumanji.make("LevelBasedForaging-v0")
    n_agents = int(env.action_spec.shape[0])
    n_actions = int(np.asarray(env.action_spec.num_values).max())
    carry = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), batch))
    vstep = jax.vmap(env.step)

    def step(key, carry):  # the timestep (observation included) is carried, like ours
        actions = jax.random.randint(key, (batch, n_agents), 0, n_actions)
        return vstep(carry[0], actions)

    compile_s, run = compile_loop(step, place_batch(carry, batch))
    return Timed(
        Result(
            "jumanji LevelBasedForaging-v0",
            NO_RESET,
            batch,
            n_agents,
            steps,
            float("inf"),
            compile_s,
        ),
        run,
    )


def prepare_jaxmarl_simple_tag(batch: int, steps: int) -> Timed | None:
    """JaxMARL MPE_simple_tag_v3 (3 adversaries, 1 agent), vmapped; its step always
    auto-resets (JaxMARL computes a reset every step). None when jaxmarl is missing."""
    try:
        import jaxmarl
    except ImportError:
        return None
    env = jaxmarl.make("MPE_simple_tag_v3")
    agents = list(env.agents)
    # jaxmarl types action_space as its base Space; the MPE's are Discrete, with n
    n_actions = {a: int(env.action_space(a).n) for a in agents}  # pyright: ignore[reportAttributeAccessIssue]
    carry = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), batch))
    vstep = jax.vmap(env.step)

    def step(key, carry):  # (obs, state, summed rewards) carried, like ours
        keys = jax.random.split(key, len(agents) + 1)
        actions = {
            a: jax.random.randint(k, (batch,), 0, n_actions[a])
            for a, k in zip(agents, keys[1:], strict=True)
        }
        obs, state, reward, *_ = vstep(jax.random.split(keys[0], batch), carry[1], actions)
        return obs, state, carry[2] + sum(reward[a] for a in agents)

    compile_s, run = compile_loop(step, place_batch((*carry, jnp.zeros(batch, jnp.float32)), batch))
    return Timed(
        Result(
            "jaxmarl MPE_simple_tag_v3",
            AUTO_RESET,
            batch,
            len(agents),
            steps,
            float("inf"),
            compile_s,
        ),
        run,
    )


PEERS_HEADING = "peers at batch {batch}, timed in turns (the machine's load drifts over all alike)"


def peer_legend(base: str, batch: int) -> dict[str, str]:
    """What the ppage rows of the peer comparison are, by row name: beside the per-config
    rows of the same config, they would otherwise read as a second, unexplained figure."""
    return {
        f"{PPAGE_PREFIX}{base}": f"{base} again (random actions, batched auto-reset: the same "
        f"loop as its per-config row at batch {batch}), re-timed beside the peers",
        PPAGE_2V2: f"{base} with 2 predators vs 2 prey, all speed 1, the local_only observation "
        "and no resets (the setting of Jumanji's LBF)",
    }


def run_peers(
    configs: Sequence[str], batch: int, steps: int, repeats: int, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """The default config (else the first given) with auto-reset, the 2v2 local_only
    scenario without resets, and the installed peers, at one batch size, interleaved."""
    base = next((c for c in configs if Path(c).name == "default"), configs[0] if configs else None)
    timers = [
        prepare_env(make(load_config(base)), batch, steps, name=f"{PPAGE_PREFIX}{base}"),
        prepare_env(make(load_config(base, TWO_V_TWO)), batch, steps, resets=False, name=PPAGE_2V2),
        prepare_jumanji_lbf(batch, steps),
        prepare_jaxmarl_simple_tag(batch, steps),
    ]
    available = [t for t in timers if t is not None]
    log(PEERS_HEADING.format(batch=batch) + ":")
    for name, meaning in peer_legend(str(base), batch).items():
        log(f"  {name} = {meaning}")
    rows = []
    for result in interleaved(available, repeats):
        rows.append(result.as_dict())
        log(result.row())
    if len(available) < len(timers):
        log(
            f"({len(timers) - len(available)} peer(s) not installed: pip install -e "
            f'".[bench]" for jumanji and jaxmarl)'
        )
    return rows
