"""InterPodAffinity's own bookkeeping on a state (its Reserve and Unreserve as pods come and go):
the required anti-affinity terms the pods in the state hold, with their owners per node, and the
pods whose terms the score reads. Every pod's PreFilter asks which held terms match it, so the
answer is remembered per (namespace, labels) and only extended as terms come."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import numpy as np

from ...info import PodInfo
from ...state import Book, ClusterState
from ...terms import AffinityTerm, LabelKeys

NAME = "InterPodAffinity"  # the plugin's name: its book's key in ``ClusterState.books``


class TermBook(Book):
    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        # Required anti-affinity terms of pods in the state: term -> owners per node.
        self.owners: dict[AffinityTerm, np.ndarray] = {}
        # ``terms_matching``'s memo: terms as they came into ``owners``, how many times one left
        # it, and per (namespace, labels) what was found when.
        self._added: list[AffinityTerm] = []
        self._dropped = 0
        self._matching: dict[tuple, tuple[int, int, list[AffinityTerm]]] = {}
        self._keys = LabelKeys()  # the label keys the held terms read: the memo's keys
        # Pods with a term the score reads (required affinity, preferred affinity and
        # anti-affinity; never required anti-affinity, which only filters).
        self.scored: dict[str, PodInfo] = {}

    @staticmethod
    def make(state: ClusterState) -> TermBook:
        return TermBook(len(state.nodes))

    # -- Reserve / Unreserve -----------------------------------------------------------------

    def reserve(self, pod: PodInfo, node: int) -> None:
        if pod.anti_affinity or pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity:
            self._count(pod, node, +1)

    def reserve_many(self, placed: list[tuple[PodInfo, int]]) -> None:
        for pod, node in placed:
            if pod.anti_affinity or pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity:
                self._count(pod, node, +1)

    def unreserve(self, pod: PodInfo, node: int) -> None:
        if pod.anti_affinity or pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity:
            self._count(pod, node, -1)

    def _count(self, pod: PodInfo, node: int, delta: int) -> None:
        """The pod's own terms counted in or out: its required anti-affinity terms' owners on
        ``node``, and whether it is among the pods the score reads."""
        for term in pod.anti_affinity:
            owners = self.owners.get(term)
            if owners is None:
                owners = self.owners[term] = np.zeros(self.nodes, dtype=np.int64)
                self._added.append(term)
                if self._keys.add(term.selector):
                    self._matching = {}
            owners[node] += delta
            if delta < 0 and not owners.any():
                del self.owners[term]
                self._dropped += 1
        if pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity:
            if delta > 0:
                self.scored[pod.key] = pod
            else:
                self.scored.pop(pod.key, None)

    def copy(self) -> TermBook:
        other = TermBook.__new__(TermBook)
        other.nodes = self.nodes
        other.owners = {t: c.copy() for t, c in self.owners.items()}
        other._added = list(other.owners)
        other._dropped = 0
        other._matching = {}
        other._keys = self._keys_of(other._added)
        other.scored = self.scored.copy()
        return other

    @staticmethod
    def _keys_of(terms: list[AffinityTerm]) -> LabelKeys:
        keys = LabelKeys()
        for term in terms:
            keys.add(term.selector)
        return keys

    def merged(self, members: list[list[int]]) -> TermBook:
        """The owners summed over each group of nodes; the same pods scored."""
        to = np.empty(self.nodes, dtype=np.int64)
        for k, group in enumerate(members):
            to[group] = k
        out = TermBook(len(members))
        for term, owners in self.owners.items():
            out.owners[term] = np.bincount(to, weights=owners, minlength=len(members)).astype(np.int64)
        out._added = list(out.owners)
        out._keys = self._keys_of(out._added)
        out.scored = dict(self.scored)
        return out

    # -- what the plugin and the engines read ------------------------------------------------

    def term_owners(self) -> Mapping[AffinityTerm, np.ndarray]:
        """``plugin_api.TermOwners``: the held terms and their owners per node."""
        return self.owners

    def keeps_nodes_apart(self) -> Optional[str]:
        """``plugin_api.KeepsNodesApart``: nodes cannot be merged into classes while running pods
        hold terms (the owners' nodes and the scored pods' domains tell them apart)."""
        if self.owners or self.scored:
            return "running pods hold inter-pod (anti-)affinity terms"
        return None

    def terms_matching(self, pod: PodInfo) -> list[AffinityTerm]:
        """The held terms that match ``pod`` (in ``owners``' order until one leaves): remembered
        per namespace and the labels the terms read (``LabelKeys``) and extended by the terms
        that came since, asked afresh only after one left. Every pod's PreFilter asks; a window
        of hundreds of anti-affinity apps has hundreds."""
        key = self._keys.of(pod.namespace, pod.labels)
        hit = self._matching.get(key)
        added = self._added
        if hit is None or hit[1] != self._dropped:
            found = [t for t in self.owners if t.matches(pod.namespace, pod.labels, pod.ns_labels)]
            hit = self._matching[key] = (len(added), self._dropped, found)
        elif hit[0] != len(added):
            more = [t for t in added[hit[0]:] if t.matches(pod.namespace, pod.labels, pod.ns_labels)]
            hit = self._matching[key] = (len(added), hit[1], hit[2] + more if more else hit[2])
        return hit[2]

    def owner_pods(self, state: ClusterState, term: AffinityTerm) -> list[tuple[PodInfo, int]]:
        """The pods in ``state`` whose required anti-affinity holds ``term``, node by node."""
        owners = self.owners.get(term)
        if owners is None:
            return []
        return [(p, n) for n in np.flatnonzero(owners).tolist() for p in state.pods_on[n].values()
                if term in p.anti_affinity]


def term_book(state: ClusterState) -> TermBook:
    """The state's book (made here for a state made before the registry gave it one)."""
    book = state.books.get(NAME)
    if book is None:
        book = TermBook.make(state)
        book.reserve_many(list(state.pods()))
        state.attach(NAME, book)
    assert isinstance(book, TermBook)
    return book
