"""InterPodAffinity (filter): required pod affinity and anti-affinity, in both directions.

1. the pod's required affinity terms must each find a matching pod in the node's domain (or,
   for the first pod of a group, the pod matches its own terms: the self-affinity escape);
2. the pod's required anti-affinity terms must find no matching pod in the node's domain;
3. no pod already placed may have a required anti-affinity term that matches this pod in the
   node's domain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...framework import SUCCESS, Status, unresolvable, unschedulable
from ...info import NodeInfo, PodInfo
from ...plugin_api import CodedCycle, NodeDryRun, StaticView
from ...terms import HOSTNAME_LABEL, AffinityTerm
from ...state import ClusterState, PodMatcher
from ..shared.all_terms import AllTerms
from .book import term_book

NAME = "InterPodAffinity"
# A required affinity term has no matching pod in the node's domain (or the key is missing).
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
# A required anti-affinity term of the pod matches a pod in the node's domain.
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
# A pod already placed has a required anti-affinity term that matches this pod.
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


@dataclass(frozen=True)
class AffinityCounts:
    # per required affinity term: (domain ids per node, matching-all pods per domain)
    affinity: list[tuple[AffinityTerm, np.ndarray, np.ndarray]]
    affinity_empty: bool  # no pod anywhere (on a node with the key) matches all terms
    self_match: bool  # the pod matches all of its own affinity terms
    # per required anti-affinity term: (domain ids per node, matching pods per domain)
    anti: list[tuple[AffinityTerm, np.ndarray, np.ndarray]]
    # per topology key: (domain ids per node, blocked domain flags) from existing pods' anti terms
    existing_anti: list[tuple[np.ndarray, np.ndarray]]


def _per_domain(state: ClusterState, key: str, per_node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids, values = state.domains(key)
    has = ids >= 0
    return ids, np.bincount(ids[has], weights=per_node[has], minlength=len(values)).astype(np.int64)


def prefilter(pod: PodInfo, state: ClusterState) -> AffinityCounts | None:
    """None when the pod has no required terms and no placed pod's anti-affinity can reach it."""
    existing = []
    blocked_by_key: dict[str, np.ndarray] = {}
    book = term_book(state)
    for term in book.terms_matching(pod):
        ids, per_domain = _per_domain(state, term.topology_key, book.owners[term])
        blocked = blocked_by_key.get(term.topology_key)
        blocked_by_key[term.topology_key] = per_domain > 0 if blocked is None else blocked | (per_domain > 0)
    for key, blocked in blocked_by_key.items():
        existing.append((state.domains(key)[0], blocked))
    if not pod.affinity and not pod.anti_affinity and not existing:
        return None

    affinity = []
    affinity_empty = True
    if pod.affinity:
        per_node = state.match_counts(AllTerms(pod.affinity))
        for term in pod.affinity:
            ids, per_domain = _per_domain(state, term.topology_key, per_node)
            affinity.append((term, ids, per_domain))
            if per_domain.any():
                affinity_empty = False
    self_match = all(t.matches(pod.namespace, pod.labels, pod.ns_labels) for t in pod.affinity)
    anti = []
    for term in pod.anti_affinity:
        ids, per_domain = _per_domain(state, term.topology_key, state.match_counts(PodMatcher.of_term(term)))
        anti.append((term, ids, per_domain))
    return AffinityCounts(affinity, affinity_empty, self_match, anti, existing)


def filter(pod: PodInfo, node: NodeInfo, pre: AffinityCounts | None) -> Status:
    if pre is None:
        return SUCCESS
    n = node.index
    if pre.affinity:
        missing = False
        for term, ids, per_domain in pre.affinity:
            if ids[n] < 0:
                return unresolvable(NAME, REASON_AFFINITY)
            if per_domain[ids[n]] <= 0:
                missing = True
        if missing and not (pre.affinity_empty and pre.self_match):
            return unresolvable(NAME, REASON_AFFINITY)
    for term, ids, per_domain in pre.anti:
        if ids[n] >= 0 and per_domain[ids[n]] > 0:
            return unschedulable(NAME, REASON_ANTI_AFFINITY)
    for ids, blocked in pre.existing_anti:
        if ids[n] >= 0 and blocked[ids[n]]:
            return unschedulable(NAME, REASON_EXISTING_ANTI_AFFINITY)
    return SUCCESS


def _at(per_domain: np.ndarray, dom: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Per node, its domain's value (0 where the node lacks the key; no domain at all is fine)."""
    if not len(per_domain):
        return np.zeros(len(dom), dtype=per_domain.dtype)
    return np.where(has, per_domain[np.where(has, dom, 0)], 0)


# ``status_codes`` answers with indexes into this tuple: the statuses ``filter`` can give.
STATUSES = (
    SUCCESS,
    unresolvable(NAME, REASON_AFFINITY),
    unschedulable(NAME, REASON_ANTI_AFFINITY),
    unschedulable(NAME, REASON_EXISTING_ANTI_AFFINITY),
)


def status_codes(nodes: np.ndarray, pre: AffinityCounts | None) -> np.ndarray:
    """``filter`` over many nodes at once: per node, the index in ``STATUSES`` of its status
    (affinity first, then the pod's anti-affinity, then existing pods' anti-affinity)."""
    codes = np.zeros(len(nodes), dtype=np.int8)
    if pre is None:
        return codes
    if pre.affinity:
        nokey = np.zeros(len(nodes), dtype=bool)
        missing = np.zeros(len(nodes), dtype=bool)
        for term, ids, per_domain in pre.affinity:
            dom = ids[nodes]
            has = dom >= 0
            nokey |= ~has
            missing |= has & (_at(per_domain, dom, has) <= 0)
        if pre.affinity_empty and pre.self_match:
            missing[:] = False
        codes[nokey | missing] = 1
    for term, ids, per_domain in pre.anti:
        dom = ids[nodes]
        has = dom >= 0
        codes[(codes == 0) & has & (_at(per_domain, dom, has) > 0)] = 2
    for ids, blocked in pre.existing_anti:
        dom = ids[nodes]
        has = dom >= 0
        codes[(codes == 0) & has & _at(blocked, dom, has).astype(bool)] = 3
    return codes


def feasible(nodes: np.ndarray, pre: AffinityCounts | None) -> np.ndarray:
    ok = np.ones(len(nodes), dtype=bool)
    if pre is None:
        return ok
    if pre.affinity:
        missing = np.zeros(len(nodes), dtype=bool)
        for term, ids, per_domain in pre.affinity:
            dom = ids[nodes]
            has = dom >= 0
            ok &= has
            missing |= has & (_at(per_domain, dom, has) <= 0)
        if not (pre.affinity_empty and pre.self_match):
            ok &= ~missing
    for term, ids, per_domain in pre.anti:
        dom = ids[nodes]
        has = dom >= 0
        ok &= ~(has & (_at(per_domain, dom, has) > 0))
    for ids, blocked in pre.existing_anti:
        dom = ids[nodes]
        has = dom >= 0
        ok &= ~(has & _at(blocked, dom, has).astype(bool))
    return ok


class AffinityOnNode:
    """The filter's dry run on one node (``plugin_api.NodeDryRun``; kube-scheduler's
    PreFilterExtensions for InterPodAffinity): a pod leaving or returning changes the counts of
    the node's domains only — of pods matching all the pod's affinity terms (and their total,
    for the first-pod escape), of pods matching each of its anti-affinity terms, and of owners
    of placed pods' anti-affinity terms matching the pod, term by term (the state's counters)."""

    def __init__(self, pod: PodInfo, pre: AffinityCounts, state: ClusterState, node: int) -> None:
        self.state = state
        self.self_match = pre.self_match
        self.has_affinity = bool(pre.affinity)
        self.no_key = any(ids[node] < 0 for _, ids, _ in pre.affinity)
        self.all_terms = state.matcher(AllTerms(pod.affinity)) if pod.affinity else None
        # per affinity term with the key on the node: [count in its domain, count anywhere]
        self.affinity = [[int(per_domain[ids[node]]), int(per_domain.sum())]
                         for _, ids, per_domain in pre.affinity if ids[node] >= 0]
        # whether each counted term's domain is the node itself (``add_beside`` leaves it be)
        self.affinity_on_host = [term.topology_key == HOSTNAME_LABEL
                                 for term, ids, _ in pre.affinity if ids[node] >= 0]
        self.total_absent = sum(1 for _, ids, per_domain in pre.affinity if ids[node] < 0 and per_domain.any())
        # per anti-affinity term with the key on the node: whether it matches a pod, and the
        # matching pods in its domain
        anti = [(term, int(per_domain[ids[node]])) for term, ids, per_domain in pre.anti if ids[node] >= 0]
        self.anti_matches = [state.matcher(PodMatcher.of_term(term)) for term, _ in anti]
        self.anti = [count for _, count in anti]
        self.anti_on_host = [term.topology_key == HOSTNAME_LABEL for term, _ in anti]
        # placed pods' anti-affinity terms matching the pod: owners in the node's domain
        self.existing: dict[AffinityTerm, int] = {}
        book = term_book(state)
        for term in book.terms_matching(pod):
            ids = state.domains(term.topology_key)[0]
            if ids[node] >= 0:
                self.existing[term] = int(book.owners[term][ids == ids[node]].sum())
        self._start = (tuple(tuple(c) for c in self.affinity), tuple(self.anti),
                       frozenset(self.existing.items()))

    def _change(self, pod: PodInfo, delta: int, on_host: bool = True) -> None:
        # ``on_host`` False: the pod is on another node sharing every domain of this one but its
        # hostname's, and counts only in the domains of other keys
        if self.all_terms is not None and self.all_terms(pod):
            for counts, host in zip(self.affinity, self.affinity_on_host):
                counts[1] += delta
                counts[0] += delta if on_host or not host else 0
        for i, matches in enumerate(self.anti_matches):
            if (on_host or not self.anti_on_host[i]) and matches(pod):
                self.anti[i] += delta
        for term in pod.anti_affinity:
            if term in self.existing and (on_host or term.topology_key != HOSTNAME_LABEL):
                self.existing[term] += delta

    def remove_pod(self, pod: PodInfo) -> None:
        self._change(pod, -1)

    def add_pod(self, pod: PodInfo) -> None:
        self._change(pod, +1)

    def add_beside(self, pod: PodInfo) -> None:
        """``pod`` comes to a sibling of the node: a node with all its labels but its hostname
        (another node of a shape, for ``provision``'s support): it counts in the node's domain of
        every key but the hostname."""
        self._change(pod, +1, on_host=False)

    def reads(self) -> tuple:
        return self._start  # the counts of the node's domains, as the dry run began

    def fits(self) -> bool:
        return self.status().ok

    def status(self) -> Status:
        if self.has_affinity:
            if self.no_key:
                return STATUSES[1]
            missing = any(here <= 0 for here, _ in self.affinity)
            empty = not self.total_absent and all(total <= 0 for _, total in self.affinity)
            if missing and not (empty and self.self_match):
                return STATUSES[1]
        if any(count > 0 for count in self.anti):
            return STATUSES[2]
        if any(count > 0 for count in self.existing.values()):
            return STATUSES[3]
        return SUCCESS


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> CodedCycle | None:
    """The plugin's ``cycle`` hook: PreFilter; nothing to check when it found nothing."""
    pre = prefilter(pod, state)
    if pre is None:
        return None

    def on_node(node: int) -> NodeDryRun:
        assert pre is not None
        return AffinityOnNode(pod, pre, state, node)

    return CodedCycle(pod, pre, static.nodes, filter, status_codes, STATUSES, feasible, on_node)
