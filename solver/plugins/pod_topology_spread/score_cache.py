"""PodTopologySpread (ScheduleAnyway) in greedy's score cache (``scoring/cache.py`` asks the
plugin's ``score_cache`` hook, never this module by name): it reads pod counts of other nodes
and domains, so it is computed per pod, with its constraints, domain tables and masks prepared
once per pod class and workload selector, and each float computed from the same operands by the
same operations as ``score.py``, so the totals are the plugin's bit for bit. The system default
selector is derived from *all* of a pod's labels and its owner, which the class does not fix, so
constraints are resolved per class, labels and owner, and tables kept per class and resolved
constraints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ...info import PodInfo
from ...state import ClusterState, PodMatcher
from ..helper import MAX_NODE_SCORE, go_log, round_half_away
from . import score


@dataclass
class _Constraint:
    """One soft constraint of a pod class; for a non-hostname key it also keeps the matching
    pods per domain over the counted nodes, brought up to date from the changes to the state's
    counter of its selector (``ClusterState.counter_changes``)."""

    key: str
    hostname: bool
    labelled: Optional[np.ndarray]  # nodes carrying the key; None: every node does
    domain: np.ndarray  # per node its domain id, nodes without the label in the "" domain
    domains: int  # number of domain ids (the last one: "" when no node has that value)
    counted: np.ndarray  # nodes whose matching pods count into their domain
    counted_domain: np.ndarray
    matcher: Optional[PodMatcher]  # None: the selector counts no pod
    skew: float  # maxSkew − 1
    per_node: Optional[np.ndarray] = None  # matching pods per node (the state's live counter)
    changes: Optional[list[tuple[int, int]]] = None  # that counter's changes, (node, delta)
    counts_at: Optional[list[bool]] = None  # per node: counted (Python list, for one-node updates); None: hostname key
    domain_list: Optional[list[int]] = None  # ``domain`` as a Python list; None: hostname key
    per_domain: Optional[np.ndarray] = None
    seen: int = 0  # len(changes) when ``per_domain`` was last brought up to date


@dataclass
class _Spread:
    """One pod class's soft spread constraints with everything that does not change per pod."""

    constraints: list[_Constraint]
    carries_all: Optional[np.ndarray]  # requireAll: nodes with every key; None: no node ignored


class SpreadPart:
    """The plugin's part in one score cache. ``owner``: the cache, whose ``recount_after`` says
    beyond how many placements since a constraint's domain counts were last brought up to date
    they are recounted over every node instead of node by node."""

    def __init__(self, state: ClusterState, sctx: Any, weight: int, owner: Any) -> None:
        self.state, self.sctx, self.weight, self.owner = state, sctx, weight, owner
        self._constraints: dict[tuple, tuple] = {}  # (class, labels, owner) -> soft constraints, requireAll
        self._spread: dict[tuple, Optional[_Spread]] = {}  # (class, constraints, requireAll) -> tables
        self._logs: dict[int, float] = {}

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> None:
        return None

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> Optional[np.ndarray]:
        spread = self._spread_of(pod)
        return None if spread is None else self.weight * self._spread_scores(spread, nodes)

    def _spread_of(self, pod: PodInfo) -> Optional[_Spread]:
        """The pod's spread tables, shared by the pods of its class with the same constraints
        (the system default selector is made of a pod's labels, which its class does not fix;
        labels it leaves out, such as a StatefulSet pod's name, do not split the tables)."""
        if pod.class_id < 0:
            return self._build_spread(pod, *score.soft_constraints(pod))
        owner = score.controller_owner(pod)
        labels = (pod.class_id, pod.match_key, (owner.kind, owner.api_version) if owner is not None else None)
        constraints = self._constraints.get(labels)
        if constraints is None:
            constraints = self._constraints[labels] = score.soft_constraints(pod)
        key = (pod.class_id, *constraints)
        if key not in self._spread:
            self._spread[key] = self._build_spread(pod, *constraints)
        return self._spread[key]

    def _build_spread(self, pod: PodInfo, constraints: tuple, require_all: bool) -> Optional[_Spread]:
        if not constraints:
            return None
        index = self.sctx.index
        tables = [index.domain(c.topology_key) for c in constraints]
        carries_all = np.ones(index.size, dtype=bool)
        if require_all:
            for ids, _, _ in tables:
                carries_all &= ids >= 0
        out = []
        for c, (ids, ids_of, values) in zip(constraints, tables):
            hostname = c.topology_key == score.HOSTNAME_KEY
            blank = ids_of.get("", len(values))
            domain = np.where(ids >= 0, ids, blank)
            counted = carries_all.copy()
            if not hostname:
                if c.honor_node_affinity:
                    counted &= index.required_affinity_mask(pod)
                if c.honor_node_taints:
                    counted &= index.tolerated_mask(pod.tolerations)
            where = np.flatnonzero(counted)
            counts_at = None if hostname else counted.tolist()
            domain_list = None if hostname else domain.tolist()
            nothing = c.selector.nothing or c.selector.is_empty
            out.append(
                _Constraint(
                    key=c.topology_key,
                    hostname=hostname,
                    labelled=None if bool((ids >= 0).all()) else ids >= 0,
                    domain=domain,
                    domains=len(values) + 1,
                    counted=where,
                    counted_domain=domain[where],
                    matcher=None if nothing else PodMatcher.of_spread(c.selector, pod.namespace),
                    skew=float(c.max_skew - 1),
                    counts_at=counts_at,
                    domain_list=domain_list,
                )
            )
        return _Spread(out, None if bool(carries_all.all()) else carries_all)

    def _log(self, size: int) -> float:
        hit = self._logs.get(size)
        if hit is None:
            hit = self._logs[size] = go_log(float(size + 2))
        return hit


    def _per_domain(self, c: _Constraint, per_node: np.ndarray) -> np.ndarray:
        """Matching pods per domain over ``c``'s counted nodes (the plugin's bincount), caught up
        on the counter's changes since the last ask: a class met again after a thousand
        placements of other classes reads the few of its own selector's pods among them."""
        changes = c.changes
        assert changes is not None  # set with ``per_node``
        if c.per_domain is None or len(changes) - c.seen > self.owner.recount_after:
            c.per_domain = np.bincount(c.counted_domain, weights=per_node[c.counted], minlength=c.domains).astype(np.int64)
        elif c.seen < len(changes):
            # (a non-hostname key has the per-node lists)
            assert c.counts_at is not None and c.domain_list is not None
            for node, delta in changes[c.seen:]:
                if c.counts_at[node]:
                    c.per_domain[c.domain_list[node]] += delta
        c.seen = len(changes)
        return c.per_domain

    def _spread_scores(self, spread: _Spread, nodes: np.ndarray) -> np.ndarray:
        """The plugin's score over ``nodes``, each float computed from the same operands by the
        same operations as the plugin does.

        Counting per domain over the nodes that count (carrying every key, passing the
        inclusion policies) without first restricting to the domains the feasible nodes
        register changes only the counts of domains no kept node is in, and those are read
        by ignored nodes alone, which score 0 whatever their raw value. A domain's term
        ``count × weight + (maxSkew − 1)`` is computed once per domain and then gathered:
        the same float per node as computing it node by node."""
        state = self.state
        ignored = None if spread.carries_all is None else ~spread.carries_all[nodes]
        kept = nodes if ignored is None else nodes[~ignored]
        total: Optional[np.ndarray] = None
        for c in spread.constraints:
            per_node = c.per_node
            if per_node is None and c.matcher is not None:
                # The state's own counter, registered once and kept current by add/remove.
                per_node = c.per_node = state.match_counts(c.matcher)
                c.changes = state.counter_changes(c.matcher)
            if c.hostname:
                count = per_node[nodes] if per_node is not None else np.zeros(len(nodes), dtype=np.int64)
                term = count.astype(np.float64) * self._log(len(kept)) + c.skew
            else:
                domain = c.domain[nodes]
                registered = np.zeros(c.domains, dtype=bool)
                registered[domain if ignored is None else c.domain[kept]] = True
                weight = self._log(int(np.count_nonzero(registered)))
                if per_node is None:
                    per_domain = np.zeros(c.domains, dtype=np.int64)
                else:
                    per_domain = self._per_domain(c, per_node)
                term = (per_domain.astype(np.float64) * weight + c.skew)[domain]
            # The plugin adds each term to a running total that starts at 0.0; 0.0 + t is t
            # for every t ≥ 0, so the first term can stand as the total.
            if c.labelled is None:
                total = term if total is None else total + term
            else:
                base = np.zeros(len(nodes), dtype=np.float64) if total is None else total
                total = np.where(c.labelled[nodes], base + term, base)
        assert total is not None  # a _Spread has at least one constraint (``_build_spread``)
        raw = round_half_away(total)
        if ignored is not None:
            scored = ~ignored
            if not scored.any():
                return np.zeros(len(nodes), dtype=np.int64)
            scored_raw = raw[scored]
        else:
            scored_raw = raw
        low, high = int(scored_raw.min()), int(scored_raw.max())
        if high == 0:
            values = np.full(len(scored_raw), MAX_NODE_SCORE, dtype=np.int64)
        else:
            values = MAX_NODE_SCORE * (high + low - scored_raw) // high
        if ignored is None:
            return values
        out = np.zeros(len(nodes), dtype=np.int64)
        out[scored] = values
        return out
