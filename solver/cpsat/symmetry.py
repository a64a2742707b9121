"""Identical nodes: interchangeable variables, ordered once so the solver need not try each
permutation.

Two candidate nodes are interchangeable when nothing in the model tells them apart: the same
labels apart from their hostname, taints, allocatable and free resources, images, candidate
classes with the same bounds and score coefficients, no eviction variables, and no running pod
any rule looks at (host ports, (anti-)affinity terms, pods counted by a term), and no pod with
claims on them or among their candidate classes. Swapping two such
nodes maps every solution to one of the same value, so the first class's count on them may be
required to be non-increasing along the group — a lexicographic symmetry break, which the
config's ``solver.breakSymmetry`` turns on (off by default: measured slower than CP-SAT's own
symmetry handling). Hints are
permuted within groups the same way, so a feasible hint stays feasible.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ..plugins.registry import per_node_state

if TYPE_CHECKING:
    from .model import WindowModel

HOSTNAME = "kubernetes.io/hostname"


def node_groups(wm: WindowModel) -> list[list[int]]:
    state = wm.state
    evicting = {n for _, n in wm.evict_pod.values()}
    coeff = {var.index: c for var, c in wm.level("score").terms}
    # (Held anti-affinity terms need no counter here: their owners' nodes are left out below.)
    counters = list(state._counters.values())
    groups: dict[tuple, list[int]] = defaultdict(list)
    for n, entries in wm.by_node.items():
        if n in evicting:
            continue
        if any(p.host_ports or p.affinity or p.anti_affinity for p in state.pods_on[n].values()):
            continue
        if any(c[n] for c in counters):
            continue
        # State a rule keeps per node (``Plugin.per_node_state``): a volume's node affinity may name
        # the host, CSINode limits differ per node, devices set nodes apart that look alike otherwise.
        if any(per_node_state(p) for p in state.pods_on[n].values()) or any(per_node_state(cls.rep) for cls, _ in entries):
            continue
        node = state.nodes[n]
        key = (
            tuple(sorted((k, v) for k, v in node.labels.items() if k != HOSTNAME)),
            tuple((t.key, t.value, t.effect) for t in node.taints),
            node.unschedulable,
            state.alloc[n].tobytes(),
            state.free[n].tobytes(),
            state.nonzero[n].tobytes(),
            tuple(sorted(node.images.items())),
            tuple((cls.id, wm.ub_of(cls.id, n), coeff.get(var.index, 0)) for cls, var in entries),
        )
        groups[key].append(n)
    return [sorted(g) for g in groups.values() if len(g) > 1]


def break_symmetry(wm: WindowModel, *, enabled: bool) -> None:
    """Find the groups (reported in the plan's stats); with ``enabled``, add
    x[c, n_1] ≥ x[c, n_2] ≥ … along each group for the group's first candidate class."""
    wm.node_groups = node_groups(wm)
    wm.symmetry_broken = enabled
    if not enabled:
        return
    for group in wm.node_groups:
        cls = wm.by_node[group[0]][0][0]
        chain = [wm.x[cls.id, n] for n in group]
        for a, b in zip(chain, chain[1:]):
            wm.model.add(a >= b)


def canonical(wm: WindowModel, counts: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """The same placement with nodes permuted inside each group so the chain above holds."""
    groups = wm.node_groups if wm.symmetry_broken else None
    if not groups:
        return counts
    out = dict(counts)
    for group in groups:
        ids = [cls.id for cls, _ in wm.by_node[group[0]]]
        vectors = [tuple(counts.get((c, n), 0) for c in ids) for n in group]
        for n in group:
            for c in ids:
                out.pop((c, n), None)
        for n, vec in zip(group, sorted(vectors, reverse=True)):
            for c, k in zip(ids, vec):
                if k:
                    out[c, n] = k
    return out
