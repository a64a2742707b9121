"""InterPodAffinity (score): preferred pod affinity and anti-affinity, both directions.

PreScore builds a weight per topology pair ``(key, value)`` from every existing pod E on a
node M whose labels have ``key = value``:

* each preferred affinity term of the incoming pod that E matches adds its weight, each
  preferred anti-affinity term subtracts it;
* each *required* affinity term of E that the incoming pod matches adds
  ``hardPodAffinityWeight`` (unless that is 0); each preferred affinity term of E the
  incoming pod matches adds its weight, each preferred anti-affinity term subtracts it.

kube-scheduler visits every pod when the incoming pod has preferred terms and only pods with
pod (anti-)affinity otherwise; the result is the same, because without incoming terms only
the existing pods' own terms can contribute. The incoming pod's terms are evaluated with the
per-node match counts the cluster state keeps (a bincount over the term's domains). The
existing pods' terms are walked from the plugin's book (``TermBook.scored``); equal terms of different pods
(replicas) are interned once per snapshot, so each distinct term is matched against the
incoming pod once, not once per pod.

A node's raw score sums the weights of the pairs it carries. If no pair was ever touched the
plugin is skipped; otherwise the raw scores are normalized over the feasible nodes as
``int64(100 × ((raw − min) / (max − min)))`` in float64, in that order, and 0 when max == min.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...info import PodInfo
from ...state import ClusterState, PodMatcher
from ...terms import AffinityTerm
from ..helper import MAX_NODE_SCORE
from .book import term_book

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "InterPodAffinity"


@dataclass
class _Interned:
    """Existing pods' scoring terms as small integers, kept for the whole snapshot."""

    ids: dict[AffinityTerm, int] = field(default_factory=dict)
    terms: list[AffinityTerm] = field(default_factory=list)
    # pod key -> (the PodInfo it was built from, ((term id, amount), ...))
    pods: dict[str, tuple[PodInfo, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    # (term id, incoming pod's namespace and labels) -> whether the term matches that pod
    verdicts: dict[tuple[int, tuple], bool] = field(default_factory=dict)

    def term_id(self, term: AffinityTerm) -> int:
        tid = self.ids.get(term)
        if tid is None:
            tid = self.ids[term] = len(self.terms)
            self.terms.append(term)
        return tid

    def items(self, existing: PodInfo, hard_weight: int) -> tuple[tuple[int, int], ...]:
        """What ``existing`` adds where one of its terms matches the incoming pod."""
        hit = self.pods.get(existing.key)
        if hit is None or hit[0] is not existing:
            items = []
            if hard_weight > 0:
                items += [(self.term_id(t), hard_weight) for t in existing.affinity]
            items += [(self.term_id(t), t.weight) for t in existing.preferred_affinity]
            items += [(self.term_id(t), -t.weight) for t in existing.preferred_anti_affinity]
            hit = self.pods[existing.key] = (existing, tuple(items))
        return hit[1]

    def matches(self, tid: int, pod: PodInfo) -> bool:
        key = (tid, pod.match_key)
        hit = self.verdicts.get(key)
        if hit is None:
            hit = self.verdicts[key] = self.terms[tid].matches(pod.namespace, pod.labels, pod.ns_labels)
        return hit


class _TopologyWeights:
    """``W[(key, value)]`` kept as one int64 array over each key's domain ids."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.by_key: dict[str, np.ndarray] = {}
        self.touched = False

    def _row(self, key: str) -> np.ndarray:
        row = self.by_key.get(key)
        if row is None:
            row = self.by_key[key] = np.zeros(len(self.state.domains(key)[1]), dtype=np.int64)
        return row

    def add_term_counts(self, term: AffinityTerm, sign: int) -> None:
        """An incoming term: ``sign × weight`` for every existing pod it matches, per domain."""
        counts = self.state.match_counts(PodMatcher.of_term(term))
        ids, values = self.state.domains(term.topology_key)
        counted = (counts > 0) & (ids >= 0)
        if not counted.any():
            return
        per_domain = np.bincount(ids[counted], weights=counts[counted], minlength=len(values))
        self._row(term.topology_key)[:] += sign * term.weight * per_domain.astype(np.int64)
        self.touched = True

    def add_at_nodes(self, key: str, nodes: list[int], amounts: list[int]) -> None:
        """Existing pods' terms: each amount at the domain of its node under ``key``, if any."""
        domain = self.state.domains(key)[0][np.array(nodes, dtype=np.int64)]
        has = domain >= 0
        if not has.any():
            return
        np.add.at(self._row(key), domain[has], np.array(amounts, dtype=np.int64)[has])
        self.touched = True

    def raw(self, nodes: np.ndarray) -> np.ndarray:
        total = np.zeros(len(nodes), dtype=np.int64)
        for key, row in self.by_key.items():
            ids = self.state.domains(key)[0][nodes]
            total += np.where(ids >= 0, row[np.maximum(ids, 0)], 0)
        return total


def topology_weights(pod: PodInfo, state: ClusterState, sctx: "ScoreContext") -> _TopologyWeights:
    weights = _TopologyWeights(state)
    for term in pod.preferred_affinity:
        weights.add_term_counts(term, +1)
    for term in pod.preferred_anti_affinity:
        weights.add_term_counts(term, -1)

    interned = sctx.memo.get(NAME)
    if interned is None:
        interned = sctx.memo[NAME] = _Interned()
    hard_weight = sctx.scoring.hard_pod_affinity_weight
    pending: dict[str, tuple[list[int], list[int]]] = {}  # topology key -> (nodes, amounts)
    verdict: dict[int, bool] = {}  # this pod's verdicts by term id, without rehashing its labels
    for key, existing in term_book(state).scored.items():
        items = interned.items(existing, hard_weight)
        if not items:
            continue
        node = state.where[key]
        for tid, amount in items:
            hit = verdict.get(tid)
            if hit is None:
                hit = verdict[tid] = interned.matches(tid, pod)
            if hit:
                at = pending.setdefault(interned.terms[tid].topology_key, ([], []))
                at[0].append(node)
                at[1].append(amount)
    for key, (nodes, amounts) in pending.items():
        weights.add_at_nodes(key, nodes, amounts)
    return weights


def normalize(raw: np.ndarray) -> np.ndarray:
    if len(raw) == 0:
        return raw.astype(np.int64)
    low, high = int(raw.min()), int(raw.max())
    spread = high - low
    if spread <= 0:
        return np.zeros(len(raw), dtype=np.int64)
    fraction = (raw - low).astype(np.float64) / np.float64(spread)
    return (np.float64(MAX_NODE_SCORE) * fraction).astype(np.int64)


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray | None:
    weights = topology_weights(pod, state, sctx)
    if not weights.touched:
        return None
    return normalize(weights.raw(nodes))
