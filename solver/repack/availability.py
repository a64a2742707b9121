"""Moved replicas stay at least as far apart as they were.

Required rules (anti-affinity, DoNotSchedule spread) hold in every plan. The soft ones do not
bind the model, so nothing stopped a plan from putting both coredns replicas, kept apart today
only by a *preferred* anti-affinity, on one node: one node lost, both replicas gone. So pods that
ask to be apart per node — a preferred anti-affinity on the hostname key, or a ScheduleAnyway
spread on it, that selects their own labels — keep, per group of such pods (a class of the
model; in the replay, the pods of one controller), at most as many on any node as the most
crowded node holds today. Zone-level preferences are not kept (only per node).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable

from ..info import PodInfo
from ..scoring.crowding import spreads_itself_per_node

# The node name label every kubelet sets (a spread over it is one domain per node).
HOSTNAME_KEY = "kubernetes.io/hostname"


def apart_per_node(pod: PodInfo) -> bool:
    """The pod prefers its own kind on other nodes (soft anti-affinity or spread, hostname key)."""
    if spreads_itself_per_node(pod):
        return True
    return any(
        term.topology_key == HOSTNAME_KEY and term.matches(pod.namespace, pod.labels, pod.ns_labels)
        for term in pod.preferred_anti_affinity
    )


def group_of(pod: PodInfo) -> tuple:
    """Replicas: pods of one namespace with the same labels (a Deployment's pod-template-hash
    sets them apart from other Deployments')."""
    return pod.match_key


def caps(model) -> dict[int, int]:
    """Per class of a ``RepackModel`` whose pods ask to be apart: the fewest, over the groups of
    replicas in the class, of the most pods of the group on one node today."""
    out = {}
    for cls in model.classes:
        if not apart_per_node(cls.rep):
            continue
        per_group: dict[tuple, Counter] = defaultdict(Counter)
        for pod in cls.pods:
            per_group[group_of(pod)][model.problem.origin[pod.key]] += 1
        out[cls.id] = min(max(counts.values()) for counts in per_group.values())
    return out


def encode(model) -> None:
    """``x[c, n] ≤ cap(c)`` on every candidate node of such a class."""
    for cid, cap in caps(model).items():
        for n in model.wm.cand[cid].tolist():
            x = model.wm.x.get((cid, n))
            if x is not None:
                model.model.add(x <= cap)


def crowding(movable: Iterable[tuple[PodInfo, int, int]]) -> list[str]:
    """Replay check over every movable pod, (pod, node before, node after): per group of replicas
    that ask to be apart, the most on one node after must not exceed the most before."""
    before: dict[tuple, Counter] = defaultdict(Counter)
    after: dict[tuple, Counter] = defaultdict(Counter)
    names: dict[tuple, str] = {}
    for pod, source, target in movable:
        if not apart_per_node(pod):
            continue
        group = group_of(pod)
        names.setdefault(group, pod.key)
        before[group][source] += 1
        after[group][target] += 1
    problems = []
    for group, counts in after.items():
        most_before, most_after = max(before[group].values()), max(counts.values())
        if most_after > most_before:
            problems.append(f"availability: pods like {names[group]} ask to be apart per node, and the plan puts "
                            f"{most_after} on one node (at most {most_before} before)")
    return problems
