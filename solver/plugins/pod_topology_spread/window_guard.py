"""Keep one-at-a-time placement inside the window's final-state rules.

kube-scheduler checks a pod's topology spread only when that pod is placed; a later pod that
merely *matches* the selector may still land in the same domain and push its skew past maxSkew
— legal sequentially, but the window's final state (DESIGN.md, "Window semantics") must hold for
every window pod. Greedy therefore refuses, for each new pod, the domains where it would break
the spread constraint of a window pod placed before it. Only greedy needs this: the CP-SAT
model states the final-state rule directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...info import PodInfo
from ...plugin_api import OPEN, Gate, GreedyPart, PassResult
from ...plugin_api import StaticView as StaticFilters
from . import filter as pod_topology_spread
from ...state import ClusterState, PodMatcher
from ...terms import LabelKeys, PairIndex, SpreadConstraint, required_pair

# Nodes refused by the guard, in the FitError histogram.
REASON = "node(s) would break the topology spread of pods placed earlier in the window"


@dataclass(frozen=True)
class _Guard:
    constraint: SpreadConstraint
    namespace: str
    eligible: bytes  # eligible-node mask of the placed pod, as bytes (hashable)
    domain: int


class SpreadGuard:
    def __init__(self, state: ClusterState, static: StaticFilters) -> None:
        self.state = state
        self.static = static
        self.guards: set[_Guard] = set()
        self._order: list[_Guard] = []  # ``guards`` in the order they came
        # Per (namespace, labels) of the pods asking: how many guards were asked, those that
        # apply (a window of hundreds of spread apps has hundreds of guards, and every pod asks).
        self._applying: dict[tuple, tuple[int, list[_Guard]]] = {}
        self._keys = LabelKeys()  # the label keys the guards' selectors read: ``_applying``'s keys
        self._eligible: dict[bytes, np.ndarray] = {}
        # ``_order``'s positions by the label pair each guard's selector requires: a pod is asked
        # only about the guards that may count it (at 5,000 nodes every pod asked each new guard:
        # 5% of greedy's pass).
        self._index = PairIndex()

    def placed(self, pod: PodInfo, node: int) -> None:
        """Remember the spread constraints a newly placed window pod must keep satisfied."""
        hard = pod.hard_spread
        for c in hard:
            mask = pod_topology_spread.eligible_nodes(
                pod, hard, self.state, *pod_topology_spread.inclusion_masks(self.static, pod), policy=c
            )
            ids = self.state.domains(c.topology_key)[0]
            if ids[node] < 0 or not mask[node]:
                continue
            key = mask.tobytes()
            self._eligible.setdefault(key, mask)
            guard = _Guard(c, pod.namespace, key, int(ids[node]))
            if guard not in self.guards:
                self.guards.add(guard)
                self._index.add(required_pair(c.selector))
                self._order.append(guard)
                if self._keys.add(c.selector):
                    self._applying = {}

    def _guards_of(self, pod: PodInfo) -> list[_Guard]:
        """The guards whose constraint counts ``pod`` (same namespace, selector matching)."""
        key = self._keys.of(pod.namespace, pod.labels)
        hit = self._applying.get(key)
        if hit is None or hit[0] != len(self._order):
            seen, found = hit if hit is not None else (0, [])
            order = self._order
            more = [g for g in map(order.__getitem__, self._index.candidates(pod.labels, seen))
                    if g.namespace == pod.namespace and g.constraint.selector.matches(pod.labels)]
            hit = self._applying[key] = (len(order), found + more if more else found)
        return hit[1]

    def allowed(self, pod: PodInfo) -> np.ndarray | None:
        """Nodes where ``pod`` keeps every guarded constraint; None when none applies to it."""
        mask = None
        for g in self._guards_of(pod):
            c = g.constraint
            eligible = self._eligible[g.eligible]
            ids = self.state.domains(c.topology_key)[0]
            matcher = PodMatcher.of_spread(c.selector, g.namespace)
            counts, present = pod_topology_spread.domain_counts(self.state, matcher, c.topology_key, eligible)
            counts = counts.copy()  # (the state's, read-only)
            counts[g.domain] += 1
            low = pod_topology_spread.skew_floor(counts, present, c.min_domains)
            if counts[g.domain] - low > c.max_skew:
                refuse = eligible & (ids == g.domain)
                mask = ~refuse if mask is None else mask & ~refuse
        return mask


class GuardPass(GreedyPart):
    """The guard in greedy's pass (``plugin_api.GreedyPart``): each pod's turn is narrowed to
    the nodes it keeps every guarded constraint on; each placement guards its constraints."""

    def __init__(self, state: ClusterState, static: StaticFilters) -> None:
        self.guard = SpreadGuard(state, static)

    def gate(self, pod: PodInfo, state: ClusterState, result: PassResult) -> Gate:
        allowed = self.guard.allowed(pod)
        return OPEN if allowed is None else Gate(within=allowed, outside=REASON)

    def placed(self, pod: PodInfo, node: int, preempted: bool) -> None:
        self.guard.placed(pod, node)
