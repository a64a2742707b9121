"""``disruptionMode: all`` (Kubernetes 1.37's PodGroup): a group's running members are evicted
together or not at all. A basic under the plugins, as budgets are (``disruption``): greedy's
part, the model's encoding, the validator's check and kube-scheduler's replayed preemption each
read the one rule here: evicting any member of such a group evicts every running member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

from models.objects import PodGroup

from .info import PodInfo


def evicted_together(pod_groups: Mapping[str, PodGroup], pod: PodInfo) -> Optional[str]:
    """What ``pod`` is evicted only together with (``disruptionMode: all``): its PodGroup, or the
    widest CompositePodGroup above it saying so ("PodGroup ns/name", "CompositePodGroup ns/name");
    None when it may go alone."""
    group = pod.group
    if group is None:
        return None
    found = pod_groups.get(group)
    return found.spec.disruption_unit if found is not None else None


def any_unit(pod_groups: Mapping[str, PodGroup]) -> bool:
    """Whether some group is evicted only as a whole (most snapshots: none, and nothing to do)."""
    return any(g.spec.disruption_unit is not None for g in pod_groups.values())


def running_members(pod_groups: Mapping[str, PodGroup],
                    running: Iterable[tuple[PodInfo, int]]) -> dict[str, list[tuple[PodInfo, int]]]:
    """The running members (pod, node) of every unit evicted only as a whole, by unit."""
    out: dict[str, list[tuple[PodInfo, int]]] = {}
    for pod, node in running:
        group = evicted_together(pod_groups, pod)
        if group is not None:
            out.setdefault(group, []).append((pod, node))
    return out


def co_victims(pod_groups: Mapping[str, PodGroup], victim: PodInfo,
               running: Iterable[tuple[PodInfo, int]]) -> list[tuple[PodInfo, int]]:
    """The running pods (pod, node) that go with ``victim``: the others of its unit when it is
    evicted only as a whole, none otherwise."""
    unit = evicted_together(pod_groups, victim)
    if unit is None:
        return []
    return [(p, n) for p, n in running if p.key != victim.key and evicted_together(pod_groups, p) == unit]
