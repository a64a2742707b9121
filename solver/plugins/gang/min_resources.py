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
counts what the window already placed). The CP-SAT model asks in two steps. A gang the room at
the window's start refuses (``Gang.refused`` from ``permit.collect``) places nothing. The gangs
left that set minResources are then ordered by queue, before every other pod, and each may run
only if the room its predecessors leave covers it (``encode``); they share one component. That
accepts only plans some order of PreFilter calls admits, and admits whatever greedy's order
does (but for a preemption corner, see ``encode``), so greedy's plan stays a valid hint; the
model may still admit a gang greedy refused, by placing other pods after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional

import numpy as np
from ortools.sat.python import cp_model

from models.objects import PodGroup
from models.quantity import format_quantity
from models.resources import PODS

from ...info import PodInfo
from ...state import ClusterState
from .encoding import GangEncoding

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


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


# --------------------------------------------------------------------------- CP-SAT encoding


def gated(gangs: dict) -> set[str]:
    """The window's gangs that set minResources and are not refused at its start: the ones
    ``encode`` orders. With fewer than two there is nothing to order."""
    return {key for key, g in gangs.items()
            if g.group is not None and needed(g.group) and g.members and g.blocked(g.members[0]) is None}


def encode(wm: WindowModel, enc: GangEncoding) -> None:
    """Room for the gated gangs taken in queue order (after ``permit.encode``: it reads the
    kinds' run counts; ``registry.WINDOW_ENCODERS`` keeps that order).

    A plan is admissible when some order of PreFilter calls admits every gang it places. Take
    the gated gangs first, in queue order, and every other pod after them: gang g is admitted
    if the room at the window's start (``Gang.refused`` already checked it alone) less what the
    gated gangs before it place still covers its need:

        runs[g]  ⇒  Σ_{h gated, before g} used[h, r]  ≤  room[g, r] − need[g, r]   for each r.

    A kind of interchangeable gangs is one step at its first gang's place; its gangs go one
    after another, and the last of them sees the others' use, at most used[kind] less the
    least that one running gang uses (its ``need`` cheapest members). Subtracting use linearly
    never overstates room (a node's room stops at zero), so every plan the model accepts has an
    order that admits it; greedy's own order admits no more, except where its preemption put
    more on a node than the node had free at the start. Prefix sums ``before[k, r]`` keep the
    encoding linear in the number of gated steps."""
    gangs = enc.gangs
    keys = gated(gangs)
    if len(keys) < 2:
        return
    state: ClusterState = wm.state
    present = {c.id for c in wm.classes if not isinstance(wm.placed[c.id], int)}
    position = {key: i for i, key in enumerate(gangs)}
    steps = []  # (position, name, classes, runs literal, need, room, discount per resource)
    in_kind: set[str] = set()
    for kind, runs in enc.runs:
        in_kind.update(g.key for g in kind.gangs)
        if kind.gangs[0].key not in keys:
            continue
        classes = [c for c in kind.classes if c.id in present]
        if not classes:
            continue
        need = needed(kind.gangs[0].group)
        room = free_room(state, sorted(need), ())
        runs_any = wm.model.new_bool_var(f"admitted[{kind.name}]")
        wm.model.add(runs <= len(kind.gangs) * runs_any)
        discount = {r: _cheapest(kind, classes, r, state) for r in need}
        steps.append((position[kind.gangs[0].key], kind.name, classes, runs_any, need, room, discount))
    for key in keys - in_kind:
        gang = gangs[key]
        classes = [c for c in wm.classes if c.rep.group == key and c.id in present]
        if not classes:
            continue
        assert gang.group is not None  # ``gated`` keeps only gangs whose group exists
        need = needed(gang.group)
        room = free_room(state, sorted(need), gang.own)
        admitted = wm.model.new_bool_var(f"admitted[{key}]")
        wm.model.add(cp_model.LinearExpr.sum([wm.placed[c.id] for c in classes]) <= sum(c.size for c in classes) * admitted)
        steps.append((position[key], key, classes, admitted, need, room, {}))
    if not steps:
        return
    steps.sort(key=lambda s: s[0])
    resources = sorted({r for s in steps for r in s[4]})

    def request(cls, r: str) -> int:
        idx = state.res_index.get(r)
        return 0 if idx is None else int(state.vector(cls.rep)[idx])

    # before[r]: what the gated steps so far place of resource r.
    before: dict[str, cp_model.LinearExprT] = {r: 0 for r in resources}
    for k, (_, name, classes, admitted, need, room, discount) in enumerate(steps):
        used = {r: cp_model.LinearExpr.weighted_sum([wm.placed[c.id] for c in classes],
                                                    [request(c, r) for c in classes]) for r in resources}
        # Gang (or kind) `name` is admitted only with its need left after the steps before it.
        for r in sorted(need):
            lhs = before[r] + (used[r] - discount[r] if discount else 0)
            wm.model.add(lhs <= room[r] - need[r]).only_enforce_if(admitted)
        if k == len(steps) - 1:
            break
        for r in resources:
            top = sum(request(c, r) * c.size for s in steps[: k + 1] for c in s[2])
            total = wm.model.new_int_var(0, top, f"before[{k + 1},{r}]")
            wm.model.add(total == before[r] + used[r])
            before[r] = total


def _cheapest(kind, classes, r: str, state: ClusterState) -> int:
    """The least of resource ``r`` that one running gang of ``kind`` uses: its ``need`` cheapest
    members (each running gang places at least ``need``)."""
    idx = state.res_index.get(r)
    per = sorted((0 if idx is None else int(state.vector(c.rep)[idx]), kind.per_gang[c.id]) for c in classes)
    left, total = kind.need, 0
    for req, count in per:
        take = min(left, count)
        total += take * req
        left -= take
    return total
