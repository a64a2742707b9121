"""Re-packing plans out: the JSON contract, the same data as YAML, a table, and a picture.

JSON keys are a contract for scripts (only ever added, never renamed)::

    {"moves": [{"pod": "ns/name", "from": "node-a", "to": "node-b", "step": 1, "buffer": false}],
     "freed_nodes": ["node-a"],
     "before": {"active_nodes": 12, "cost": 12.0}, "after": {"active_nodes": 4, "cost": 4.0},
     "lower_bound_nodes": 4, "stats": {"status": "OPTIMAL", "wall_time_s": 1.2, ...}, ...}

The table is for people and may change. The picture (``--plot``) needs matplotlib, the optional
``plot`` extra.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from solver.repack import RepackResult

from .output import _columns, _count

__all__ = ["PlotUnavailable", "dump_repack", "repack_json", "repack_table", "write_plot"]

_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# Utilisation figures in the JSON: fractions with this many decimals.
DECIMALS = 4


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def node_state(node) -> str:
    if node.freed:
        return "freed"
    if node.busy_after:
        return "kept" if node.kept else "active"
    return "empty"


def repack_json(result: RepackResult) -> dict[str, Any]:
    names = result.node_names
    return {
        "moves": [
            {"pod": s.pod, "from": names[s.source], "to": names[s.target], "step": s.number, "buffer": s.buffer}
            for s in result.steps
        ],
        "freed_nodes": list(result.freed_nodes),
        "before": {"active_nodes": result.before_active, "cost": result.before_cost},
        "after": {"active_nodes": result.after_active, "cost": result.after_cost},
        "lower_bound_nodes": result.lower_bound_nodes,
        "stats": dict(result.stats),
        "moved_pods": result.moved_pods,
        "gap_nodes": result.gap_nodes,
        "lower_bounds": {
            "per_resource": dict(result.per_resource_bounds),
            "lp": result.lp_bound,
            "solver": result.solver_bound_nodes,
        },
        "nodes": [
            {
                "name": n.name,
                "state": node_state(n),
                "cost": n.cost,
                "cpu_before": round(n.utilisation("cpu", "before"), DECIMALS),
                "cpu_after": round(n.utilisation("cpu", "after"), DECIMALS),
                "memory_before": round(n.utilisation("memory", "before"), DECIMALS),
                "memory_after": round(n.utilisation("memory", "after"), DECIMALS),
                "pinned_by": n.pinned_by,
                "pinned": [{"pod": pod, "reason": reason} for pod, reason in n.pins],
            }
            for n in result.nodes
        ],
        "unmovable": dict(sorted(result.unmovable.items())),
        "notes": list(result.notes),
        "blocked_pending": list(result.blocked_pending),
        "blocked_pending_reasons": [{"pod": k, "reason": v} for k, v in sorted(result.blocked_pending_reasons.items())],
        "runbook": [_action_json(a) for a in result.runbook],
    }


def command(action) -> str:
    """The kubectl command for one runbook action (evictions go through the Eviction API, which
    honours PodDisruptionBudgets; ``kubectl delete pod`` would not)."""
    if action.kind == "cordon":
        return f"kubectl cordon {action.node}"
    if action.kind == "remove":
        return f"kubectl drain {action.node} --ignore-daemonsets && kubectl delete node {action.node}"
    namespace, _, name = action.pod.partition("/")
    body = ('{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s","namespace":"%s"}}' % (name, namespace))
    return f"echo '{body}' | kubectl create --raw /api/v1/namespaces/{namespace}/pods/{name}/eviction -f -"


def _action_json(action) -> dict[str, Any]:
    out: dict[str, Any] = {"action": action.kind}
    if action.kind == "evict":
        out.update({"step": action.step, "pod": action.pod, "from": action.source, "to": action.target,
                    "buffer": action.buffer})
    else:
        out["node"] = action.node
    out["waits_for"] = action.waits_for
    out["command"] = command(action)
    return out


def runbook_lines(result: RepackResult) -> list[str]:
    if not result.steps:
        return []
    lines = ["RUNBOOK (in order; each line waits for the one before it):"]
    for i, action in enumerate(result.runbook, 1):
        if action.kind == "cordon":
            what = f"cordon {action.node} (to be freed: nothing new may land on it)"
        elif action.kind == "evict":
            what = f"step {action.step}: evict {action.pod} from {action.source}" + (" (to a buffer node)" if action.buffer else "")
        else:
            what = f"remove {action.node} (or let cluster-autoscaler scale it down)"
        lines.append(f"  {i:>3}. {what}")
        lines.append(f"       $ {command(action)}")
        if action.kind == "evict":
            lines.append(f"       wait for: {action.waits_for}")
    return lines


def dump_repack(result: RepackResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(repack_json(result), indent=2) + "\n"
    if fmt == "yaml":
        return yaml.dump(repack_json(result), Dumper=_YAML_DUMPER, sort_keys=False, default_flow_style=False)
    if fmt == "table":
        return repack_table(result)
    raise ValueError(f"unknown output format {fmt!r}")


def _objective(stats: dict) -> str:
    """The objective in its own unit: empty nodes after the plan (or what they cost), of which
    some were empty already, and the solver's bound on it."""
    value, bound = stats.get("objective_value_units"), stats.get("objective_bound_units")
    if value is None:
        return f"objective {stats['objective']}: no value"
    what = "nodes empty after the plan" if stats["objective"] == "nodes" else "cost of the nodes empty after the plan"
    already = stats.get("empty_before")
    note = f", {already} empty before" if already else ""
    shown = f"{bound:g}" if bound is not None else "-"
    return f"objective: {value:g} {what}{note} (bound {shown})"


def _pct(value: float) -> str:
    return f"{value:.0%}"


def repack_table(result: RepackResult) -> str:
    names = result.node_names
    lines: list[str] = []
    buffers = sum(1 for s in result.steps if s.buffer)
    head = f"MOVES: {_count(len(result.steps), 'step')} ({_count(result.moved_pods, 'pod')} moved"
    head += f", {buffers} via a buffer node)" if buffers else ")"
    lines.append(head)
    if result.steps:
        rows = [
            (str(s.number), s.pod, names[s.source], names[s.target] + ("  (buffer)" if s.buffer else ""))
            for s in result.steps
        ]
        lines += _columns(("STEP", "POD", "FROM", "TO"), rows)
    lines.append("")
    freed = ", ".join(result.freed_nodes) if result.freed_nodes else "-"
    lines.append(f"FREED: {_count(len(result.freed_nodes), 'node')}: {freed}")
    lines.append("")
    rows = []
    for n in result.nodes:
        state = node_state(n)
        if n.pinned_by and not n.freed:
            state += f" ({n.pinned_by})"
        rows.append(
            (
                n.name,
                f"{_pct(n.utilisation('cpu', 'before'))} -> {_pct(n.utilisation('cpu', 'after'))}",
                f"{_pct(n.utilisation('memory', 'before'))} -> {_pct(n.utilisation('memory', 'after'))}",
                state,
            )
        )
    book = runbook_lines(result)
    if book:
        lines += [*book, ""]
    lines.append("NODES (requests / allocatable, before -> after):")
    lines += _columns(("NODE", "CPU", "MEMORY", "STATE"), rows)
    if result.unmovable:
        lines.append("")
        total = sum(result.unmovable.values())
        lines.append(f"NOT MOVED: {_count(total, 'pod')}: "
                     + "; ".join(f"{reason}: {count}" for reason, count in sorted(result.unmovable.items())))
    lines.append("")
    pr = result.per_resource_bounds
    lp = "-" if result.lp_bound is None else f"{result.lp_bound:g}"
    proven = "-" if result.solver_bound_nodes is None else str(result.solver_bound_nodes)
    lines.append(
        f"TOTALS: active nodes {result.before_active} -> {result.after_active} | cost {result.before_cost:g} -> "
        f"{result.after_cost:g} | moves {len(result.steps)}"
    )
    lines.append(
        f"LOWER BOUND: {result.lower_bound_nodes} nodes (cpu {pr.get('cpu', 0)}, memory {pr.get('memory', 0)}, "
        f"pods {pr.get('pods', 0)}, LP {lp}, CP-SAT {proven}) | gap {result.gap_nodes} node(s)"
    )
    s = result.stats
    lines.append(
        f"solver: status {s['status']} | {_objective(s)} | "
        f"wall {s['wall_time_s']:.2f}s | {s['variables']} variables, {s['pod_classes']} pod classes"
    )
    for note in result.notes:
        lines.append(f"note: {note}")
    for pod in result.blocked_pending:
        lines.append(f"blocked pending: {pod}: {result.blocked_pending_reasons.get(pod, 'fits today, not after the plan')}")
    return "\n".join(lines) + "\n"


# A freed node is the plan's gain (green); a node running only DaemonSet pods is not in use
# before or after (pale), whatever its DaemonSet pods request; active nodes are blue.
ACTIVE_COLOR, FREED_COLOR, EMPTY_COLOR = "#1f77b4", "#2ca02c", "#d9d9d9"
# Longest node name drawn under a bar: cloud node names (ip-10-0-12-34.eu-west-1.compute.internal)
# would take a third of the figure.
MAX_LABEL = 18


def _after_color(node) -> str:
    if node.freed:
        return FREED_COLOR
    return ACTIVE_COLOR if node.busy_after else EMPTY_COLOR


def short_name(name: str) -> str:
    """``name`` cut in the middle to MAX_LABEL characters: both ends tell nodes apart."""
    if len(name) <= MAX_LABEL:
        return name
    head = (MAX_LABEL - 1) // 2
    return name[:head] + "…" + name[-(MAX_LABEL - 1 - head):]


def write_plot(result: RepackResult, path: str) -> None:
    """Per-node CPU and memory utilisation before and after, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(
            "--plot needs matplotlib, which is not installed: pip install 'cpsat-scheduler[plot]'"
        ) from exc
    nodes = sorted(result.nodes, key=lambda n: (-n.utilisation("cpu", "before"), n.name))
    xs = list(range(len(nodes)))
    many = len(nodes) > 60
    fig, axes = plt.subplots(2, 1, figsize=(max(8.0, min(16.0, 0.25 * len(nodes))), 7.5), sharex=True)
    for ax, resource, label in ((axes[0], "cpu", "CPU"), (axes[1], "memory", "memory")):
        before = [100 * n.utilisation(resource, "before") for n in nodes]
        after = [100 * n.utilisation(resource, "after") for n in nodes]
        width = 1.0 if many else 0.4
        shift = 0 if many else width / 2
        ax.bar([x - shift for x in xs], before, width=width, color="#b0b0b0", label="before")
        colors = [_after_color(n) for n in nodes]
        ax.bar([x + shift for x in xs], after, width=width * (0.5 if many else 1), color=colors, label="after")
        ax.set_ylabel(f"{label} requested (%)")
        ax.set_ylim(0, 105)
        ax.set_xlim(-1, len(nodes))
        ax.grid(axis="y", alpha=0.3)
    from matplotlib.patches import Patch

    axes[0].legend(
        handles=[
            Patch(color="#b0b0b0", label="before"),
            Patch(color=ACTIVE_COLOR, label="after, active"),
            Patch(color=FREED_COLOR, label="after, freed (DaemonSet pods only: remove it)"),
            Patch(color=EMPTY_COLOR, label="after, empty before and after (DaemonSet pods only)"),
        ],
        loc="upper right",
    )
    axes[0].set_title(
        f"Re-packing: {result.before_active} -> {result.after_active} active nodes, "
        f"{len(result.freed_nodes)} freed, {len(result.steps)} moves (lower bound {result.lower_bound_nodes})"
    )
    if many:
        axes[1].set_xlabel(f"{len(nodes)} nodes, busiest first (before)")
        axes[1].set_xticks([])
    else:
        axes[1].set_xticks(xs)
        axes[1].set_xticklabels([short_name(n.name) for n in nodes], rotation=60, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
