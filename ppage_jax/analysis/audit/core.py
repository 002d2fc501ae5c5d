"""Reward audit: check a reward design with baseline policies before anyone trains on it.

Every combination of a predator baseline (``noop``, ``random``, ``chase``) and a prey baseline
(``noop``, ``random``, ``evade``) plays ``episodes`` episodes on a held-out block of reset
seeds (the same layouts for every combination, one episode per grid). The audit reports, per
combination and role, the discounted return of every term (and of the base term's components,
isolated by zeroing the others), the episode length, the capture rate and how the episodes
ended, and flags:

- ``dead_term``: a term (or a component of one) that never fired, e.g. the obstacle penalty
  while obstacles block movement;
- ``dominant_term``: a term carrying at least ``dominance`` of a role's absolute return in
  every combination;
- ``ordering``: a policy that does worse on the task (capture rate) but better on the shaped
  total of its role, against the same opponent;
- ``shaping_share``: shaping terms (every term but ``base``) carrying more than
  ``shaping_share`` of a role's absolute return;
- ``not_potential``: a shaping term that is not potential-based (it can move the optimum);
- ``early_termination`` (prey) / ``stalling`` (predators): a visited state where ending the
  episode now (being captured; capturing) is worth more (prey) or less (predators) to the
  agent than what the rest of the episode's reward stream paid from there, worst case over
  all visited states (the check of seeds/002).

The rollouts run as one compiled program per config: the policy combination is a traced
index, and the reward variants that isolate components are a vmapped axis of EnvParams.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppage_jax.config import SECTIONS
from ppage_jax.env import GridWorld
from ppage_jax.episodes.stats import RETURN_FIELDS, episode_stats_init, episode_stats_update
from ppage_jax.policies import PREDATOR_POLICIES, PREY_POLICIES
from ppage_jax.rewards.registry import get_term
from ppage_jax.state import NO_TRUNCATION, EnvParams

# Reset seeds of the audit's held-out block: episode i starts from PRNGKey(AUDIT_SEED + i).
AUDIT_SEED = 900_000
TASK_TERM = "base"
ROLES = ("predator", "prey")
ROLE_TITLES = {"predator": "predators", "prey": "prey"}


@dataclasses.dataclass(frozen=True)
class Component:
    """One additive part of a term, isolated by zeroing the term's other component params.

    ``kind`` is ``terminal`` for the payoff of the episode-ending event (capture) and
    ``stream`` for per-step payments; ``dead_hint`` explains a component that never fires.
    """

    param: str
    label: str
    kind: str
    dead_hint: str = ""


TERM_COMPONENTS: dict[str, tuple[Component, ...]] = {
    "base": (
        Component("capture_reward", "capture", "terminal"),
        Component("captured_penalty", "captured", "terminal"),
        Component("step_cost", "step", "stream"),
        Component("obstacle_penalty", "obstacle", "stream",
                  "no agent can stand on an obstacle while "
                  "env.dynamics.block_agents_by_obstacles is true"),
    ),
}

COMPONENT_LABELS = {f"{term}.{c.param}": c.label
                    for term, comps in TERM_COMPONENTS.items() for c in comps}


@dataclasses.dataclass(frozen=True)
class AuditSettings:
    """How many episodes, which seeds and policies, and the flag thresholds."""

    episodes: int = 256
    seed: int = AUDIT_SEED
    policies: tuple[tuple[str, str], ...] = tuple(itertools.product(PREDATOR_POLICIES,
                                                                     PREY_POLICIES))
    dominance: float = 0.9
    shaping_share: float = 0.5
    ordering_margin: float = 0.05

    def __post_init__(self):
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        for pred, prey in self.policies:
            if pred not in PREDATOR_POLICIES or prey not in PREY_POLICIES:
                raise ValueError(f"unknown policy pair {pred}/{prey}; predators: "
                                 f"{list(PREDATOR_POLICIES)}, prey: {list(PREY_POLICIES)}")


def parse_policy_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """``"chase/evade,random/random"`` -> (("chase", "evade"), ("random", "random"))."""
    pairs = []
    for item in text.split(","):
        pred, sep, prey = item.strip().partition("/")
        if not sep or pred not in PREDATOR_POLICIES or prey not in PREY_POLICIES:
            raise ValueError(f"bad policy pair {item.strip()!r}: write PREDATOR/PREY with "
                             f"predator in {list(PREDATOR_POLICIES)} and prey in "
                             f"{list(PREY_POLICIES)}")
        pairs.append((pred, prey))
    return tuple(pairs)


# ------------------------------------------------------------------------- rollouts
@dataclasses.dataclass(frozen=True)
class _Variant:
    """A reward variant: params with one component of ``term`` isolated."""

    term: str
    component: Component


def _variants(env: GridWorld, params: EnvParams) -> tuple[list[_Variant], EnvParams]:
    """The component variants of the configured terms and the stacked params [1 + V]."""
    variants, stacked = [], [params]
    for term in env.reward_terms:
        for comp in TERM_COMPONENTS.get(term, ()):
            others = {c.param: 0.0 for c in TERM_COMPONENTS[term] if c is not comp}
            variants.append(_Variant(term, comp))
            stacked.append(env.with_term_params(params, term, **others))
    return variants, jax.tree.map(lambda *xs: jnp.stack(xs), *stacked)


_ROLLOUTS: dict[tuple, Any] = {}


def _rollout_program(env: GridWorld, variants: tuple[_Variant, ...], episodes: int,
                     turns: int):
    """The compiled rollout for this static structure, built once per structure: every reward
    number is traced, so configs that differ only in reward weights or params (and new
    params passed in) reuse it."""
    static = env.config.hash(tuple(s for s in SECTIONS if s != "rewards"))
    key = (static, env.reward_terms, variants, episodes, turns)
    if key not in _ROLLOUTS:
        if len(_ROLLOUTS) >= 8:
            _ROLLOUTS.pop(next(iter(_ROLLOUTS)))
        _ROLLOUTS[key] = _make_rollout(env, variants, episodes, turns)
    return _ROLLOUTS[key]


def _make_rollout(env: GridWorld, variants: tuple[_Variant, ...], episodes: int, turns: int):
    """A jitted ``run(pred_idx, prey_idx, seeds, params, stacked) -> dict`` playing one episode
    per grid for ``turns`` turns at most."""
    is_predator = jnp.asarray(env.is_predator)
    term_index = {name: i for i, name in enumerate(env.reward_terms)}
    # (variant row, term column) of every terminal component: their sum is the capture payoff.
    terminal = [(1 + v, term_index[var.term]) for v, var in enumerate(variants)
                if var.component.kind == "terminal"]
    n_var, n_agents, n_terms = 1 + len(variants), env.num_agents, len(env.reward_terms)
    step_variants = jax.vmap(jax.vmap(env.step, in_axes=(0, 0, 0, None)),
                             in_axes=(None, None, None, 0))

    def policy(pred_fns, prey_fns, pred_idx, prey_idx, key, obs, state):
        k_pred, k_prey = jax.random.split(key)
        a_pred = lax.switch(pred_idx, pred_fns, k_pred, obs, state)
        a_prey = lax.switch(prey_idx, prey_fns, k_prey, obs, state)
        return jnp.where(is_predator, a_pred, a_prey)

    def run(pred_idx, prey_idx, seeds, params, stacked):
        pred_fns = [f(env, params) for f in PREDATOR_POLICIES.values()]
        prey_fns = [f(env, params) for f in PREY_POLICIES.values()]
        gamma = params.reward.gamma
        keys = jax.vmap(jax.random.PRNGKey)(seeds)
        reset_keys, play_keys = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, params)
        stats = episode_stats_init(env, (n_var, episodes))
        batch = (n_var, episodes)
        finished0 = {key: jnp.zeros(batch, bool) for key in ("done", "terminated",
                                                             "truncated")}
        finished0.update({key: jnp.zeros(batch, jnp.int32) for key in ("length", "captures")})
        finished0.update({key: jnp.zeros(batch + (n_agents, n_terms), jnp.float32)
                          for key in RETURN_FIELDS})
        zeros_i = jnp.zeros((n_agents,), jnp.int32)
        carry = dict(obs=obs, state=state, done=jnp.zeros(episodes, bool), stats=stats,
                     totals=finished0, fires=jnp.zeros((n_var, n_agents, n_terms), jnp.int32),
                     end_sum=jnp.zeros(n_agents, jnp.float32), end_count=zeros_i)
        no_output = (jnp.zeros((episodes, n_agents), jnp.float32),
                     jnp.zeros((episodes, n_agents), bool))

        def advance(c, t):
            alive = ~c["done"]
            step_keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(play_keys, t)
            k_act, k_env = jnp.moveaxis(jax.vmap(jax.random.split)(step_keys), 1, 0)
            actions = jax.vmap(lambda k, o, s: policy(pred_fns, prey_fns, pred_idx, prey_idx,
                                                      k, o, s))(
                k_act, c["obs"], c["state"])
            obs_v, state_v, _, term_v, trunc_v, info_v = step_variants(
                k_env, c["state"], actions, stacked)
            paid = info_v["reward_terms"] * alive[None, :, None, None]       # [V, N, A, T]
            info = {"reward_terms": paid,
                    "reward_terms_unit": info_v["reward_terms_unit"]
                    * alive[None, :, None, None],
                    "captures": info_v["captures"] * alive[None, :]}
            stats, finished = episode_stats_update(c["stats"], info, term_v & alive,
                                                   trunc_v & alive, gamma)
            stats = jax.tree.map(
                lambda new, old: jnp.where(
                    alive.reshape((1, -1) + (1,) * (new.ndim - 2)), new, old),
                stats, c["stats"])
            totals = {k: c["totals"][k] | finished[k] if finished[k].dtype == bool
                      else c["totals"][k] + finished[k] for k in finished}
            fires = c["fires"] + (paid != 0).sum(axis=1)
            end_paid = sum((paid[v, :, :, t] for v, t in terminal),
                           jnp.zeros((episodes, n_agents), jnp.float32))
            stream = paid[0].sum(-1) - end_paid                                # [N, A]
            valid = alive[:, None] & ~c["state"].captured                     # before the step
            keep = lambda new, old: jnp.where(
                alive.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)
            new = dict(obs=keep(obs_v[0], c["obs"]),
                       state=jax.tree.map(keep, jax.tree.map(lambda x: x[0], state_v),
                                          c["state"]),
                       done=c["done"] | (alive & (term_v[0] | trunc_v[0])),
                       stats=stats, totals=totals, fires=fires,
                       end_sum=c["end_sum"] + end_paid.sum(0),
                       end_count=c["end_count"] + (end_paid != 0).sum(0))
            return new, (stream, valid)

        def one_turn(c, t):
            return lax.cond(c["done"].all(), lambda c, t: (c, no_output), advance, c, t)

        carry, (stream, valid) = lax.scan(one_turn, carry, jnp.arange(turns))
        # Discounted stream return-to-go G_t = s_t + gamma * G_{t+1}, backwards in time.
        _, to_go = lax.scan(lambda g, s: (s + gamma * g, s + gamma * g),
                            jnp.zeros((episodes, n_agents), jnp.float32), stream, reverse=True)
        big = jnp.float32(np.inf)
        return dict(totals=carry["totals"], fires=carry["fires"],
                    end_sum=carry["end_sum"], end_count=carry["end_count"],
                    worst_to_go=jnp.where(valid, to_go, big).min(axis=(0, 1)),
                    best_to_go=jnp.where(valid, to_go, -big).max(axis=(0, 1)),
                    visited=valid.sum(axis=(0, 1)))

    return jax.jit(run)


def audit_rollouts(env: GridWorld, params: EnvParams | None = None,
                   settings: AuditSettings = AuditSettings()) -> dict[str, Any]:
    """Play every policy pair of ``settings`` and return the raw NumPy results per pair."""
    params = env.default_params if params is None else params
    turns = int(params.max_steps)
    if turns >= NO_TRUNCATION:
        raise ValueError("the audit needs a finite env.termination.max_steps (episodes must "
                         "end); set one, e.g. --set env.termination.max_steps=500")
    variants, stacked = _variants(env, params)
    run = _rollout_program(env, tuple(variants), settings.episodes, turns)
    seeds = jnp.arange(settings.episodes, dtype=jnp.uint32) + jnp.uint32(settings.seed)
    pred_names, prey_names = list(PREDATOR_POLICIES), list(PREY_POLICIES)
    results = {}
    for pred, prey in settings.policies:
        out = run(jnp.int32(pred_names.index(pred)), jnp.int32(prey_names.index(prey)), seeds,
                  params, stacked)
        results[(pred, prey)] = jax.tree.map(np.asarray, out)
    return {"variants": variants, "turns": turns, "results": results}


# ------------------------------------------------------------------------- summary
def _role_rows(env: GridWorld) -> dict[str, np.ndarray]:
    is_pred = np.asarray(env.is_predator, bool)
    return {role: rows for role, rows in (("predator", is_pred), ("prey", ~is_pred))
            if rows.any()}


def _column_names(env: GridWorld, variants: list[_Variant]) -> list[tuple[str, int, int]]:
    """(column name, variant row, term column) for every term and component, in table order."""
    columns = []
    for t, term in enumerate(env.reward_terms):
        columns.append((term, 0, t))
        for v, var in enumerate(variants):
            if var.term == term:
                columns.append((f"{term}.{var.component.param}", 1 + v, t))
    return columns


def gross_magnitudes(returns: dict[str, float], terms) -> dict[str, float]:
    """Per term, the size of what it pays or charges: the sum of its components' absolute
    returns where it has components (so a capture bonus and a step cost do not cancel), else
    its absolute return."""
    out = {}
    for term in terms:
        parts = [abs(v) for k, v in returns.items() if k.startswith(f"{term}.")]
        out[term] = sum(parts) if parts else abs(returns[term])
    return out


def summarize_pair(env: GridWorld, raw: dict, variants: list[_Variant]) -> dict[str, Any]:
    """Host-side summary of one policy pair: episode outcomes and per-role returns."""
    totals = raw["totals"]
    disc = totals["discounted_returns"]                                      # [V, N, A, T]
    terminated = totals["terminated"][0]
    truncated = totals["truncated"][0] & ~terminated
    n = terminated.shape[0]
    lengths = totals["length"][0]
    summary: dict[str, Any] = {
        "episodes": int(n),
        "capture_rate": float(terminated.mean()),
        "captures_per_episode": float(totals["captures"][0].mean()),
        "mean_length": float(lengths.mean()),
        "mean_steps_to_capture": float(lengths[terminated].mean()) if terminated.any()
        else None,
        "ended": {"terminated": int(terminated.sum()), "truncated": int(truncated.sum())},
        "returns": {}, "return_se": {}, "shaping_share": {},
    }
    columns = _column_names(env, variants)
    for role, rows in _role_rows(env).items():
        role_returns = {name: float(disc[v][:, rows, t].mean()) for name, v, t in columns}
        per_episode = disc[0][:, rows, :].sum(-1).mean(-1)                      # [N]
        role_returns["total"] = float(per_episode.mean())
        summary["returns"][role] = role_returns
        summary["return_se"][role] = float(per_episode.std(ddof=1) / np.sqrt(n)) if n > 1 \
            else 0.0
        gross = gross_magnitudes(role_returns, env.reward_terms)
        total = sum(gross.values())
        shaping = sum(v for t, v in gross.items() if t != TASK_TERM)
        summary["shaping_share"][role] = float(shaping / total) if total > 0 else 0.0
    return summary


def audit_rewards(env: GridWorld, params: EnvParams | None = None,
          settings: AuditSettings = AuditSettings()) -> dict[str, Any]:
    """Run the audit and return a JSON-ready report (``format_report`` renders it)."""
    params = env.default_params if params is None else params
    rollouts = audit_rollouts(env, params, settings)
    variants, results = rollouts["variants"], rollouts["results"]
    weights = dict(zip(env.reward_terms, np.asarray(params.reward.weights).tolist()))
    masks = np.asarray(params.reward.role_masks)
    rows = _role_rows(env)
    report: dict[str, Any] = {
        "config": env.config.path,
        "config_hash": env.config.hash(),
        "layout": {"size": env.layout.size, "predators": env.layout.n_predators,
                   "prey": env.layout.n_prey, "obstacles": env.layout.num_obstacles,
                   "block_agents_by_obstacles": env.layout.block_agents_by_obstacles},
        "gamma": float(params.reward.gamma),
        "max_turns": rollouts["turns"],
        "episodes": settings.episodes,
        "seeds": [settings.seed, settings.seed + settings.episodes - 1],
        "terms": list(env.reward_terms),
        "weights": weights,
        "applies_to": {term: [role for role, r in rows.items() if masks[t][r].any()]
                       for t, term in enumerate(env.reward_terms)},
        "components": {term: [c.param for c in TERM_COMPONENTS.get(term, ())]
                       for term in env.reward_terms if term in TERM_COMPONENTS},
        "policies": [],
        "fire_rates": {},
        "termination": {},
        "flags": [],
    }
    for (pred, prey), raw in results.items():
        entry = {"name": f"{pred}/{prey}", "predator_policy": pred, "prey_policy": prey}
        entry.update(summarize_pair(env, raw, variants))
        report["policies"].append(entry)
    report["fire_rates"] = _fire_rates(env, results, variants)
    report["termination"] = _termination(env, results)
    report["flags"] = _flags(env, params, report, variants, settings)
    return report


def _fire_rates(env: GridWorld, results: dict, variants: list[_Variant]) -> dict:
    """Per column and role: the fraction of live agent-turns on which it paid anything."""
    rates: dict[str, dict[str, float]] = {}
    for name, v, t in _column_names(env, variants):
        rates[name] = {}
        for role, rows in _role_rows(env).items():
            fired = sum(int(r["fires"][v][rows, t].sum()) for r in results.values())
            turns = sum(int(r["totals"]["length"][0].sum()) * int(rows.sum())
                        for r in results.values())
            rates[name][role] = fired / turns if turns else 0.0
    return rates


def _termination(env: GridWorld, results: dict) -> dict:
    """Ending payoff against the worst (prey) / best (predators) continuation stream."""
    out = {}
    for role, rows in _role_rows(env).items():
        end_sum = sum(float(r["end_sum"][rows].sum()) for r in results.values())
        end_count = sum(int(r["end_count"][rows].sum()) for r in results.values())
        visited = sum(int(r["visited"][rows].sum()) for r in results.values())
        worst = min(float(r["worst_to_go"][rows].min()) for r in results.values())
        best = max(float(r["best_to_go"][rows].max()) for r in results.values())
        out[role] = {
            "ending_payoff": end_sum / end_count if end_count else 0.0,
            "ending_events": end_count,
            "visited_states": visited,
            "worst_continuation": worst if visited else None,
            "best_continuation": best if visited else None,
        }
    return out


def _flag(kind: str, message: str, **where: Any) -> dict[str, Any]:
    return {"kind": kind, "message": message, **where}


def _flags(env: GridWorld, params: EnvParams, report: dict, variants: list[_Variant],
           settings: AuditSettings) -> list[dict]:
    flags: list[dict] = []
    weights, applies_to = report["weights"], report["applies_to"]
    policies = report["policies"]
    rates = report["fire_rates"]
    n_episodes = settings.episodes * len(policies)

    # Terms and components that never fired.
    for term in env.reward_terms:
        if weights[term] == 0:
            continue
        for role in applies_to[term]:
            if rates[term][role] == 0:
                flags.append(_flag("dead_term", f"{term} never paid {ROLE_TITLES[role]} anything in "
                                   f"{n_episodes} episodes", term=term, role=role))
    term_params = params.reward.term_params
    for var in variants:
        name = f"{var.term}.{var.component.param}"
        value = float(term_params[var.term][var.component.param])
        if weights[var.term] == 0 or value == 0:
            continue
        if all(r == 0 for r in rates[name].values()):
            hint = var.component.dead_hint
            if var.component.param == "obstacle_penalty" and \
                    not env.layout.block_agents_by_obstacles:
                hint = ""
            flags.append(_flag("dead_term", f"{name} never fired in {n_episodes} episodes"
                               + (f": {hint}" if hint else ""), term=var.term,
                               component=var.component.param))

    # A term that dominates a role's return under every policy pair.
    for role in _role_rows(env):
        active = [t for t in env.reward_terms if weights[t] != 0 and role in applies_to[t]]
        if len(active) < 2:
            continue
        for term in active:
            shares = []
            for p in policies:
                mags = gross_magnitudes(p["returns"][role], active)
                total = sum(mags.values())
                if total > 0:
                    shares.append(mags[term] / total)
            if shares and min(shares) >= settings.dominance:
                flags.append(_flag(
                    "dominant_term", f"{term} carries {100 * min(shares):.0f}-"
                    f"{100 * max(shares):.0f}% of the {ROLE_TITLES[role]}' absolute return under every "
                    f"policy pair: the other terms barely matter", term=term, role=role))

    # Shaping share: flagged when shaping carries most of a role's pay in most policy pairs.
    for role in _role_rows(env):
        shares = sorted(p["shaping_share"][role] for p in policies)
        median = float(np.median(shares))
        if median > settings.shaping_share:
            flags.append(_flag(
                "shaping_share", f"shaping terms carry {100 * median:.0f}% (median over "
                f"policy pairs; {100 * shares[0]:.0f}-{100 * shares[-1]:.0f}%) of what the "
                f"{ROLE_TITLES[role]} are paid or charged, above {100 * settings.shaping_share:.0f}%: the "
                f"task reward is the minority", role=role, share=median))

    # Shaping terms that are not potential-based.
    for term in env.reward_terms:
        if term != TASK_TERM and weights[term] != 0 and not get_term(term).potential:
            flags.append(_flag(
                "not_potential", f"{term} is a direct shaping term, not potential-based: it "
                f"can change which policy is optimal", term=term))

    flags.extend(_ordering_flags(policies, settings))
    flags.extend(_termination_flags(report["termination"]))
    return flags


def _ordering_flags(policies: list[dict], settings: AuditSettings) -> list[dict]:
    """Against a fixed opponent: worse on capture rate (for the role) but better paid."""
    flags = []
    margin = settings.ordering_margin
    for role, own, other, sign in (("predator", "predator_policy", "prey_policy", 1),
                                   ("prey", "prey_policy", "predator_policy", -1)):
        if not all(role in p["returns"] for p in policies):
            continue
        for a, b in itertools.permutations(policies, 2):
            if a[other] != b[other]:
                continue
            # task score: capture rate for predators, 1 - capture rate for prey
            worse_task = sign * (b["capture_rate"] - a["capture_rate"]) > margin
            gap = a["returns"][role]["total"] - b["returns"][role]["total"]
            noise = 2 * np.hypot(a["return_se"][role], b["return_se"][role])
            if worse_task and gap > noise:
                flags.append(_flag(
                    "ordering", f"{ROLE_TITLES[role]}: {a['name']} captures in "
                    f"{100 * a['capture_rate']:.0f}% of episodes against "
                    f"{100 * b['capture_rate']:.0f}% for {b['name']}, yet pays the {ROLE_TITLES[role]} "
                    f"more ({a['returns'][role]['total']:.2f} vs "
                    f"{b['returns'][role]['total']:.2f}): the reward prefers the worse "
                    f"{role} policy", role=role, better_paid=a["name"], better_task=b["name"]))
    return flags


def _termination_flags(termination: dict) -> list[dict]:
    flags = []
    prey = termination.get("prey")
    if prey and prey["worst_continuation"] is not None \
            and prey["ending_payoff"] > prey["worst_continuation"]:
        flags.append(_flag(
            "early_termination", f"prey: being captured pays {prey['ending_payoff']:.2f}, more "
            f"than the worst continuation seen ({prey['worst_continuation']:.2f} discounted "
            f"from a visited state): prey gain by getting caught", role="prey"))
    pred = termination.get("predator")
    if pred and pred["best_continuation"] is not None \
            and pred["best_continuation"] > pred["ending_payoff"]:
        flags.append(_flag(
            "stalling", f"predators: capturing pays {pred['ending_payoff']:.2f}, less than the "
            f"best continuation seen ({pred['best_continuation']:.2f} discounted from a "
            f"visited state, capture payoffs excluded): predators gain by not capturing",
            role="predator"))
    return flags


# ------------------------------------------------------------------------- rendering
def format_report(report: dict) -> str:
    """The audit as text tables (seeds/002's layout: rows are policies, columns terms)."""
    lines = []
    layout = report["layout"]
    plural = "" if layout["predators"] == 1 else "s"
    lines.append(f"Reward audit of {report['config'] or 'package defaults'} "
                 f"(hash {report['config_hash']}): {layout['predators']} predator{plural} vs "
                 f"{layout['prey']} prey, {layout['size']}x{layout['size']}, "
                 f"{layout['obstacles']} obstacles, terms {', '.join(report['terms'])}")
    lines.append(f"{report['episodes']} episodes per policy pair on held-out seeds "
                 f"{report['seeds'][0]}-{report['seeds'][1]}, up to {report['max_turns']} "
                 f"turns; returns discounted at gamma={report['gamma']:g}, mean per agent")
    policies = report["policies"]
    name_width = max(12, *(len(p["name"]) for p in policies)) + 2
    rates = report["fire_rates"]
    for role in ROLES:
        if not policies or role not in policies[0]["returns"]:
            continue
        columns = []
        for name in policies[0]["returns"][role]:
            if name == "total":
                continue
            if "." not in name:
                if role in report["applies_to"][name]:
                    columns.append((name, name))
            elif rates[name][role] > 0 or not any(rates[name].values()):
                # a component that paid this role, or one that never fired for anybody
                columns.append((name, "." + COMPONENT_LABELS.get(name, name.split(".")[1])))
        heads = [h for _, h in columns] + ["total", "shaping"]
        widths = [max(9, len(h) + 2) for h in heads]
        lines.append("")
        lines.append(f"{ROLE_TITLES[role]}: discounted return per agent (.x: components of "
                     f"base, isolated)")
        lines.append("policy".ljust(name_width) + "".join(h.rjust(w) for h, w in
                                                            zip(heads, widths)))
        for p in policies:
            values = [f"{p['returns'][role][c]:.2f}" for c, _ in columns]
            values += [f"{p['returns'][role]['total']:.2f}",
                       f"{100 * p['shaping_share'][role]:.0f}%"]
            lines.append(p["name"].ljust(name_width)
                         + "".join(v.rjust(w) for v, w in zip(values, widths)))
    lines.append("")
    lines.append("episodes".ljust(name_width) + "capture rate".rjust(14)
                 + "captures/ep".rjust(13) + "length".rjust(9) + "to capture".rjust(12)
                 + "terminated".rjust(12) + "truncated".rjust(11))
    for p in policies:
        to_capture = p["mean_steps_to_capture"]
        lines.append(p["name"].ljust(name_width) + f"{100 * p['capture_rate']:.1f}%".rjust(14)
                     + f"{p['captures_per_episode']:.2f}".rjust(13)
                     + f"{p['mean_length']:.1f}".rjust(9)
                     + ("-" if to_capture is None else f"{to_capture:.1f}").rjust(12)
                     + str(p["ended"]["terminated"]).rjust(12)
                     + str(p["ended"]["truncated"]).rjust(11))
    lines.append("")
    lines.append("termination check, worst case over visited states (capture payoffs "
                 "excluded from the continuation):")
    for role, t in report["termination"].items():
        if t["worst_continuation"] is None:
            continue
        if role == "prey":
            lines.append(f"  prey: being captured pays {t['ending_payoff']:.2f}; worst "
                         f"continuation {t['worst_continuation']:.2f}")
        else:
            lines.append(f"  predators: capturing pays {t['ending_payoff']:.2f}; best "
                         f"continuation without it {t['best_continuation']:.2f}")
    lines.append("")
    flags = report["flags"]
    lines.append(f"flags ({len(flags)}):" if flags else "flags: none")
    for f in flags:
        lines.append(f"  [{f['kind']}] {f['message']}")
    return "\n".join(lines)
