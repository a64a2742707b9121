"""PodTopologySpread (filter, ``whenUnsatisfiable: DoNotSchedule``).

PreFilter counts, per constraint, the matching pods (same namespace, not terminating) in every
eligible domain; a node passes when ``count(domain) + selfMatch − globalMin ≤ maxSkew``, with
globalMin taken as 0 while fewer than minDomains domains exist. Nodes are eligible when they
carry every hard constraint's key and pass the inclusion policies (node affinity honoured by
default, taints ignored by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ...framework import SUCCESS, Status, unresolvable, unschedulable
from ...info import NodeInfo, PodInfo
from ...plugin_api import CodedCycle, NodeDryRun, StaticView
from ...terms import SpreadConstraint
from ..shared.node_inclusion import matches, tolerates
from ...state import ClusterState, PodMatcher

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
    counted: np.ndarray  # per node, whether its matching pods count (eligible, with the key)


def inclusion_masks(static: StaticView, pod: PodInfo) -> tuple[np.ndarray, np.ndarray]:
    """The inclusion policies' node masks for ``pod``: the nodes matching its nodeSelector and
    required node affinity (``nodeAffinityPolicy: Honor``), and those whose NoSchedule and
    NoExecute taints it tolerates (``nodeTaintsPolicy: Honor``); cached by the static filters."""
    return (static.node_mask("spread: node affinity", pod, matches),
            static.node_mask("spread: tolerated taints", pod, tolerates))


def eligible_nodes(
    pod: PodInfo, constraints, state: ClusterState, affinity_mask, tolerated_mask, *, policy: SpreadConstraint | None = None
) -> np.ndarray:
    """Nodes that count toward a constraint's domains: the keys of all ``constraints`` present,
    and the inclusion policies of ``policy`` satisfied — kube-scheduler applies them per
    constraint; without ``policy``, those of every constraint apply."""
    mask = np.ones(len(state.nodes), dtype=bool)
    for c in constraints:
        mask &= state.domains(c.topology_key)[0] >= 0
    policies = constraints if policy is None else (policy,)
    if any(c.honor_node_affinity for c in policies):
        mask &= affinity_mask
    if any(c.honor_node_taints for c in policies):
        mask &= tolerated_mask
    return mask


def domain_counts(
    state: ClusterState, matcher: PodMatcher, topology_key: str, eligible: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Matching pods per topology domain over the eligible nodes that carry the key, and which
    domains are eligible (``present``): what a constraint's skew is computed from. Read-only
    arrays, kept current by the state (``ClusterState.domain_counts``)."""
    counts, present, _ = state.domain_counts(matcher, topology_key, eligible)
    return counts, present


def floor_is_zero(domains: int, min_domains: int) -> bool:
    """Whether the global minimum counts as 0: no eligible domain, or fewer than minDomains."""
    return domains == 0 or domains < min_domains


def skew_floor(counts: np.ndarray, present: np.ndarray, min_domains: int) -> int:
    """The global minimum a domain's skew is measured from (SEMANTICS.md, PodTopologySpread): the
    fewest matching pods in an eligible domain (``present``), or 0 while ``floor_is_zero``. The
    filter, greedy's window guard and the validator read it here; the CP-SAT encoding takes the
    minimum over count variables under the same ``floor_is_zero`` condition."""
    if floor_is_zero(int(present.sum()), min_domains):
        return 0
    return int(counts[present].min())


def counts_for(pod: PodInfo, c: SpreadConstraint, state: ClusterState, eligible: np.ndarray) -> ConstraintCounts:
    ids = state.domains(c.topology_key)[0]
    counts, present, counted = state.domain_counts(PodMatcher.of_spread(c.selector, pod.namespace), c.topology_key, eligible)
    global_min = skew_floor(counts, present, c.min_domains)
    self_match = 1 if c.selector.matches(pod.labels) else 0
    return ConstraintCounts(c, ids, counts, present, global_min, self_match, counted)


def prefilter(pod: PodInfo, state: ClusterState, affinity_mask: np.ndarray, tolerated_mask: np.ndarray) -> list[ConstraintCounts]:
    hard = pod.hard_spread
    if not hard:
        return []
    return [
        counts_for(pod, c, state, eligible_nodes(pod, hard, state, affinity_mask, tolerated_mask, policy=c))
        for c in hard
    ]


def filter(pod: PodInfo, node: NodeInfo, pre: list[ConstraintCounts]) -> Status:
    for cc in pre:
        dom = cc.domain_ids[node.index]
        if dom < 0:
            return unresolvable(NAME, REASON_MISSING_LABEL)
        skew = int(cc.domain_counts[dom]) + cc.self_match - cc.global_min
        if skew > cc.constraint.max_skew:
            return unschedulable(NAME, REASON)
    return SUCCESS


# ``status_codes`` answers with indexes into this tuple: the statuses ``filter`` can give.
STATUSES = (SUCCESS, unresolvable(NAME, REASON_MISSING_LABEL), unschedulable(NAME, REASON))


def status_codes(nodes: np.ndarray, pre: list[ConstraintCounts]) -> np.ndarray:
    """``filter`` over many nodes at once: per node, the index in ``STATUSES`` of its status
    (the first constraint that fails decides, as in ``filter``)."""
    codes = np.zeros(len(nodes), dtype=np.int8)
    for cc in pre:
        open_ = codes == 0
        dom = cc.domain_ids[nodes]
        has = dom >= 0
        codes[open_ & ~has] = 1
        if len(cc.domain_counts):
            counts = np.where(has, cc.domain_counts[np.where(has, dom, 0)], 0)
            codes[open_ & has & (counts + cc.self_match - cc.global_min > cc.constraint.max_skew)] = 2
    return codes


def feasible(nodes: np.ndarray, pre: list[ConstraintCounts]) -> np.ndarray:
    ok = np.ones(len(nodes), dtype=bool)
    for cc in pre:
        dom = cc.domain_ids[nodes]
        has = dom >= 0
        if not len(cc.domain_counts):  # no node carries the key at all
            return np.zeros(len(nodes), dtype=bool)
        counts = np.where(has, cc.domain_counts[np.where(has, dom, 0)], 0)
        ok &= has & (counts + cc.self_match - cc.global_min <= cc.constraint.max_skew)
    return ok


class _Floors:
    """One constraint's eligible domains' lowest count, how many domains have it, and the next
    count up: the minimum over every eligible domain but one, for any one, at once."""

    __slots__ = ("zero", "low", "ties", "next")

    def __init__(self, cc: ConstraintCounts) -> None:
        present = cc.eligible_domains
        self.zero = floor_is_zero(int(present.sum()), cc.constraint.min_domains)
        counts = cc.domain_counts[present] if not self.zero else cc.domain_counts[:0]
        self.low = int(counts.min()) if len(counts) else 0
        self.ties = int((counts == self.low).sum()) if len(counts) else 0
        above = counts[counts > self.low]
        self.next: Optional[int] = int(above.min()) if len(above) else None

    def without(self, count: Optional[int]) -> Optional[int]:
        """The minimum over the eligible domains but one whose count is ``count`` (None: that
        domain is not eligible); None when no other domain is eligible."""
        if count is None or count != self.low or self.ties > 1:
            return self.low if self.ties > (count == self.low) else None
        return self.next


class _OnNode:
    """One constraint's counts as the node's verdict reads them: its domain's matching pods and
    the fewest in any other eligible domain (None: none, or the floor is 0 anyway)."""

    __slots__ = ("cc", "matches", "dom", "counted", "count", "here", "zero", "floor_others")

    def __init__(self, cc: ConstraintCounts, floors: _Floors, matches: Callable[[PodInfo], bool], node: int) -> None:
        self.cc = cc
        self.matches = matches
        self.dom = dom = int(cc.domain_ids[node])
        self.counted = bool(cc.counted[node])
        self.count = int(cc.domain_counts[dom]) if dom >= 0 and len(cc.domain_counts) else 0
        self.here = dom >= 0 and bool(cc.eligible_domains[dom])  # the node's domain is eligible
        self.zero = floors.zero
        self.floor_others = None if self.zero else floors.without(self.count if self.here else None)

    def global_min(self) -> int:
        """``skew_floor`` of the counts with this domain's count as it is now."""
        if self.zero:
            return 0
        if not self.here:
            assert self.floor_others is not None  # some domain is eligible
            return self.floor_others
        return self.count if self.floor_others is None else min(self.count, self.floor_others)


class SpreadOnNode:
    """The filter's dry run on one node (``plugin_api.NodeDryRun``; kube-scheduler's
    PreFilterExtensions for PodTopologySpread): a pod leaving or returning changes only its own
    domain's count, and with it perhaps the global minimum, which the other domains' minimum
    (taken once) and this domain's count give at once."""

    def __init__(self, pre: list[ConstraintCounts], floors: list[_Floors], matchers: list[Callable[[PodInfo], bool]],
                 node: int) -> None:
        self.constraints = [_OnNode(cc, f, m, node) for cc, f, m in zip(pre, floors, matchers)]
        self._start = tuple((c.count, c.floor_others) for c in self.constraints)

    def _change(self, pod: PodInfo, delta: int) -> None:
        for c in self.constraints:
            if c.counted and c.matches(pod):
                c.count += delta

    def remove_pod(self, pod: PodInfo) -> None:
        self._change(pod, -1)

    def add_pod(self, pod: PodInfo) -> None:
        self._change(pod, +1)

    def reads(self) -> tuple:
        return self._start  # per constraint: the domain's count, the other domains' minimum

    def fits(self) -> bool:
        return self.status().ok

    def status(self) -> Status:
        for c in self.constraints:
            if c.dom < 0:
                return STATUSES[1]
            if c.count + c.cc.self_match - c.global_min() > c.cc.constraint.max_skew:
                return STATUSES[2]
        return SUCCESS


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> CodedCycle | None:
    """The plugin's ``cycle`` hook: PreFilter; nothing to check when it found nothing."""
    pre = prefilter(pod, state, *inclusion_masks(static, pod))
    if not pre:
        return None

    # made at the first dry run, for every node's: each constraint's floors and which pods it counts
    floors: list[_Floors] = []
    matchers: list[Callable[[PodInfo], bool]] = []

    def on_node(node: int) -> NodeDryRun:
        if not floors:
            floors.extend(_Floors(cc) for cc in pre)
            matchers.extend(state.matcher(PodMatcher.of_spread(cc.constraint.selector, pod.namespace)) for cc in pre)
        return SpreadOnNode(pre, floors, matchers, node)

    return CodedCycle(pod, pre, static.nodes, filter, status_codes, STATUSES, feasible, on_node)
