"""The audit as text: per role a table of discounted returns per term and component, the
episodes table (capture rate, censored time to capture, how episodes ended), the termination
check and the flags."""

from __future__ import annotations

from ppage_jax.analysis.audit.flags import describe_margin
from ppage_jax.analysis.audit.settings import COMPONENT_LABELS, ROLE_TITLES
from ppage_jax.defaults import ROLES


def format_audit_report(report: dict) -> str:
    """The audit as text tables (rows are policies, columns are terms)."""
    lines = []
    layout = report["layout"]
    plural = "" if layout["predators"] == 1 else "s"
    lines.append(
        f"Reward audit of {report['config'] or 'package defaults'} "
        f"(hash {report['config_hash']}): {layout['predators']} predator{plural} vs "
        f"{layout['prey']} prey, {layout['size']}x{layout['size']}, "
        f"{layout['obstacles']} obstacles, terms {', '.join(report['terms'])}"
    )
    lines.append(
        f"{report['episodes']} episodes per policy pair on held-out seeds "
        f"{report['seeds'][0]}-{report['seeds'][1]}, up to {report['max_turns']} "
        f"turns; returns discounted at gamma={report['gamma']:g}, mean per agent"
    )
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
                columns.append((name, "." + (COMPONENT_LABELS.get(name) or name.split(".")[1])))
        heads = [h for _, h in columns] + ["total", "shaping"]
        widths = [max(9, len(h) + 2) for h in heads]
        lines.append("")
        lines.append(
            f"{ROLE_TITLES[role]}: discounted return per agent (.x: components of base, isolated)"
        )
        lines.append(
            "policy".ljust(name_width)
            + "".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))
        )
        for p in policies:
            values = [f"{p['returns'][role][c]:.2f}" for c, _ in columns]
            values += [
                f"{p['returns'][role]['total']:.2f}",
                f"{100 * p['shaping_share'][role]:.0f}%",
            ]
            lines.append(
                p["name"].ljust(name_width)
                + "".join(v.rjust(w) for v, w in zip(values, widths, strict=True))
            )
    lines.append("")
    lines.append(
        f"episodes (time to capture censored at {report['max_turns']} turns: RMST = "
        f"restricted mean, KM = Kaplan-Meier median, '>{report['max_turns']}' when "
        f"under half are captured)"
    )
    lines.append(
        "policy".ljust(name_width)
        + "capture rate".rjust(14)
        + "captures/ep".rjust(13)
        + "RMST to capture".rjust(17)
        + "KM median".rjust(11)
        + "terminated".rjust(12)
        + "truncated".rjust(11)
    )
    for p in policies:
        median = p["km_median"]
        lines.append(
            p["name"].ljust(name_width)
            + f"{100 * p['capture_rate']:.1f}%".rjust(14)
            + f"{p['captures_per_episode']:.2f}".rjust(13)
            + f"{p['rmst']:.1f}".rjust(17)
            + (f">{report['max_turns']}" if median is None else f"{median:.0f}").rjust(11)
            + str(p["ended"]["terminated"]).rjust(12)
            + str(p["ended"]["truncated"]).rjust(11)
        )
    lines.append("")
    lines.append(
        "termination check, worst case over visited states (capture payoffs "
        "excluded from the continuation):"
    )
    for role, t in report["termination"].items():
        if t["worst_continuation"] is None:
            continue
        if role == "prey":
            lines.append(
                f"  prey: being captured pays {t['ending_payoff']:.2f}; worst "
                f"continuation {t['worst_continuation']:.2f}"
            )
        else:
            lines.append(
                f"  predators: capturing pays {t['ending_payoff']:.2f}; best "
                f"continuation without it {t['best_continuation']:.2f}"
            )
    lines.append("")
    lines.append(
        "stall margin (analytic, from the terms' bounds: the largest direct payment a "
        "sub-step minus the cost a sub-step; potential-based terms left out):"
    )
    for role, margin in report.get("stall_margin", {}).items():
        lines.append(f"  {ROLE_TITLES[role]}: {describe_margin(margin)}")
    lines.append("")
    flags = report["flags"]
    lines.append(f"flags ({len(flags)}):" if flags else "flags: none")
    for f in flags:
        lines.append(f"  [{f['kind']}] {f['message']}")
    return "\n".join(lines)
