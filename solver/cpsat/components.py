"""Independent parts of a window, found with networkx and solved as separate models.

Two pod classes interact when they can share a node (capacity, ports, evictions), when a
required (anti-)affinity or topology-spread term of one counts pods of the other, when they
belong to one gang, or when one may evict a running member of the other's gang. Classes with no
path between them cannot affect each other's feasibility or objective, so each connected
component is its own, smaller CP-SAT model.
"""

from __future__ import annotations

from typing import Optional

import networkx as nx
import numpy as np

from ..context import PodClass
from ..info import PodInfo
from ..predicates.inter_pod_affinity import AllTerms
from .eviction import can_evict


def _couples(a: PodClass, b: PodClass) -> bool:
    ra, rb = a.rep, b.rep
    if ra.group is not None and ra.group == rb.group:
        return True
    for x, y in ((ra, rb), (rb, ra)):
        for term in (*x.anti_affinity, *x.affinity):
            if term.matches(y.namespace, y.labels, y.ns_labels):
                return True
        if x.affinity and AllTerms(x.affinity).matches(y):
            return True
        for c in x.hard_spread:
            if y.namespace == x.namespace and c.selector.matches(y.labels):
                return True
    return False


def components(
    classes: list[PodClass],
    cand: dict[int, np.ndarray],
    running_members: Optional[dict[str, list[tuple[PodInfo, int]]]] = None,
    allow_preemption: bool = True,
) -> list[list[PodClass]]:
    """``running_members``: per gang with members in the window, its running members and their
    nodes. A class that may evict one of them couples with the gang's window classes: the
    eviction counts against the gang's minMember, wherever its other members land."""
    graph = nx.Graph()
    graph.add_nodes_from(c.id for c in classes)
    owner: dict[int, int] = {}
    for cls in classes:
        for n in cand[cls.id].tolist():
            first = owner.setdefault(n, cls.id)
            if first != cls.id:
                graph.add_edge(first, cls.id)
    for group, running in (running_members or {}).items():
        members = [c for c in classes if c.rep.group == group]
        for cls in classes:
            nodes = set(cand[cls.id].tolist())
            if any(n in nodes and can_evict(cls.rep, pod, allow_preemption) for pod, n in running):
                graph.add_edges_from((cls.id, m.id) for m in members if m.id != cls.id)
    coupled = [c for c in classes if c.rep.anti_affinity or c.rep.affinity or c.rep.hard_spread or c.rep.group]
    for a in coupled:
        for b in classes:
            if a.id != b.id and not graph.has_edge(a.id, b.id) and _couples(a, b):
                graph.add_edge(a.id, b.id)
    by_id = {c.id: c for c in classes}
    parts = [sorted((by_id[i] for i in comp), key=lambda c: c.id) for comp in nx.connected_components(graph)]
    return sorted(parts, key=lambda part: part[0].id)
