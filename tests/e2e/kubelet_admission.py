"""The kubelet's admission, as the last judge of a plan: a node's kubelet refuses a pod bound to it
whose requests, added to those of the pods it already runs, exceed the node's allocatable
(``OutOfcpu``, ``OutOfmemory``, ``OutOfpods``, ``OutOf<extended resource>``, hugepages alike).

Nothing in the cluster re-checks a secondary scheduler's binding but this; so the e2e tests ask it
of every plan, the project's and kube-scheduler's, on the objects as the server returned them.
The arithmetic here is written from Kubernetes' rules and does not call the project's own request
code, so a mistake there cannot hide itself:

- a pod's request of a resource is the sum over its containers, plus its restartable init
  containers (sidecars), or the largest init container's (plus the sidecars started before it)
  if that is more, plus ``spec.overhead``; pod-level ``spec.resources.requests`` (cpu, memory,
  hugepages) stand for the containers' when set;
- a container's missing request is its limit (the API server's defaulting);
- pods in phase Succeeded or Failed hold nothing; every other pod bound to the node counts;
- one pod more is one of ``allocatable.pods``; a resource the node does not list has 0.

Pods are admitted in the order given, as the kubelet admits them one at a time: the first that
does not fit is refused, and refused pods hold nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from models.quantity import parse_quantity, to_units

POD_LEVEL = ("cpu", "memory")  # and hugepages-*: what pod-level resources may request
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Refusal:
    """A pod the node's kubelet would not admit: ``reason`` as the kubelet writes it."""

    node: str
    pod: str
    reason: str           # "OutOfcpu", "OutOfpods", "OutOfexample.com/gpu", ...
    requested: int        # the pod's request, in kube-scheduler's units (milli-CPU, bytes, counts)
    used: int             # what the pods admitted before it hold
    allocatable: int

    def line(self) -> str:
        return (f"node {self.node}: the kubelet refuses pod {self.pod} ({self.reason}: requests {self.requested}, "
                f"{self.used} in use, {self.allocatable} allocatable)")


def _units(resource: str, value: Any) -> int:
    return to_units(resource, parse_quantity(value))


def _container(body: Mapping[str, Any]) -> dict[str, int]:
    resources = body.get("resources") or {}
    wanted = dict(resources.get("limits") or {})
    wanted.update(resources.get("requests") or {})       # defaulting: a missing request is the limit
    return {r: _units(r, q) for r, q in wanted.items()}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for r, q in more.items():
        into[r] = into.get(r, 0) + q


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """What the kubelet counts for ``pod`` (a Pod body), per resource, without the pod slot."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        _add(total, _container(c))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        own = _container(c)
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            during = dict(sidecars)
        else:
            during = dict(sidecars)
            _add(during, own)
        for r, q in during.items():
            init_peak[r] = max(init_peak.get(r, 0), q)
    for r, q in init_peak.items():
        total[r] = max(total.get(r, 0), q)
    level = (spec.get("resources") or {}).get("requests") or {}
    for r, q in level.items():
        if r in POD_LEVEL or r.startswith("hugepages-"):
            total[r] = _units(r, q)
    _add(total, {r: _units(r, q) for r, q in (spec.get("overhead") or {}).items()})
    return {r: q for r, q in total.items() if q}


# The order the kubelet's resource check goes through (noderesources' Fits): its first
# shortfall names the refusal.
_FIRST = ("pods", "cpu", "memory", "ephemeral-storage")


def _checked(wanted: Mapping[str, int]) -> list[str]:
    return [r for r in _FIRST if r in wanted] + sorted(r for r in wanted if r not in _FIRST)


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def refusals(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
             placements: Optional[Iterable[tuple[str, str]]] = None) -> list[Refusal]:
    """Every pod some kubelet would refuse: ``pods`` are bodies, those with ``spec.nodeName``
    bound there (in the order given); then each (pod key ``namespace/name``, node) of
    ``placements`` binds that pod (one of ``pods``, unbound or not) to the node, in plan order.
    A pod of ``pods`` that is not in the cluster any more (an evicted victim) must be left out."""
    allocatable: dict[str, dict[str, int]] = {}
    for body in nodes:
        status = body.get("status") or {}
        allocatable[body["metadata"]["name"]] = {
            r: _units(r, q) for r, q in (status.get("allocatable") or {}).items()}
    by_key = {_key(p): p for p in pods}
    order: list[tuple[str, str]] = [
        (k, p["spec"]["nodeName"]) for k, p in by_key.items()
        if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") not in TERMINAL]
    if placements is not None:
        moved = dict(placements)
        order = [(k, n) for k, n in order if k not in moved] + list(moved.items())
    used: dict[str, dict[str, int]] = {n: {} for n in allocatable}
    out: list[Refusal] = []
    for key, node in order:
        if node not in allocatable:
            continue            # a node the caller did not give: not this check's to judge
        wanted = {**pod_requests(by_key[key]), "pods": 1}
        held, room = used[node], allocatable[node]
        over = next((r for r in _checked(wanted) if held.get(r, 0) + wanted[r] > room.get(r, 0)), None)
        if over is not None:
            out.append(Refusal(node, key, f"OutOf{over}", wanted[over], held.get(over, 0), room.get(over, 0)))
            continue
        _add(held, wanted)
    return out


def plan_refusals(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
                  assignments: Mapping[str, str], evicted: Iterable[str] = ()) -> list[Refusal]:
    """``refusals`` of a plan: its victims (pod keys) gone, its assignments bound in order."""
    gone = set(evicted)
    kept = [p for p in pods if _key(p) not in gone]
    return refusals(nodes, kept, list(assignments.items()))

