"""Independent parts of a window, found with networkx and solved as separate models.

Two pod classes interact when they can share a node (capacity, ports, evictions), when a
required (anti-)affinity or topology-spread term of one counts pods of the other, when they
belong to one gang, or to two gangs whose minResources admissions are ordered, or when one
may evict a running member of the other's gang, or a running pod whose anti-affinity (or the other's) keeps the other out of a domain they share,
or when both may evict pods one PodDisruptionBudget covers (``budget_links``). Classes with no
path between them cannot affect each other's feasibility or objective, so each connected
component is its own, smaller CP-SAT model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import networkx as nx
import numpy as np

from ..context import PodClass
from ..disruption import PdbBudgets
from ..info import PodInfo
from ..plugin_api import term_owners
from ..plugins import registry
from ..state import ClusterState, PodMatcher
from .eviction import can_evict, top_preemptor


def _ties(classes: list[PodClass]) -> dict[int, list]:
    """Per class whose rules tie it to other pods, those rules' predicates (``registry.COUPLERS``)."""
    out: dict[int, list] = {}
    for cls in classes:
        preds = [p for p in (couples(cls.rep) for couples in registry.COUPLERS) if p is not None]
        if preds:
            out[cls.id] = preds
    return out


def _couples(a: PodClass, b: PodClass, ties: dict[int, list]) -> bool:
    """Whether a rule of either class ties it to the other, wherever they land."""
    return (any(p(b.rep) for p in ties.get(a.id, ())) or any(p(a.rep) for p in ties.get(b.id, ())))


def _kept_out(pod: PodInfo, classes: list[PodClass], state: ClusterState) -> list[tuple[PodClass, str]]:
    """The classes that the running ``pod`` keeps out of its domain by required anti-affinity
    (its terms matching them, or theirs matching it), each with the term's topology key."""
    out = []
    for cls in classes:
        rep = cls.rep
        for term in pod.anti_affinity:
            if term.matches(rep.namespace, rep.labels, rep.ns_labels):
                out.append((cls, term.topology_key))
        for term in rep.anti_affinity:
            if state.matches(PodMatcher.of_term(term), pod):
                out.append((cls, term.topology_key))
    return out


def _lifting_edges(classes, cand, on_node: dict[int, list[PodClass]], state: ClusterState, allow_preemption: bool):
    """Pairs (a class on the node of an evictable running pod, a class that pod keeps out of a
    domain holding some of the second's candidate nodes by anti-affinity): the first's
    preemption may lift the rule for the second, and the model sees an eviction only where
    ``evict[v]`` exists, in the component with a preemptor on v's node. Anti-affinity only:
    an eviction there frees, and the final state the model reads is the order "evict, then
    place". An evicted pod that a spread count or affinity support reads is left out: apart,
    the reader's model keeps the pod, which is the valid order "place, then evict"."""
    kept_out: dict[tuple, tuple[list, list]] = {}
    domains: dict[tuple[int, str], set[int]] = {}
    looked: set[tuple] = set()
    linked: set[tuple[int, int]] = set()
    anti = [c for c in classes if c.rep.anti_affinity]
    top = top_preemptor(classes, cand, len(state.nodes))  # a quick "no" for most pods
    for n, here in on_node.items():
        for pod in state.pods_on[n].values():
            if pod.priority >= top[n] or not any(can_evict(c.rep, pod, allow_preemption) for c in here):
                continue
            sig = (pod.match_key, pod.terminating, pod.anti_affinity)
            hit = kept_out.get(sig)
            if hit is None:
                out = _kept_out(pod, classes if pod.anti_affinity else anti, state)
                hit = kept_out[sig] = (out, sorted({key for _, key in out}))
            out, keys = hit
            # Pods alike, in the same domains, beside the same classes: one look is enough.
            where = (sig, here[0].id, *(int(state.domains(key)[0][n]) for key in keys))
            if not out or where in looked:
                continue
            looked.add(where)
            for cls, key in out:
                ids = state.domains(key)[0]
                if cls is here[0] or ids[n] < 0:
                    continue
                used = domains.get((cls.id, key))
                if used is None:
                    used = domains[cls.id, key] = set(ids[cand[cls.id]].tolist())
                if int(ids[n]) in used and (here[0].id, cls.id) not in linked:
                    linked.add((here[0].id, cls.id))
                    yield here[0].id, cls.id


def components(
    classes: list[PodClass],
    cand: dict[int, np.ndarray],
    running_members: Optional[dict[str, list[tuple[PodInfo, int]]]] = None,
    allow_preemption: bool = True,
    state: Optional[ClusterState] = None,
    linked: Sequence[Sequence[int]] = (),
) -> list[list[PodClass]]:
    """``running_members``: per gang with members in the window, its running members and their
    nodes. A class that may evict one of them couples with the gang's window classes: the
    eviction counts against the gang's minMember, wherever its other members land. With
    ``state``, a class that may evict a running pod couples with every class the pod keeps
    out of a shared domain by anti-affinity (``_lifting_edges``). ``linked``: lists of class ids
    that share one component (the rules' ``WindowPart.linked``: gangs whose minResources
    admissions read one another's use of the cluster)."""
    graph = nx.Graph()
    graph.add_nodes_from(c.id for c in classes)
    on_node: dict[int, list[PodClass]] = {}
    for cls in classes:
        for n in cand[cls.id].tolist():
            here = on_node.setdefault(n, [])
            if here:
                graph.add_edge(here[0].id, cls.id)
            here.append(cls)
    for group, running in (running_members or {}).items():
        members = [c for c in classes if c.rep.group == group]
        for cls in classes:
            nodes = set(cand[cls.id].tolist())
            if any(n in nodes and can_evict(cls.rep, pod, allow_preemption) for pod, n in running):
                graph.add_edges_from((cls.id, m.id) for m in members if m.id != cls.id)
    for ids in linked:
        graph.add_edges_from(zip(ids, ids[1:]))
    ties = _ties(classes)
    coupled = [c for c in classes if c.id in ties]
    for a in coupled:
        for b in classes:
            if a.id != b.id and not graph.has_edge(a.id, b.id) and _couples(a, b, ties):
                graph.add_edge(a.id, b.id)
    if state is not None and allow_preemption:
        if term_owners(state) or any(c.rep.anti_affinity for c in classes):
            graph.add_edges_from(_lifting_edges(classes, cand, on_node, state, allow_preemption))
    by_id = {c.id: c for c in classes}
    parts = [sorted((by_id[i] for i in comp), key=lambda c: c.id) for comp in nx.connected_components(graph)]
    return sorted(parts, key=lambda part: part[0].id)


def budget_links(ctx, classes: list[PodClass], cand: dict[int, np.ndarray], allow_preemption: bool) -> list[list[int]]:
    """Lists of class ids that may evict pods one PodDisruptionBudget covers (for ``components``'
    ``linked``). A budget's allowance is the whole plan's: in models of their own, each class
    would spend all of it (two pools each evicting one pod of a budget that allows one), and
    the plan breaks the budget, or under ``pdb: hard`` fails validation, where one model keeps it."""
    if not allow_preemption or not ctx.snapshot.pdbs:
        return []
    budgets = PdbBudgets.of(ctx)
    near: dict[int, list[PodClass]] = {}
    for cls in classes:
        if cls.rep.may_preempt_others:
            for n in cand[cls.id].tolist():
                near.setdefault(n, []).append(cls)
    sharing: dict[int, set[int]] = {}
    pods_on = ctx.state.pods_on
    for n, here in near.items():
        for pod in pods_on[n].values():
            covering = budgets.covering(pod)
            if not covering:
                continue
            takers = [c.id for c in here if can_evict(c.rep, pod, True)]
            if takers:
                for i in covering:
                    # A budget allowing nothing has nothing to share: each model counts (or,
                    # hard, forbids) its own evictions of it alike. Such as ``MANY_BUDGETS``,
                    # which spans namespaces and tied unrelated pools into one model.
                    if budgets.budgets[i].allowed > 0:
                        sharing.setdefault(i, set()).update(takers)
    return [sorted(ids) for ids in sharing.values() if len(ids) > 1]
