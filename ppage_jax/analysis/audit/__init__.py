"""Reward audit: check a reward design with baseline policies before anyone trains on it.

Every combination of a predator baseline (``noop``, ``random``, ``chase``) and a prey baseline
(``noop``, ``random``, ``evade``) plays ``episodes`` episodes on a held-out block of reset
seeds (the same layouts for every combination, one episode per grid). The audit reports, per
combination and role, the discounted return of every term (and of the base term's components,
isolated by zeroing the others), the capture rate, the time to capture censored at the step
limit (restricted mean and Kaplan-Meier median, with bootstrap CIs) and how the episodes
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
  all visited states.

The rollouts run as one compiled program per config: the policy combination is a traced
index, and the reward variants that isolate components are a vmapped axis of EnvParams.

Modules: ``settings`` (what is played and judged), ``rollouts`` (the compiled episodes),
``summary`` (the report dict and :func:`audit_rewards`), ``flags``, ``report`` (text).
"""

from ppage_jax.analysis.audit.report import format_audit_report
from ppage_jax.analysis.audit.settings import AuditSettings, parse_policy_pairs
from ppage_jax.analysis.audit.summary import audit_rewards
from ppage_jax.defaults import AUDIT_SEED

__all__ = [
    "AUDIT_SEED",
    "AuditSettings",
    "audit_rewards",
    "format_audit_report",
    "parse_policy_pairs",
]
