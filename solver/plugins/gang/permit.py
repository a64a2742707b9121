"""Gangs: coscheduling PodGroups placed all-or-nothing.

A pod belongs to the PodGroup named by its ``scheduling.x-k8s.io/pod-group`` label in its own
namespace. In a window, a group places no pod at all or enough that placed plus already-running
members reach ``minMember``. A group with fewer pods in existence than ``minMember`` waits, as the
coscheduling PreFilter makes it; so does one whose ``minResources`` the cluster's free room
cannot cover (``min_resources``).

``scheduleTimeoutSeconds`` bounds how long upstream's Permit holds placed members waiting for
their siblings (default ``permitWaitingTimeSeconds``, 60 s) before it releases them all. A
decision here never waits: a gang's window members land together in one plan or none of them
does, so the timeout has nothing to bound and is read but not used. It matters only to a
scheduler that holds members across windows, which this one does not.

Interchangeable gangs share one "kind" in the CP-SAT model (``kinds``): instead of one set of
count variables per gang, a kind has one per member signature and node, plus the number of its
gangs that run. ``decode.py`` turns the kind's per-node counts back into whole gangs.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, TypeVar

from ortools.sat.python import cp_model

from models.snapshot import POD_GROUP_LABEL

from ...plugin_api import ClassView as PodClass
from . import min_resources, preferred, topology
# The gang data and the minMember rule live in group.py; permit is where the rest of the solver finds them.
from .group import REASON_NOT_FOUND, Gang, GangKind, not_enough_siblings, reaches_min_member, rejected
from .encoding import NAME, GangEncoding  # the window part starts the encoding with the window's gangs

C = TypeVar("C", bound=PodClass)  # the caller's class type: merged classes are copies of its own

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel



def collect(ctx) -> dict[str, Gang]:
    """Every gang with a member in the window, with its running and existing member counts and
    the minResources answer at the window's start."""
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
    for info in ctx.bound:
        gang = gangs.get(info.group) if info.group is not None else None
        if gang is not None:
            gang.own.append(info)
    for gang in gangs.values():
        if gang.group is not None:
            gang.refused = min_resources.refusal(gang.group, gang.key, ctx.state, gang.own)
    return gangs


# --------------------------------------------------------------------------- gang kinds


def selectors_read_group_label(ctx) -> bool:
    """Whether any selector (pod (anti-)affinity, spread, PodDisruptionBudget) looks at the
    pod-group label, and so could tell members of different groups apart."""
    for info in (*ctx.bound, *ctx.window):
        for term in (*info.affinity, *info.anti_affinity, *info.preferred_affinity, *info.preferred_anti_affinity):
            if POD_GROUP_LABEL in term.selector.keys():
                return True
        for c in info.spread:
            if POD_GROUP_LABEL in c.selector.keys():
                return True
    for pdb in ctx.snapshot.pdbs:
        sel = pdb.spec.selector
        if sel is None:
            continue
        if POD_GROUP_LABEL in sel.match_labels or any(r.key == POD_GROUP_LABEL for r in sel.match_expressions):
            return True
    return False


def kinds(ctx, gangs: dict[str, Gang]) -> list[GangKind]:
    """Kinds of two or more interchangeable gangs (a gang on its own keeps its own encoding).

    A gang qualifies when no selector reads the pod-group label, none of its members runs and it
    is not blocked. Two are interchangeable when their members' signatures without the group
    match as multisets, and their ``need``, minResources, required topology key and preferred
    topology keys match (namespace, priority and everything else a rule reads are part of the
    signature). Gangs with a required topology key and no running member may choose any domain
    of it, so they too are interchangeable: the kind counts its gangs per domain (``encode``);
    a kind with preferred keys counts the domains its gangs touch (``preferred.encode``)."""
    if len(gangs) < 2 or selectors_read_group_label(ctx):
        return []
    labels = ctx.relevant_labels - {POD_GROUP_LABEL}
    base_of: dict[int, int] = {}  # context class id -> id of its signature without the group
    base_ids: dict[tuple, int] = {}
    by_key: dict[tuple, list[Gang]] = defaultdict(list)
    for gang in gangs.values():  # in the order of their first members: queue order
        if gang.group is None or gang.running or gang.blocked(gang.members[0]) or gang.group.spec.parent:
            continue  # a CompositePodGroup's child keeps its own classes (``composite_group``)
        for pod in gang.members:
            if pod.class_id not in base_of:
                sig = ctx.classes[pod.class_id].rep.scheduling_signature(labels, with_group=False)
                base_of[pod.class_id] = base_ids.setdefault(sig, len(base_ids))
        shape = tuple(sorted(Counter(base_of[p.class_id] for p in gang.members).items()))
        min_resources = tuple(sorted(gang.group.spec.min_resources.items()))
        by_key[shape, gang.need, min_resources, topology.key_of(gang.group), preferred.keys_of(gang.group)].append(gang)
    return [GangKind(group, need, base_of, key, prefer)
            for (_, need, _, key, prefer), group in by_key.items() if len(group) > 1]


def merge_classes(classes: list[C], kinds_: list[GangKind]) -> tuple[list[C], dict[int, int]]:
    """The model's classes: a kind's members of one signature share one class, which keeps the
    id of the first gang's class; every other class stays as it is. Returns the classes, in id
    order, and the alias from each merged-away context class id to its model class id. Fills
    in each kind's ``classes``, ``per_gang`` and ``model_of``."""
    if not kinds_:
        return classes, {}
    alias: dict[int, int] = {}
    context_class = {c.id: c for c in classes}
    merged: dict[int, C] = {}
    for kind in kinds_:
        by_base: dict[int, C] = {}
        for pod in kind.gangs[0].members:
            base = kind.base_of[pod.class_id]
            if base not in by_base:
                first = copy.copy(context_class[pod.class_id])  # the context's class type, its pods set below
                first.pods = []
                by_base[base] = first
                kind.classes.append(by_base[base])
                kind.per_gang[pod.class_id] = 0
            kind.per_gang[by_base[base].id] += 1
        for gang in kind.gangs:
            for pod in gang.members:
                cls = by_base[kind.base_of[pod.class_id]]
                cls.pods.append(pod)
                kind.model_of[pod.class_id] = cls.id
                if pod.class_id != cls.id:
                    alias[pod.class_id] = cls.id
        merged.update((c.id, c) for c in by_base.values())  # the classes this kind got, in order
    out = [merged.get(c.id, c) for c in classes if c.id not in alias]
    return out, alias


# --------------------------------------------------------------------------- CP-SAT encoding


def encode(wm: WindowModel, enc: GangEncoding) -> None:
    """All-or-nothing: a gang's window members place 0 pods or at least ``need`` of them; a
    kind runs a whole number of its gangs, and places between ``need`` and all members of each.
    Reads the window's gangs and kinds from its encoding (``encoding.GangEncoding``)."""
    gangs: dict[str, Gang] = enc.gangs
    kinds_: list[GangKind] = enc.kinds
    in_kind = enc.in_kinds
    present = {c.id for c in wm.classes if not isinstance(wm.placed[c.id], int)}
    for gang in gangs.values():
        if gang.key in in_kind:
            continue
        members = [c for c in wm.classes if c.rep.group == gang.key and c.id in present]
        if not members:
            continue
        # Running members evicted (by other preemptors) stop counting toward minMember, so a
        # gang whose running members alone reach it still needs the rule while they may go.
        evicted = [var for key, var in wm.evict.items() if wm.evict_pod[key][0].group == gang.key]
        deficit = gang.min_member - gang.running  # may be negative: members to spare
        if deficit <= 0 and not evicted:
            continue
        placed = [wm.placed[c.id] for c in members]
        total = len(gang.members)
        runs = wm.model.new_bool_var(f"gang[{gang.key}]")
        expr = cp_model.LinearExpr.sum(placed)
        if evicted:
            expr = expr - cp_model.LinearExpr.sum(evicted)
        # Placing: placed + running - evicted >= minMember; not placing: nothing to check.
        wm.model.add(expr >= deficit * runs - len(evicted) * (1 - runs))
        wm.model.add(cp_model.LinearExpr.sum(placed) <= total * runs)
        if gang.need > 0:
            enc.units.append((gang.need, [(c, c.size) for c in members], 1))
    for kind in kinds_:
        classes = [c for c in kind.classes if c.id in present]
        if not classes:
            continue
        runs = wm.model.new_int_var(0, len(kind.gangs), f"gangs[{kind.name}]")
        if kind.topology_key is not None:
            _encode_domains(wm, enc, kind, classes, runs)
        else:
            _encode_runs(wm, kind, [wm.placed[c.id] for c in classes], classes, runs)
        enc.runs.append((kind, runs))
        enc.units.append((kind.need, [(c, kind.per_gang[c.id]) for c in classes], len(kind.gangs)))


def _encode_runs(wm: WindowModel, kind: GangKind, placed: list, classes: list, runs) -> None:
    """``runs`` whole gangs of the kind hold the class totals ``placed`` (one per class): at least
    ``need`` pods per gang, at most its members of each class per gang."""
    wm.model.add(cp_model.LinearExpr.sum(placed) >= kind.need * runs)
    for total, c in zip(placed, classes):
        wm.model.add(total <= kind.per_gang[c.id] * runs)


def _encode_domains(wm: WindowModel, enc: GangEncoding, kind: GangKind, classes: list, runs) -> None:
    """A topology kind: per domain of its key, the gangs that run there hold the pods its classes
    put on that domain's nodes, and ``runs`` is their sum. As each domain's pods split into whole
    gangs of their own (``decode``), every gang lies in one domain."""
    key = kind.topology_key
    assert key is not None
    by_domain: dict[int, dict[int, list]] = defaultdict(dict)
    for c in classes:
        for d, vars_ in wm.class_vars_by_domain(c.id, key).items():
            by_domain[d][c.id] = vars_
    per_domain = {}
    for d in sorted(by_domain):
        present = [c for c in classes if c.id in by_domain[d]]
        # runs_in[k, d]: gangs of kind k whose members land in domain d.
        here = wm.model.new_int_var(0, len(kind.gangs), f"gangs[{kind.name},{d}]")
        totals = [cp_model.LinearExpr.sum(by_domain[d][c.id]) for c in present]
        _encode_runs(wm, kind, totals, present, here)
        per_domain[d] = here
    wm.model.add(runs == cp_model.LinearExpr.sum(list(per_domain.values())))
    enc.domain_runs.append((kind, per_domain))


def runs_in(kind: GangKind, placements) -> int:
    """How many of a kind's gangs a plan (pod key -> node) runs."""
    return sum(1 for gang in kind.gangs if any(p.key in placements for p in gang.members))
