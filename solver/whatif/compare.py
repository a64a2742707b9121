"""Two plans side by side: what a decision achieves (pods and gangs placed per priority,
evictions, nodes in use) and what differs between today's plan and the changed cluster's."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from models.plan import Plan
from models.snapshot import ClusterSnapshot, holds_node, pod_group_key


@dataclass(frozen=True)
class Outcome:
    """What one plan does on its snapshot."""

    placed: dict[str, str]  # pending pod -> node
    left_out: dict[str, str]  # pending pod -> kube-scheduler's reason
    evicted: dict[str, str]  # running pod -> node it leaves
    placed_by_priority: dict[int, tuple[int, int]]  # priority -> (placed, pending)
    gangs: dict[str, bool]  # gang key -> every pending member placed
    gang_priority: dict[str, int]  # gang key -> its members' highest priority
    nodes_used: int  # nodes holding at least one pod after the plan
    nodes: int
    status: str

    def gangs_by_priority(self) -> dict[int, tuple[int, int]]:
        """priority -> (gangs placed whole, gangs), a gang counted at its members' highest priority."""
        out: dict[int, list[int]] = {}
        for gang, whole in self.gangs.items():
            entry = out.setdefault(self.gang_priority.get(gang, 0), [0, 0])
            entry[0] += whole
            entry[1] += 1
        return {p: (a, b) for p, (a, b) in out.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "placed": len(self.placed),
            "pending": len(self.placed) + len(self.left_out),
            "evictions": len(self.evicted),
            "nodesUsed": self.nodes_used,
            "nodes": self.nodes,
            "solverStatus": self.status,
            "placedByPriority": [
                {"priority": p, "placed": placed, "pending": pending}
                for p, (placed, pending) in sorted(self.placed_by_priority.items(), reverse=True)
            ],
            "gangsPlaced": sum(self.gangs.values()),
            "gangs": len(self.gangs),
            "gangsByPriority": [
                {"priority": p, "placed": placed, "gangs": total}
                for p, (placed, total) in sorted(self.gangs_by_priority().items(), reverse=True)
            ],
            "assignments": dict(sorted(self.placed.items())),
            "unschedulable": dict(sorted(self.left_out.items())),
            "evicted": dict(sorted(self.evicted.items())),
        }


def outcome(snapshot: ClusterSnapshot, plan: Plan) -> Outcome:
    placed = plan.assignment_map()
    left_out = {u.pod: u.message for u in plan.unschedulable}
    evicted = {p.pod: p.node for p in plan.preemptions}
    by_priority: dict[int, list[int]] = {}
    gang_members: dict[str, list[bool]] = {}
    gang_priority: dict[str, int] = {}
    for key in list(placed) + list(left_out):
        pod = snapshot.pod(key)
        priority = (pod.spec.priority or 0) if pod is not None else 0
        entry = by_priority.setdefault(priority, [0, 0])
        entry[0] += key in placed
        entry[1] += 1
        gang = pod_group_key(pod) if pod is not None else None
        if gang is not None:
            gang_members.setdefault(gang, []).append(key in placed)
            gang_priority[gang] = max(gang_priority.get(gang, priority), priority)
    used = Counter(p.spec.node_name for p in snapshot.pods if holds_node(p) and p.key not in evicted)
    used.update(placed.values())
    return Outcome(
        placed=placed, left_out=left_out, evicted=evicted,
        placed_by_priority={p: (a, b) for p, (a, b) in by_priority.items()},
        gangs={g: all(m) for g, m in gang_members.items()}, gang_priority=gang_priority,
        nodes_used=sum(1 for n in snapshot.nodes if used.get(n.metadata.name)),
        nodes=len(snapshot.nodes), status=plan.stats.status,
    )


@dataclass(frozen=True)
class Difference:
    """What the changed cluster's plan does differently from today's. A pod a change sent back
    to the queue (drain, remove-node) counts as moved when it is placed again, and as newly
    left out when it is not; a pod a change deleted is listed as removed, whether it ran or
    waited (a pending pod deleted changes the count of pods placed: the list says why)."""

    newly_placed: dict[str, str] = field(default_factory=dict)  # left out today -> node
    newly_left_out: list[str] = field(default_factory=list)  # placed or running today
    moved: dict[str, tuple[str, str]] = field(default_factory=dict)  # pod -> (today's node, what-if's)
    evictions_added: dict[str, str] = field(default_factory=dict)
    evictions_dropped: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)  # pods (running or pending, not finished) a change deleted

    def to_json(self) -> dict[str, Any]:
        return {
            "newlyPlaced": dict(sorted(self.newly_placed.items())),
            "newlyLeftOut": sorted(self.newly_left_out),
            "moved": {k: {"today": a, "whatIf": b} for k, (a, b) in sorted(self.moved.items())},
            "evictionsAdded": dict(sorted(self.evictions_added.items())),
            "evictionsDropped": dict(sorted(self.evictions_dropped.items())),
            "removed": sorted(self.removed),
        }


def _where_today(snapshot: ClusterSnapshot, today: Outcome) -> dict[str, str]:
    """Every pod's node after today's plan: running (not evicted) or placed."""
    where = {p.key: p.spec.node_name for p in snapshot.pods if holds_node(p) and p.key not in today.evicted}
    where.update(today.placed)
    return where


def difference(snapshot: ClusterSnapshot, today: Outcome, changed_snapshot: ClusterSnapshot,
               changed: Outcome) -> Difference:
    where = _where_today(snapshot, today)
    still = set(changed_snapshot.pod_position)
    return Difference(
        newly_placed={k: n for k, n in changed.placed.items() if k in today.left_out},
        newly_left_out=[k for k in changed.left_out if k in where],
        moved={k: (where[k], n) for k, n in changed.placed.items() if k in where and where[k] != n},
        evictions_added={k: n for k, n in changed.evicted.items() if k not in today.evicted},
        evictions_dropped={k: n for k, n in today.evicted.items() if k not in changed.evicted and k in still},
        removed=_removed(snapshot, still),
    )


def _removed(snapshot: ClusterSnapshot, still: set[str]) -> list[str]:
    """The pods of ``snapshot`` the changed one no longer has: running or pending, placed by
    today's plan or not (a finished pod is no workload, and nothing counts it)."""
    return sorted(p.key for p in snapshot.pods if not p.is_terminal and p.key not in still)
