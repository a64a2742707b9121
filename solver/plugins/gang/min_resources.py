"""A PodGroup's ``spec.minResources``: coscheduling's PreFilter admission check.

Upstream (scheduler-plugins, ``core.PreFilter`` / ``CheckClusterResource``) admits a group's pods
only when the cluster's free room covers ``minResources`` plus one ``pods`` slot per minMember.
A node's free room is allocatable less requested, with the group's own pods taken off the node
first (members already running hold part of the group's minimum themselves); ``pods`` counts free
pod slots. The free room of every node in the snapshot is summed (cordoned or tainted nodes
included: the check is deliberately coarse, Filter does the rest). A failure is
UnschedulableAndUnresolvable, so preemption is not tried for it: victims chosen for other pods do
not count as freed room either, since upstream still sees them (terminating) in its snapshot.
Volcano's ``minResources`` reads into the same field and is checked the same way.

Two differences, both deliberate. A node over its allocatable contributes no room rather than
negative room (upstream subtracts node by node in list order, so the result would depend on the
order). And a group passes once per decision: upstream caches a passed group for a while so its
later members are not refused by the room its earlier members took; the window admits a gang at
its first member and every member follows that answer.

The greedy engine asks at the gang's turn, against the state the pods before it left (so it
counts what the window already placed). The CP-SAT model asks once, against the cluster at the
window's start (``Gang.refused`` from ``permit.collect``): a gang refused there places nothing.
That is a necessary condition for every queue order, never stricter than greedy's answer, so a
greedy plan is always a valid hint; the joint model may admit a gang that greedy's order refused.
"""

from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from models.objects import PodGroup
from models.quantity import format_quantity
from models.resources import PODS

from ...info import PodInfo
from ...state import ClusterState


def needed(group: PodGroup) -> dict[str, int]:
    """What the group asks the cluster to have free: ``minResources`` and a pod slot per
    minMember. Empty when ``minResources`` is unset: no check at all."""
    if not group.spec.min_resources:
        return {}
    need = dict(group.spec.min_resources)
    need[PODS] = group.spec.min_member  # upstream sets it, replacing any ``pods`` entry
    return need


def free_room(state: ClusterState, resources: list[str], own: Iterable[PodInfo],
              held: Iterable[tuple[PodInfo, int]] = ()) -> dict[str, int]:
    """The cluster's free room per resource: allocatable less requested on every node, with the
    ``own`` pods of ``state`` (the group's running members) taken off and the ``held`` pods
    ((pod, node) of victims already taken out of ``state``) counted as still there. A node over
    its allocatable adds nothing. A resource no node has is 0."""
    cols = [state.res_index.get(r) for r in resources]
    known = np.array([c for c in cols if c is not None], dtype=np.int64)
    free = state.free[:, known].copy()
    for pod in own:
        node = state.where.get(pod.key)
        if node is not None:
            free[node] += state.vector(pod)[known]
    for pod, node in held:
        free[node] -= state.vector(pod)[known]
    total = np.maximum(free, 0).sum(axis=0)
    out: dict[str, int] = {}
    i = 0
    for r, c in zip(resources, cols):
        out[r] = int(total[i]) if c is not None else 0
        i += c is not None
    return out


def gap(group: PodGroup, state: ClusterState, own: Iterable[PodInfo],
        held: Iterable[tuple[PodInfo, int]] = ()) -> dict[str, int]:
    """What the cluster lacks of the group's need (resource -> units short; empty: admitted)."""
    need = needed(group)
    if not need:
        return {}
    resources = sorted(need)
    room = free_room(state, resources, own, held)
    return {r: need[r] - room[r] for r in resources if need[r] > room[r]}


def short_of_room(group: str, short: dict[str, int]) -> str:
    """Why no member of a group is admitted: the cluster's free room misses its minResources."""
    parts = ", ".join(f"{r} {format_quantity(r, units)}" for r, units in sorted(short.items()))
    return (
        f"PodGroup {group} is not admitted: the cluster's free resources fall short of its "
        f"minResources (with a pod slot per minMember) by {parts} (resource gap)"
    )


def refusal(group: PodGroup, key: str, state: ClusterState, own: Iterable[PodInfo],
            held: Iterable[tuple[PodInfo, int]] = ()) -> Optional[str]:
    """The PreFilter answer: None when the group is admitted, else the message."""
    short = gap(group, state, own, held)
    return short_of_room(key, short) if short else None
