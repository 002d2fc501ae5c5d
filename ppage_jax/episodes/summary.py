"""Host-side summaries of played episodes, in one vocabulary, and the sharded stream rollout.

:func:`summarize_episodes` is the one summariser: ``capture_rate``, the censored time to
capture (``km_median``, ``rmst`` with bootstrap CIs, see :mod:`ppage_jax.stats.survival`),
``truncated_share``, ``episode_length``, ``steps_to_capture`` and the per-term returns of each
role. :func:`rollout_summary` runs a sharded auto-reset stream and returns raw totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from ppage_jax.defaults import ROLES
from ppage_jax.env import GridWorld
from ppage_jax.episodes.play import play_turn
from ppage_jax.episodes.stats import episode_stats_init
from ppage_jax.policies import Policy
from ppage_jax.sharding import batch_sharding, make_mesh, replicate, to_host
from ppage_jax.state import EnvParams
from ppage_jax.stats.survival import BOOTSTRAP_REPS, Bootstrap, survival_summary
from ppage_jax.wrappers import BatchedAutoResetEnv

# The evaluation rows of a run, in table order: predators against the same prey, then prey
# against the same predators (the capture-curve panels compare the same rows).
PREDATOR_ROWS = ("trained", "trained_greedy", "random", "chase")
PREY_ROWS = ("trained", "prey_random", "prey_evade")


def comparison_groups(evaluation: Mapping[str, Mapping]) -> list[tuple[str, list[str], str]]:
    """The evaluated rows that face the same opponent as ``trained``, as
    ``(role, rows, opponent)``: ``("predators", [...], <the prey they all face>)`` and
    ``("prey", [...], <the predators they all face>)``, each kept only when it compares at
    least two rows. A row that faces another opponent (``trained_greedy`` when both roles
    learn: greedy prey) is left out of the group, so a "same prey" heading is always true."""
    trained = evaluation.get("trained", {})
    groups = []
    for role, rows, other in (
        ("predators", PREDATOR_ROWS, "prey"),
        ("prey", PREY_ROWS, "predators"),
    ):
        opponent = trained.get(other, "?")
        names = [n for n in rows if n in evaluation and evaluation[n].get(other, "?") == opponent]
        if len(names) > 1:
            groups.append((role, names, opponent))
    return groups


def _flat(episodes: Mapping[str, Any], key: str, tail: tuple[int, ...] = ()) -> np.ndarray:
    return np.asarray(episodes[key]).reshape((-1, *tail))


def summarize_episodes(
    episodes: Mapping[str, Any],
    env: GridWorld,
    *,
    horizon: float | None = None,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 0,
    strata: Any = None,
) -> dict[str, Any]:
    """Summarise episodes on the host; any leading axes are pooled.

    ``episodes`` is the output of :func:`~ppage_jax.episodes.play.play_episodes` (every
    episode counts), or stacked ``finished`` dicts of
    :func:`~ppage_jax.episodes.stats.episode_stats_update` (only entries with ``done``
    count; their length is ``length``). ``env`` supplies ``reward_terms`` and
    ``is_predator``. ``horizon`` is the step limit the RMST is restricted to (default: the
    longest episode); ``reps`` bootstrap resamples for the CIs (0: none), drawn within each
    ``strata`` value (an array shaped like the episodes' leading axes, e.g. the training
    seed) with ``seed``.

    Returns ``episodes`` (count), ``capture_rate`` (share ended by capture), ``km_median``
    (Kaplan-Meier median turns to capture, ``inf`` when fewer than half are captured),
    ``rmst`` (restricted mean turns to capture up to ``horizon``; uncaptured episodes count
    as censored), ``km_median_ci``/``rmst_ci`` ([low, high], 95 %), ``truncated_share``
    (share that hit the step limit uncaptured), ``episode_length`` (mean turns),
    ``steps_to_capture`` (mean turns of the captured episodes only: survivor-biased, kept
    for comparison), ``captures`` (mean prey captured), ``horizon``, and for each role with
    agents, each term and ``total``: ``return/<role>/<term>`` and
    ``discounted_return/<role>/<term>`` (mean over episodes of the mean over the role's
    agents). Means over no episode are NaN.
    """
    length_key = "episode_length" if "episode_length" in episodes else "length"
    length = _flat(episodes, length_key).astype(np.float64)
    done = (
        _flat(episodes, "done").astype(bool) if "done" in episodes else np.ones(length.size, bool)
    )
    captured = _flat(episodes, "captured" if "captured" in episodes else "terminated")
    captured = captured.astype(bool)[done]
    truncated = _flat(episodes, "truncated").astype(bool)[done]
    length = length[done]
    count = int(done.sum())
    nan = float("nan")

    def mean(values: np.ndarray) -> float:
        return float(values.mean()) if values.size else nan

    summary: dict[str, Any] = {
        "episodes": count,
        "capture_rate": mean(captured),
        "km_median": nan,
        "km_median_ci": [nan, nan],
        "rmst": nan,
        "rmst_ci": [nan, nan],
        "truncated_share": mean(truncated & ~captured),
        "episode_length": mean(length),
        "steps_to_capture": mean(length[captured]),
        "captures": mean(_flat(episodes, "captures")[done].astype(np.float64)),
        "horizon": float(horizon)
        if horizon is not None
        else (float(length.max()) if count else nan),
    }
    if count:
        groups = (
            None
            if strata is None
            else np.broadcast_to(np.asarray(strata), np.shape(episodes[length_key])).reshape(-1)[
                done
            ]
        )
        summary.update(
            survival_summary(
                length, captured, summary["horizon"], Bootstrap(reps, seed=seed), strata=groups
            )
        )
    if reps <= 0:
        del summary["km_median_ci"], summary["rmst_ci"]
    summary.update(_role_returns(episodes, env, done))
    return summary


def _role_returns(
    episodes: Mapping[str, Any], env: GridWorld, done: np.ndarray
) -> dict[str, float]:
    is_predator = np.asarray(env.is_predator, bool)
    names = tuple(env.reward_terms)
    shape = (len(is_predator), len(names))
    out = {}
    for kind, key in (("return", "returns"), ("discounted_return", "discounted_returns")):
        if key not in episodes:
            continue
        values = _flat(episodes, key, shape).astype(np.float64)[done]
        for role, rows in zip(ROLES, (is_predator, ~is_predator), strict=True):
            if not rows.any():
                continue
            per_term = (
                values[:, rows, :].mean(axis=(0, 1))
                if values.shape[0]
                else np.full(len(names), np.nan)
            )
            for name, value in zip(names, per_term, strict=True):
                out[f"{kind}/{role}/{name}"] = float(value)
            out[f"{kind}/{role}/total"] = float(per_term.sum())
    return out


def rollout_summary(
    env: GridWorld,
    policy: Policy,
    key: jax.Array,
    num_envs: int,
    num_steps: int,
    params: EnvParams | None = None,
    *,
    mesh: Mesh | None = None,
    resets_per_step: int | None = None,
) -> dict:
    """Run ``num_envs`` auto-resetting grids for ``num_steps`` turns and total the episodes
    that finished (a throughput-style stream; see
    :func:`~ppage_jax.episodes.play.rollout_episodes` on its bias).

    Returns NumPy totals over finished episodes: ``episodes``, ``terminated``, ``truncated``
    (uncaptured), ``captures``, ``length_sum`` and ``term_returns`` float[A, T]
    (undiscounted, summed over episodes).

    The grids auto-reset with :class:`BatchedAutoResetEnv` (``resets_per_step`` fresh
    layouts per step) and are split across the devices of ``mesh`` (default: every device,
    see :mod:`ppage_jax.sharding`); ``num_envs`` must be a multiple of the device count.
    With several processes (:func:`ppage_jax.distributed.initialize`) every process calls
    this with the same arguments; the grids are split over every process's devices and
    each process gets the same global totals as a one-process run.
    """
    params = env.default_params if params is None else params
    mesh = make_mesh() if mesh is None else mesh
    if num_envs % mesh.devices.size:
        raise ValueError(
            f"num_envs={num_envs} must be a multiple of the {mesh.devices.size} devices of the mesh"
        )
    auto = BatchedAutoResetEnv(env, num_envs, resets_per_step)

    def split(tree):
        return jax.lax.with_sharding_constraint(tree, batch_sharding(mesh))

    n_agents, n_terms = env.num_agents, len(env.reward_terms)

    def one_step(params, carry, key):
        obs, state, stats, totals = carry
        k_act, k_step = jax.random.split(key)
        r = play_turn(
            policy,
            auto.step,
            split(jax.random.split(k_act, num_envs)),
            k_step,
            obs,
            state,
            stats,
            params,
        )
        f = r.finished
        totals = {
            "episodes": totals["episodes"] + f["done"].sum(),
            "terminated": totals["terminated"] + f["terminated"].sum(),
            "truncated": totals["truncated"] + (f["truncated"] & ~f["terminated"]).sum(),
            "captures": totals["captures"] + f["captures"].sum(),
            "length_sum": totals["length_sum"] + f["length"].sum(),
            "term_returns": totals["term_returns"] + f["returns"].sum(0),
        }
        return (r.obs, r.state, split(r.stats), totals), None

    @jax.jit
    def run(key, params):
        k_reset, k_steps = jax.random.split(key)
        obs, state = split(auto.reset(k_reset, params))
        zero = jnp.zeros((), jnp.int32)
        totals = {
            "episodes": zero,
            "terminated": zero,
            "truncated": zero,
            "captures": zero,
            "length_sum": zero,
            "term_returns": jnp.zeros((n_agents, n_terms), jnp.float32),
        }
        carry = (obs, state, split(episode_stats_init(env, (num_envs,))), totals)
        carry, _ = jax.lax.scan(
            partial(one_step, params), carry, jax.random.split(k_steps, num_steps)
        )
        return carry[-1]

    return to_host(run(*replicate((key, params), mesh)))
