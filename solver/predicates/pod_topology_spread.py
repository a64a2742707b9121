"""PodTopologySpread (filter, ``whenUnsatisfiable: DoNotSchedule``).

PreFilter counts, per constraint, the matching pods (same namespace, not terminating) in every
eligible domain; a node passes when ``count(domain) + selfMatch − globalMin ≤ maxSkew``, with
globalMin taken as 0 while fewer than minDomains domains exist. Nodes are eligible when they
carry every hard constraint's key and pass the inclusion policies (node affinity honoured by
default, taints ignored by default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..framework import SUCCESS, Status, unresolvable, unschedulable
from ..info import NodeInfo, PodInfo
from ..terms import SpreadConstraint
from ..state import ClusterState, PodMatcher

NAME = "PodTopologySpread"
# The node lacks a constraint's topology key.
REASON_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
# Placing the pod here would exceed maxSkew.
REASON = "node(s) didn't match pod topology spread constraints"


@dataclass(frozen=True)
class ConstraintCounts:
    constraint: SpreadConstraint
    domain_ids: np.ndarray  # per node, its domain id under the key (−1: no label)
    domain_counts: np.ndarray  # per domain id, matching pods on eligible nodes
    eligible_domains: np.ndarray  # per domain id, whether some eligible node is in it
    global_min: int
    self_match: int


def eligible_nodes(pod: PodInfo, constraints, state: ClusterState, affinity_mask, tolerated_mask) -> np.ndarray:
    """Nodes that count toward domains: all keys present, inclusion policies satisfied."""
    mask = np.ones(len(state.nodes), dtype=bool)
    for c in constraints:
        mask &= state.domains(c.topology_key)[0] >= 0
    if any(c.honor_node_affinity for c in constraints):
        mask &= affinity_mask
    if any(c.honor_node_taints for c in constraints):
        mask &= tolerated_mask
    return mask


def counts_for(pod: PodInfo, c: SpreadConstraint, state: ClusterState, eligible: np.ndarray) -> ConstraintCounts:
    ids, values = state.domains(c.topology_key)
    per_node = state.match_counts(PodMatcher.of_spread(c.selector, pod.namespace))
    sel = eligible & (ids >= 0)
    counts = np.bincount(ids[sel], weights=per_node[sel], minlength=len(values)).astype(np.int64)
    present = np.zeros(len(values), dtype=bool)
    present[ids[sel]] = True
    if present.sum() < c.min_domains or not present.any():
        global_min = 0
    else:
        global_min = int(counts[present].min())
    self_match = 1 if c.selector.matches(pod.labels) else 0
    return ConstraintCounts(c, ids, counts, present, global_min, self_match)


def prefilter(pod: PodInfo, state: ClusterState, affinity_mask: np.ndarray, tolerated_mask: np.ndarray) -> list[ConstraintCounts]:
    hard = pod.hard_spread
    if not hard:
        return []
    eligible = eligible_nodes(pod, hard, state, affinity_mask, tolerated_mask)
    return [counts_for(pod, c, state, eligible) for c in hard]


def filter(pod: PodInfo, node: NodeInfo, pre: list[ConstraintCounts]) -> Status:
    for cc in pre:
        dom = cc.domain_ids[node.index]
        if dom < 0:
            return unresolvable(NAME, REASON_MISSING_LABEL)
        skew = int(cc.domain_counts[dom]) + cc.self_match - cc.global_min
        if skew > cc.constraint.max_skew:
            return unschedulable(NAME, REASON)
    return SUCCESS


def feasible(nodes: np.ndarray, pre: list[ConstraintCounts]) -> np.ndarray:
    ok = np.ones(len(nodes), dtype=bool)
    for cc in pre:
        dom = cc.domain_ids[nodes]
        has = dom >= 0
        counts = np.where(has, cc.domain_counts[np.where(has, dom, 0)], 0)
        ok &= has & (counts + cc.self_match - cc.global_min <= cc.constraint.max_skew)
    return ok
