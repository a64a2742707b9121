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
from models.dra import EXTENDED_CLAIM_ANNOTATION, extended_request_mappings

from solver.plugins import registry

from .binder import BindUnit, Placement, Victim
from .dra_writes import ClaimUse, extended_claim
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

    # What each pod's first-time claims take (VolumeBinding's PreBind writes it before the bind):
    # (claim key, volume or None to provision, the claim's uid).
    volumes_of: dict[str, list[tuple[str, Optional[str], str]]] = defaultdict(list)
    for b in plan.volume_bindings:
        claim = snapshot.pvc_by_key.get(b.claim)
        volumes_of[b.pod].append((b.claim, b.volume, claim.metadata.uid if claim is not None else ""))

    # What each pod's ResourceClaims take (DynamicResources' PreBind writes it before the bind):
    # the window's allocation of a claim, or none for one the snapshot has allocated already.
    allocated = {a.claim: a.allocation for a in plan.allocations}

    def claims_of(pod: Pod, original: Pod) -> tuple[ClaimUse, ...]:
        if not pod.spec.resource_claims:
            return ()
        uses = []
        for pc in snapshot.pod_claims(pod):
            if not (pc.needed and pc.key and pc.claim is not None):
                continue
            if pc.from_template and pc.claim.metadata.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true":
                # the claim kube-scheduler makes for extended resources backed by DRA: made in PreBind
                requests = [r for r in pc.claim.spec.devices.requests if r.exactly is not None]
                spec = {"devices": {"requests": [
                    {"name": r.name, "exactly": {"deviceClassName": r.exactly.device_class_name,
                                                 "allocationMode": "ExactCount", "count": r.exactly.count}}
                    for r in requests if r.exactly is not None]}}
                names = [r.name for r in requests]
                uses.append(ClaimUse(pc.key, "", allocated.get(pc.key),
                                     create=extended_claim(pod.metadata.namespace, pod.metadata.name,
                                                           pod.metadata.uid or "", spec),
                                     mappings=tuple(extended_request_mappings(original, names))))
                continue
            uses.append(ClaimUse(pc.key, pc.claim.metadata.uid or "", allocated.get(pc.key)))
        return tuple(uses)

    # The rules' PreBind writes on the pods (``Plugin.prebind``), given the node each goes to.
    node_objects = {n.metadata.name: n for n in snapshot.nodes} if registry.PREBINDS else {}
    groups: dict[str, list[Placement]] = defaultdict(list)
    gangs: dict[str, Optional[str]] = {}
    for a in plan.assignments:
        pod = pod_of(a.pod)
        gang = pod_group_key(pod)
        unit_key = f"gang:{gang}" if gang else a.pod
        gangs[unit_key] = gang
        groups[unit_key].append(Placement(by_key[a.pod], pod, a.node, nominated=a.pod in nominated,
                                          volumes=tuple(volumes_of.get(a.pod, ())),
                                          claims=claims_of(pod, by_key[a.pod].pod),
                                          writes=tuple(registry.prebind_writes(pod, node_objects[a.node]))
                                          if a.node in node_objects else ()))

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
