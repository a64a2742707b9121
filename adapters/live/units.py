"""From a plan to *bind units*: what is bound together, and which victims it must wait for.

A window's plan is a final state: victims gone, every placement made. Binding is not atomic,
so the order matters, and two rules keep every intermediate state valid:

- a gang's window members form one unit: all assumed before any is bound, bound together;
- a placement that relies on the room a victim frees waits until that victim is gone. The
  solver may give freed room to *any* pod of the window, not only to the preemptor (it placed
  them jointly), so every placement on a node with victims waits for them. Victims can also
  matter beyond their node: a placement with required pod anti-affinity or a hard topology
  spread constraint may count on a victim leaving its domain, and a victim's own required
  anti-affinity may keep others out of its domain until it leaves; such placements wait for
  every victim of the plan.

Only the preemptor's unit evicts its victims (the `Preempted` events name it); the other units
merely wait for them. If an eviction is refused, every unit waiting for that victim gives its
room back (`binder.py`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from models import ClusterSnapshot, Plan, Pod, pod_group_key

from solver.plugins import registry

from .binder import BindUnit, Placement, Victim
from .queue import QueuedPod


def _has_required_anti_affinity(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    return bool(affinity and affinity.pod_anti_affinity
                and affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution)


def _counts_on_domains(pod: Pod) -> bool:
    """Whether the pod's placement can depend on pods elsewhere in its topology domains."""
    return _has_required_anti_affinity(pod) or any(
        c.when_unsatisfiable == "DoNotSchedule" for c in pod.spec.topology_spread_constraints)


def form_units(plan: Plan, window: list[QueuedPod], snapshot: ClusterSnapshot) -> list[BindUnit]:
    """The plan's placements grouped into bind units, with their victims and what they wait for."""
    by_key = {qp.key: qp for qp in window}

    def pod_of(key: str) -> Pod:  # a window's few pods, without building snapshot.pod_by_key
        pod = snapshot.pod(key)
        if pod is None:  # a validated plan names only the snapshot's pods
            raise KeyError(key)
        return pod

    nominated = {n.pod for n in plan.nominations}
    victims_of: dict[str, list[Victim]] = defaultdict(list)
    on_node: dict[str, set[str]] = defaultdict(set)
    for v in plan.preemptions:
        victims_of[v.preemptor].append(Victim(pod_of(v.pod), v.node, v.preemptor))
        on_node[v.node].add(v.pod)
    every_victim = {v.pod for v in plan.preemptions}
    victims_reach_out = any(_has_required_anti_affinity(pod_of(v)) for v in every_victim)

    # What the rules write before each pod is bound (``Plugin.prebind``, in registry order), given
    # the pod, the pod as read and the node it goes to.
    prebind = registry.prebinds(plan, snapshot)
    node_objects = {n.metadata.name: n for n in snapshot.nodes}
    groups: dict[str, list[Placement]] = defaultdict(list)
    gangs: dict[str, Optional[str]] = {}
    for a in plan.assignments:
        pod = pod_of(a.pod)
        gang = pod_group_key(pod)
        unit_key = f"gang:{gang}" if gang else a.pod
        gangs[unit_key] = gang
        read = by_key[a.pod]
        groups[unit_key].append(Placement(read, pod, a.node, nominated=a.pod in nominated,
                                          writes=tuple(prebind(pod, read.pod, node_objects[a.node]))))

    units = []
    for unit_key, placements in groups.items():
        own = [v for p in placements for v in victims_of.get(p.key, [])]
        waits: set[str] = {v.key for v in own}
        for p in placements:
            waits |= on_node.get(p.node, set())
            if every_victim and (victims_reach_out or _counts_on_domains(p.pod)):
                waits |= every_victim
        units.append(BindUnit(placements, own, gang=gangs[unit_key], waits_for=waits))
    return units
