"""Plans out: the JSON contract, the same data as YAML, and a table for people.

JSON and YAML are ``Plan.to_json_dict()`` unchanged (keys are only ever added, never renamed), so
scripts can rely on them. The table is for reading in a terminal and may change at any time.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import yaml

from models import Plan

__all__ = ["FORMATS", "dump_plan", "plan_table"]

FORMATS = ("table", "json", "yaml")

_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_plan(plan: Plan, fmt: str) -> str:
    """The plan rendered as ``table``, ``json`` or ``yaml``, ending in a newline."""
    if fmt == "json":
        return json.dumps(plan.to_json_dict(), indent=2) + "\n"
    if fmt == "yaml":
        return yaml.dump(plan.to_json_dict(), Dumper=_YAML_DUMPER, sort_keys=False, default_flow_style=False)
    if fmt == "table":
        return plan_table(plan)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def plan_table(plan: Plan) -> str:
    """Assignments grouped by node, then preemptions, unschedulable pods and a stats line."""
    lines: list[str] = []
    by_node: dict[str, list[str]] = defaultdict(list)
    for a in plan.assignments:
        by_node[a.node].append(a.pod)
    nodes = len(by_node)
    lines.append(f"ASSIGNED: {_count(len(plan.assignments), 'pod')} on {_count(nodes, 'node')}")
    if by_node:
        rows: list[tuple[str, ...]] = []
        for node in sorted(by_node):
            for i, pod in enumerate(sorted(by_node[node])):
                rows.append((node if i == 0 else "", pod))
        lines += _columns(("NODE", "POD"), rows)

    if plan.preemptions:
        lines.append("")
        lines.append(f"PREEMPTED: {_count(len(plan.preemptions), 'pod')}")
        rows = [(p.node, p.pod, p.preemptor) for p in sorted(plan.preemptions, key=lambda p: (p.node, p.pod))]
        lines += _columns(("NODE", "VICTIM", "FOR"), rows)
    if plan.nominations:
        lines.append("")
        lines.append(f"NOMINATED: {_count(len(plan.nominations), 'pod')} (waiting for their victims to leave)")
        rows = [(n.node, n.pod) for n in sorted(plan.nominations, key=lambda n: (n.node, n.pod))]
        lines += _columns(("NODE", "POD"), rows)

    if plan.allocations:
        lines.append("")
        lines.append(f"DEVICES: {_count(len(plan.allocations), 'claim')} allocated (Dynamic Resource Allocation)")
        rows = []
        for entry in sorted(plan.allocations, key=lambda e: e.claim):
            results = entry.allocation.get("devices", {}).get("results", [])
            for i, r in enumerate(results):
                rows.append((entry.claim if i == 0 else "", ", ".join(entry.pods) if i == 0 else "",
                             r.get("request", ""), f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}"))
        lines += _columns(("CLAIM", "PODS", "REQUEST", "DEVICE"), rows)
    if plan.volume_bindings:
        lines.append("")
        lines.append(f"VOLUMES: {_count(len(plan.volume_bindings), 'claim')} bound for the first time")
        rows = [(b.node, b.claim, b.volume if b.volume is not None else "(provisioned)", b.pod)
                for b in sorted(plan.volume_bindings, key=lambda b: (b.node, b.claim))]
        lines += _columns(("NODE", "CLAIM", "VOLUME", "POD"), rows)

    if plan.unschedulable:
        lines.append("")
        lines.append(f"UNSCHEDULABLE: {_count(len(plan.unschedulable), 'pod')}")
        rows = [(u.pod, u.message) for u in sorted(plan.unschedulable, key=lambda u: u.pod)]
        lines += _columns(("POD", "REASON"), rows)

    if plan.gated:
        lines.append("")
        lines.append(f"GATED: {_count(len(plan.gated), 'pod')} (held by scheduling gates; not decided)")
        rows = [(g.pod, ", ".join(g.gates)) for g in sorted(plan.gated, key=lambda g: g.pod)]
        lines += _columns(("POD", "GATES"), rows)

    lines.append("")
    lines.append(stats_line(plan))
    return "\n".join(lines) + "\n"


def stats_line(plan: Plan) -> str:
    """``engine cpsat | status OPTIMAL | objective 12 | ...``: how the plan was made."""
    s = plan.stats
    parts = [f"engine {s.engine}", f"status {s.status}", f"objective {_num(s.objective)}"]
    if s.bound is not None:
        parts.append(f"bound {_num(s.bound)}")
    parts.append("gap -" if s.gap is None else f"gap {s.gap:.2%}")
    parts.append(f"wall {s.wall_time_s:.2f}s")
    if s.degraded:
        parts.append(f"degraded: {s.degraded}")
    if s.lns_rounds:
        gain = "" if s.lns_placed_gain is None else f", {s.lns_placed_gain:+d} placed and {s.lns_victims_change:+d} victim(s) against greedy"
        parts.append(f"search {s.lns_rounds} round(s), {s.lns_improved_rounds} improving{gain}")
    if s.fallback:
        parts.append(f"fallback yes ({s.fallback_reason})" if s.fallback_reason else "fallback yes")
    else:
        parts.append("fallback no")
        if s.engine == "cpsat" and s.plan_from == "greedy" and s.plan_reason:
            parts.append(s.plan_reason)  # greedy's plan on its merits: why no search ran
    if s.tier_bound and s.tier_gap is not None:
        tiers = ", ".join(f">= {int(t):,}: {most - s.tier_gap[t]:,} of at most {most:,}" for t, most in s.tier_bound.items())
        parts.append(f"placed by priority against CP-SAT's bound: {tiers}")
    return " | ".join(parts)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns, indented two spaces; the last column is never padded."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for row in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)] + [str(row[-1])]
        out.append(("  " + "  ".join(cells)).rstrip())
    return out
