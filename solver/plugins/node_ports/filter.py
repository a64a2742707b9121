"""NodePorts: a pod's host ports must be free on the node.

``(ip, protocol, port)`` conflicts with a used one of the same protocol and port when either
side binds the wildcard ``0.0.0.0`` or both bind the same IP. A pod's own ports are not checked
against each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from ...framework import SUCCESS, Status, unschedulable
from ...info import NodeInfo, PodInfo
from ...state import ClusterState

if TYPE_CHECKING:
    from ...cpsat.model import WindowModel

NAME = "NodePorts"
# A wanted host port is already taken on the node.
REASON = "node(s) didn't have free ports for the requested pod ports"
WILDCARD = "0.0.0.0"

Port = tuple[str, str, int]


def conflicts(wanted: Port, used: Iterable[Port]) -> bool:
    ip, proto, port = wanted
    for uip, uproto, uport in used:
        if uport == port and uproto == proto and (ip == WILDCARD or uip == WILDCARD or uip == ip):
            return True
    return False


def ports_conflict(a: Iterable[Port], b: Iterable[Port]) -> bool:
    """Whether two pods' host ports collide (symmetric)."""
    b = tuple(b)
    return any(conflicts(p, b) for p in a)


def fits(pod: PodInfo, used: Iterable[Port]) -> bool:
    used = tuple(used)
    return not any(conflicts(p, used) for p in pod.host_ports)


def filter(pod: PodInfo, node: NodeInfo, state: ClusterState) -> Status:
    if not pod.host_ports or fits(pod, state.ports_on[node.index]):
        return SUCCESS
    return unschedulable(NAME, REASON)


def feasible(pod: PodInfo, nodes: np.ndarray, state: ClusterState) -> np.ndarray:
    if not pod.host_ports:
        return np.ones(len(nodes), dtype=bool)
    return np.fromiter((fits(pod, state.ports_on[n]) for n in nodes), dtype=bool, count=len(nodes))


# --------------------------------------------------------------------------- CP-SAT encoding


def blocked_by_running(pod: PodInfo, state: ClusterState, can_evict) -> np.ndarray:
    """Nodes where a running pod holds one of the pod's host ports and may not be evicted."""
    ok = np.ones(len(state.nodes), dtype=bool)
    if not pod.host_ports:
        return ok
    for other, node in state.pods():
        if other.host_ports and ports_conflict(pod.host_ports, other.host_ports) and not can_evict(other):
            ok[node] = False
    return ok


def encode(wm: WindowModel) -> None:
    """Host ports: on a node, classes whose ports collide place at most one pod between them,
    and a running pod holding the port must be evicted first (x ≤ 1 already per class)."""
    port_classes = [c for c in wm.classes if c.rep.host_ports]
    if not port_classes:
        return
    conflicts = {
        (a.id, b.id)
        for i, a in enumerate(port_classes)
        for b in port_classes[i + 1 :]
        if ports_conflict(a.rep.host_ports, b.rep.host_ports)
    }
    for n, entries in wm.by_node.items():
        here = [(cls, var) for cls, var in entries if cls.rep.host_ports]
        if not here:
            continue
        for i, (a, va) in enumerate(here):
            for b, vb in here[i + 1 :]:
                if (a.id, b.id) in conflicts or (b.id, a.id) in conflicts:
                    wm.model.add(va + vb <= 1)
            for other in wm.state.pods_on[n].values():
                if other.host_ports and ports_conflict(a.rep.host_ports, other.host_ports):
                    evict = wm.evictable(other)
                    if evict is None:
                        wm.model.add(va == 0)  # pruned normally; kept as a guard
                    else:
                        wm.model.add(va <= evict)
