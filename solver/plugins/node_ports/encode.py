"""NodePorts as CP-SAT: no two pods of the final state hold one host port on a node
(``encode``), and the nodes a running pod no eviction removes keeps closed (``blocked_by_running``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from .book import ports_on
from ..shared.host_ports import ports_conflict

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


def blocked_by_running(pod: PodInfo, state: ClusterState, can_evict) -> np.ndarray:
    """Nodes where a running pod holds one of the pod's host ports and may not be evicted."""
    ok = np.ones(len(state.nodes), dtype=bool)
    if not pod.host_ports:
        return ok
    for node, held in enumerate(ports_on(state)):
        if not held:
            continue  # no running pod on the node holds a host port
        for other in state.pods_on[node].values():
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
