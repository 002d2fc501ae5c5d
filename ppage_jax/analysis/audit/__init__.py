"""The reward audit: baseline policy pairs on held-out seeds, per-term returns and flags."""
from ppage_jax.analysis.audit.core import AuditSettings, audit_rewards, format_report

__all__ = ["AuditSettings", "audit_rewards", "format_report"]
