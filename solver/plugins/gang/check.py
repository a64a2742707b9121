"""Gangs on a plan's final state: a PodGroup that exists places none of its window members, or
enough that placed plus running members (less the plan's victims) reach minMember.

``minResources`` is not checked here: it is no property of a final state. Coscheduling asks it
once, at PreFilter, of the room the cluster has *then*; once admitted, a group's members stay
bound however full the cluster gets, and minResources may well exceed what the members
themselves request (room kept for pods that come later), so a legal final state can hold a
running gang with far less free room than its minResources. What a plan must respect is an
admission at the moment of the decision, which the engines answer (``min_resources``)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from models.snapshot import pod_group_key

from ...framework import names
from .permit import reaches_min_member

if TYPE_CHECKING:
    from ...plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    """A PodGroup places none of its window members, or reaches minMember with its running ones."""
    placed_by_group: dict[str, list[str]] = defaultdict(list)
    for pod, _ in replay.placed():
        if pod.group is not None:
            placed_by_group[pod.group].append(pod.key)
    if not placed_by_group:
        return
    evicted = {v.pod.key for v in replay.victims}
    running: Counter[str] = Counter()
    for bound in replay.ctx.snapshot.bound_pods():
        group = pod_group_key(bound)
        if group in placed_by_group and bound.key not in evicted:
            running[group] += 1
    for group, members in sorted(placed_by_group.items()):
        pod_group = replay.ctx.pod_groups.get(group)
        if pod_group is None:
            continue
        need = pod_group.spec.min_member
        have = len(members) + running[group]
        if not reaches_min_member(len(members), running[group], need):
            replay.report(
                f"gang: PodGroup {group} places {len(members)} pod(s) ({names(members)}) which with its "
                f"{running[group]} running member(s) make {have} of minMember {need}"
            )
