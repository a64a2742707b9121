"""Gangs: coscheduling PodGroups placed all-or-nothing.

A pod belongs to the PodGroup named by its ``scheduling.x-k8s.io/pod-group`` label in its own
namespace. In a window, a group places no pod at all or enough that placed plus already-running
members reach ``minMember``. A group with fewer pods in existence than ``minMember`` waits, as the
coscheduling PreFilter makes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ortools.sat.python import cp_model

from models.objects import PodGroup

from .info import PodInfo

NAME = "Coscheduling"


def not_enough_siblings(pod: PodInfo, count: int, min_member: int) -> str:
    """Coscheduling PreFilter's message when fewer group pods exist than minMember."""
    return (
        f"pre-filter pod {pod.pod.metadata.name} cannot find enough sibling pods, "
        f"current pods number: {count}, minMember of group: {min_member}"
    )


# A pod labelled for a PodGroup that does not exist (Permit rejects it).
REASON_NOT_FOUND = "PodGroup not found"


def rejected(group: str, placed: int, need: int) -> str:
    """Why a gang placed nothing: the whole group could not land together."""
    return (
        f"PodGroup {group} gets rejected: only {placed} of the {need} member(s) it still needs "
        f"could be placed together, so none is placed (all-or-nothing)"
    )


@dataclass(eq=False)
class Gang:
    key: str
    group: Optional[PodGroup]
    running: int  # members already bound (non-terminal)
    existing: int  # members in existence (bound or pending, non-terminal)
    members: list[PodInfo] = field(default_factory=list)  # window members, queue order

    @property
    def min_member(self) -> int:
        return self.group.spec.min_member if self.group is not None else 0

    @property
    def need(self) -> int:
        """Window members that must place for the group to reach minMember (0: any number)."""
        return max(0, self.min_member - self.running)

    def blocked(self, pod: PodInfo) -> Optional[str]:
        """Why no member can be placed in this window at all, if that is so."""
        if self.group is None:
            return REASON_NOT_FOUND
        if self.existing < self.min_member:
            return not_enough_siblings(pod, self.existing, self.min_member)
        if len(self.members) < self.need:
            return not_enough_siblings(pod, self.running + len(self.members), self.min_member)
        return None


def collect(ctx) -> dict[str, Gang]:
    """Every gang with a member in the window, with its running and existing member counts."""
    gangs: dict[str, Gang] = {}
    for pod in ctx.window:
        if pod.group is None:
            continue
        gang = gangs.get(pod.group)
        if gang is None:
            gang = gangs[pod.group] = Gang(pod.group, ctx.pod_groups.get(pod.group), 0, 0)
        gang.members.append(pod)
    if not gangs:
        return gangs
    from models.snapshot import pod_group_key

    for pod in ctx.snapshot.pods:
        key = pod_group_key(pod)
        gang = gangs.get(key) if key else None
        if gang is None or pod.is_terminal:
            continue
        gang.existing += 1
        if pod.spec.node_name and key:
            gang.running += 1
    return gangs


# --------------------------------------------------------------------------- CP-SAT encoding


def encode(wm, gangs: dict[str, Gang]) -> None:
    """All-or-nothing: a gang's window members place 0 pods or at least ``need`` of them."""
    for gang in gangs.values():
        if gang.need <= 0:
            continue
        placed = [wm.placed[c.id] for c in wm.classes if c.rep.group == gang.key and not isinstance(wm.placed[c.id], int)]
        if not placed:
            continue
        total = len(gang.members)
        runs = wm.model.new_bool_var(f"gang[{gang.key}]")
        expr = cp_model.LinearExpr.sum(placed)
        # Running members evicted (by other preemptors) stop counting toward minMember.
        evicted = [var for key, var in wm.evict.items() if wm.evict_pod[key][0].group == gang.key]
        if evicted:
            expr = expr - cp_model.LinearExpr.sum(evicted)
        wm.model.add(expr >= gang.need * runs - len(evicted) * (1 - runs))
        wm.model.add(cp_model.LinearExpr.sum(placed) <= total * runs)
