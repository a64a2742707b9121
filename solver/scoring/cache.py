"""``ScoreCache``: greedy's fast route to the totals ``score_nodes`` computes, bit for bit.

``score_nodes`` stays the reference (and the CP-SAT objective's source); it runs seven plugins
per pod, each a dozen numpy calls whose fixed cost dwarfs the work on a few hundred nodes. The
greedy loop scores thousands of pods of a few classes against a state that changes on one node
per placement, so most of that work repeats. This module splits the total by what it depends on:

* **Node-local, no normalization** — NodeResourcesFit, BalancedAllocation, ImageLocality: a
  node's value depends only on the pod class and that node's own requested amounts. Their
  weighted sum is kept per pod class over *every* node and recomputed only on the nodes in
  ``state.touched`` since it was last brought up to date (the pattern of the predicates'
  ``_local_mask``). ImageLocality does not read the state at all and is computed once.
* **Static raw value, normalized over the feasible nodes** — TaintToleration, NodeAffinity: the
  raw values are computed once per pod class over every node; per pod only the feasible nodes'
  values are gathered and normalized (DefaultNormalizeScore needs their maximum). When no node
  at all has a raw value above 0 the result is a constant (300 for TaintToleration, nothing for
  NodeAffinity) and no gathering happens.
* **Cluster-wide** — PodTopologySpread (soft) and InterPodAffinity read pod counts of other
  nodes and domains, so they are computed per pod: spread with its constraints, domain tables
  and masks prepared once per pod class and workload selector; inter-pod affinity through the
  reference plugin, skipped without a call when nothing can contribute (no preferred terms on
  the pod, no pod with affinity terms in the state — exactly when the plugin would skip).

The per-node kernels below are vectorised over (nodes × resources) instead of resource by
resource, with every integer and float operation kept as the plugins do it (same operands, same
order), so the totals are identical, not just close: ``tests/solver/test_score_cache.py`` checks
them against ``score_nodes`` for every pod of greedy runs over the benchmark workloads and
generated clusters. Class-keyed caches rely on what a pod class guarantees (``PodInfo.
scheduling_signature``: requests, images, tolerations, affinity are equal across the class);
the system default spread selector is derived from *all* of a pod's labels and its owner,
which the class does not fix, so spread constraints are resolved per class, labels and owner,
and spread tables are kept per class and resolved constraints. Pods without a class are scored
without caching anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from models.resources import CPU, MEMORY

from ..info import PodInfo
from ..state import ClusterState, PodMatcher
from . import SCORE_PLUGINS, ScoreContext
from ..plugins.balanced_allocation import score as balanced_allocation
from ..plugins.image_locality import score as image_locality
from ..plugins.inter_pod_affinity import score as inter_pod_affinity
from ..plugins.node_affinity import score as node_affinity
from ..plugins.node_resources_fit import score as node_resources_fit
from ..plugins.pod_topology_spread import score as pod_topology_spread
from ..plugins.taint_toleration import score as taint_toleration
from ..plugins.helper import MAX_NODE_SCORE, broken_linear, go_log, round_half_away

# Columns of the per-node "requested" rows the kernels gather: the two scoring-only non-zero
# requests (cpu, memory) first, then every column of ``state.used``.
_NONZERO_COLUMNS = 2


def _source(pod: PodInfo, state: ClusterState, name: str, *, nonzero: bool) -> Optional[tuple[int, int, int]]:
    """(column in the gathered requested row, allocatable column, amount the pod adds) of one
    configured resource, or None when the plugin leaves it out — the same rules as
    ``node_resources_fit.allocatable_and_requested``."""
    column = node_resources_fit.scored_column(pod, state, name)
    if column is None:
        return None
    pod_request = pod.requests.get(name, 0)
    if nonzero and name == CPU:
        return 0, column, pod.nonzero_cpu
    if nonzero and name == MEMORY:
        return 1, column, pod.nonzero_mem
    return _NONZERO_COLUMNS + column, column, pod_request


class _LocalKernel:
    """Weighted NodeResourcesFit + BalancedAllocation + ImageLocality of one pod class, for any
    set of nodes, from the nodes' current requested amounts."""

    def __init__(
        self, pod: PodInfo, state: ClusterState, sctx: ScoreContext, weights: dict[str, int], alloc_rows: list[list[int]]
    ) -> None:
        self.state = state
        self.alloc_rows = alloc_rows  # state.alloc as Python ints, for ``one``
        every = np.arange(len(state.nodes), dtype=np.int64)
        self.fit_weight = weights[node_resources_fit.NAME]
        self.balance_weight = weights[balanced_allocation.NAME]
        self.strategy = sctx.strategy

        if self.fit_weight:
            picked = [(src, spec.weight) for spec in sctx.scoring.resources if (src := _source(pod, state, spec.name, nonzero=True))]
            self.fit_specs = [(src[0], src[1], src[2], w) for src, w in picked]
            self.fit_pick = np.array([s[0] for s, _ in picked], dtype=np.int64)
            self.fit_add = np.array([s[2] for s, _ in picked], dtype=np.int64)
            self.fit_w = np.array([w for _, w in picked], dtype=np.int64)
            alloc = state.alloc[:, [s[1] for s, _ in picked]]
            self.fit_alloc = alloc
            self.fit_safe = np.maximum(alloc, 1)
            self.fit_has = alloc > 0
            # Σ weights of the resources a node has (allocatable > 0): fixed per node.
            self.fit_wsum_safe = np.maximum(self.fit_has.astype(np.int64) @ self.fit_w, 1)
            self.shape = tuple((p.utilization, p.score * node_resources_fit.SHAPE_SCORE_SCALE) for p in sctx.scoring.shape)

        names = [r.name for r in sctx.scoring.balanced_resources]
        best_effort = all(pod.requests.get(r, 0) == 0 for r in names)
        if sctx.kubernetes_version in balanced_allocation.SKIPS_BEST_EFFORT and best_effort:
            self.balance_weight = 0  # PreScore Skip: the plugin adds nothing
        if self.balance_weight:
            picked_b = [src for name in names if (src := _source(pod, state, name, nonzero=False))]
            self.bal_specs = picked_b
            self.bal_pick = np.array([s[0] for s in picked_b], dtype=np.int64)
            self.bal_add = np.array([s[2] for s in picked_b], dtype=np.int64)
            alloc_b = state.alloc[:, [s[1] for s in picked_b]]
            self.bal_safe = np.maximum(alloc_b, 1).astype(np.float64)
            self.bal_counted = alloc_b > 0
            # The usual case: exactly two resources, both present on every node.
            self.bal_pair = len(picked_b) == 2 and bool(self.bal_counted.all())

        image_weight = weights[image_locality.NAME]
        self.images = None
        if image_weight:
            scores = image_locality.score(pod, every, state, sctx)
            self.images = image_weight * scores
            self.image_list = self.images.tolist()
        # ``one`` covers the strategies whose per-resource score is a single expression.
        self.scalar = not self.fit_weight or self.strategy != node_resources_fit.REQUESTED_TO_CAPACITY_RATIO

    def __call__(self, nodes: np.ndarray) -> np.ndarray:
        state = self.state
        out = self.images[nodes] if self.images is not None else np.zeros(len(nodes), dtype=np.int64)
        if not self.fit_weight and not self.balance_weight:
            return out
        rows = np.concatenate((state.nonzero[nodes], state.used[nodes]), axis=1)
        if self.fit_weight:
            out += self.fit_weight * self._fit(nodes, rows)
        if self.balance_weight:
            out += self.balance_weight * self._balance(nodes, rows)
        return out

    def one(self, node: int) -> int:
        """``self(np.array([node]))[0]`` in Python arithmetic, for the few nodes one placement
        changes: ints for the integer formulas (no value comes near 2**63), floats (IEEE
        doubles, as numpy's) in the same operations and order for BalancedAllocation."""
        state = self.state
        total = self.image_list[node] if self.images is not None else 0
        if not self.fit_weight and not self.balance_weight:
            return total
        row = state.nonzero[node].tolist() + state.used[node].tolist()
        alloc = self.alloc_rows[node]
        if self.fit_weight:
            numerator = weights = 0
            most = self.strategy == node_resources_fit.MOST_ALLOCATED
            for pick, column, add, weight in self.fit_specs:
                a = alloc[column]
                if a > 0:  # with nothing allocatable a resource scores 0 and does not count
                    r = row[pick] + add
                    if most:
                        score = (r if r < a else a) * MAX_NODE_SCORE // a
                    else:
                        score = 0 if r > a else (a - r) * MAX_NODE_SCORE // a
                    numerator += score * weight
                    weights += weight
            total += self.fit_weight * (numerator // weights if weights > 0 else 0)
        if self.balance_weight:
            fractions = []
            for pick, column, add in self.bal_specs:
                a = alloc[column]
                if a > 0:
                    f = float(row[pick] + add) / float(a)
                    fractions.append(1.0 if f > 1.0 else f)
            k = len(fractions)
            if k == 2:
                spread = abs((fractions[0] - fractions[1]) / 2)
            elif k > 2:
                running = 0.0
                for f in fractions:
                    running = running + f
                mean = running / k
                squares = 0.0
                for f in fractions:
                    deviation = f - mean
                    squares = squares + deviation * deviation
                spread = math.sqrt(squares / k)
            else:
                spread = 0.0
            total += self.balance_weight * int((1.0 - spread) * MAX_NODE_SCORE)
        return total

    def _fit(self, nodes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        requested = rows[:, self.fit_pick] + self.fit_add
        alloc, safe = self.fit_alloc[nodes], self.fit_safe[nodes]
        if self.strategy == node_resources_fit.REQUESTED_TO_CAPACITY_RATIO:
            over = (alloc == 0) | (requested > alloc)
            util = np.where(over, node_resources_fit.MAX_UTILIZATION, requested * node_resources_fit.MAX_UTILIZATION // safe)
            value = broken_linear(self.shape, util)
            counts = self.fit_has[nodes] & (value > 0)
            numerator = np.where(counts, value, 0) @ self.fit_w
            weights = counts.astype(np.int64) @ self.fit_w
            return np.where(weights > 0, (2 * numerator + weights) // np.maximum(2 * weights, 1), 0)
        if self.strategy == node_resources_fit.MOST_ALLOCATED:
            per_resource = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
        else:
            per_resource = np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
        # A resource with allocatable 0 scores 0 under both strategies, so only the weight sum
        # needs the "has it" mask; a node without any counted resource gets 0 // 1.
        return (per_resource @ self.fit_w) // self.fit_wsum_safe[nodes]

    def _balance(self, nodes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        requested = rows[:, self.bal_pick] + self.bal_add
        fraction = np.minimum(requested.astype(np.float64) / self.bal_safe[nodes], 1.0)
        if self.bal_pair:
            spread = balanced_allocation.pair_spread(fraction[:, 0], fraction[:, 1])
        else:  # the plugin's own running sums, resource by resource
            counted = self.bal_counted[nodes]
            spread = balanced_allocation.spread([(fraction[:, j], counted[:, j]) for j in range(fraction.shape[1])], len(nodes))
        return balanced_allocation.score_of(spread)


@dataclass
class _Normalized:
    """A plugin's static raw values over every node, normalized per pod over the feasible ones."""

    raw: np.ndarray
    positive: bool  # some node has a raw value above 0
    zero: bool  # every node's raw value is 0

    @staticmethod
    def of(raw: np.ndarray) -> "_Normalized":
        return _Normalized(raw, bool((raw > 0).any()), not raw.any())


@dataclass
class _Constraint:
    """One soft constraint of a pod class; for a non-hostname key it also keeps the matching
    pods per domain over the counted nodes, brought up to date from ``state.touched``."""

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
    counts_at: Optional[list[bool]] = None  # per node: counted (Python list, for one-node updates); None: hostname key
    domain_list: Optional[list[int]] = None  # ``domain`` as a Python list; None: hostname key
    per_domain: Optional[np.ndarray] = None
    last: Optional[list[int]] = None  # per node, the matching pods ``per_domain`` holds for it
    seen: int = 0  # len(state.touched) when ``per_domain`` was last brought up to date


@dataclass
class _Spread:
    """One pod class's soft spread constraints with everything that does not change per pod."""

    constraints: list[_Constraint]
    carries_all: Optional[np.ndarray]  # requireAll: nodes with every key; None: no node ignored


# The plugins whose totals this module re-derives (the rest are asked for their own scores).
_DERIVED = frozenset(p.NAME for p in (balanced_allocation, image_locality, inter_pod_affinity, node_affinity,
                                      node_resources_fit, pod_topology_spread, taint_toleration))


class ScoreCache:
    """``totals(pod, nodes)`` equals ``score_nodes(pod, nodes, state, sctx)`` for the one
    ``state`` given here, as it changes; caches follow it through ``state.touched``."""

    def __init__(self, state: ClusterState, sctx: ScoreContext) -> None:
        self.state = state
        self.sctx = sctx
        self.weights = {p.NAME: sctx.weight(p.NAME) for p in SCORE_PLUGINS}
        self._local: dict[int, tuple[_LocalKernel, int, np.ndarray]] = {}  # class -> kernel, touched seen, values
        self._taints: dict[int, _Normalized] = {}
        self._affinity: dict[int, Optional[_Normalized]] = {}
        self._constraints: dict[tuple, tuple] = {}  # (class, labels, owner) -> soft constraints, requireAll
        self._spread: dict[tuple, Optional[_Spread]] = {}  # (class, constraints, requireAll) -> tables
        self._logs: dict[int, float] = {}
        self._alloc_rows: Optional[list[list[int]]] = None
        # Score plugins this cache does not re-derive (a plugin added to the registry): their
        # own ``score``, as ``score_nodes`` runs it, so the totals stay equal without a line here.
        self._others = tuple(p for p in SCORE_PLUGINS if p.NAME not in _DERIVED and self.weights[p.NAME])

    # Up to this many nodes changed since a class's values were last refreshed, they are
    # recomputed one by one in Python (``_LocalKernel.one``); more, with the numpy kernel.
    scalar_refresh = 8

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=np.int64)
        if len(nodes) == 0:
            return np.zeros(0, dtype=np.int64)
        total = self._local_values(pod, nodes)
        w = self.weights
        if w[taint_toleration.NAME]:
            total += w[taint_toleration.NAME] * self._normalized(self._taint_raw(pod), nodes, reverse=True)
        if w[node_affinity.NAME]:
            raw = self._affinity_raw(pod)
            if raw is not None and not raw.zero:
                total += w[node_affinity.NAME] * self._normalized(raw, nodes, reverse=False)
        if w[pod_topology_spread.NAME]:
            spread = self._spread_of(pod)
            if spread is not None:
                total += w[pod_topology_spread.NAME] * self._spread_scores(spread, nodes)
        if w[inter_pod_affinity.NAME] and (pod.preferred_affinity or pod.preferred_anti_affinity or self.state.affinity_pods):
            scores = inter_pod_affinity.score(pod, nodes, self.state, self.sctx)
            if scores is not None:
                total += w[inter_pod_affinity.NAME] * scores
        for plugin in self._others:
            scores = plugin.score(pod, nodes, self.state, self.sctx)
            if scores is not None:
                total += w[plugin.NAME] * scores
        return total

    # -- node-local plugins --------------------------------------------------------------------

    def _local_values(self, pod: PodInfo, nodes: np.ndarray) -> np.ndarray:
        state = self.state
        if pod.class_id < 0:
            return self._kernel(pod)(nodes)
        hit = self._local.get(pod.class_id)
        touched = state.touched
        if hit is None:
            kernel = self._kernel(pod)
            values = kernel(np.arange(len(state.nodes), dtype=np.int64))
        else:
            kernel, seen, values = hit
            if seen < len(touched):
                fresh = touched[seen:]
                if kernel.scalar and len(fresh) <= self.scalar_refresh:
                    for node in set(fresh):
                        values[node] = kernel.one(node)
                else:
                    changed = np.unique(np.array(fresh, dtype=np.int64))
                    values[changed] = kernel(changed)
        self._local[pod.class_id] = (kernel, len(touched), values)
        return values[nodes]

    def _kernel(self, pod: PodInfo) -> _LocalKernel:
        if self._alloc_rows is None:
            self._alloc_rows = self.state.alloc.tolist()
        return _LocalKernel(pod, self.state, self.sctx, self.weights, self._alloc_rows)

    def _normalized(self, raw: _Normalized, nodes: np.ndarray, *, reverse: bool) -> np.ndarray | int:
        """DefaultNormalizeScore of ``raw`` over ``nodes`` (a scalar when it is one constant)."""
        if reverse and not raw.positive:
            return MAX_NODE_SCORE
        if not reverse and raw.zero:
            return 0
        values = raw.raw[nodes]
        top = int(values.max())
        if top <= 0:
            return MAX_NODE_SCORE if reverse else values
        scaled = MAX_NODE_SCORE * values // top
        return MAX_NODE_SCORE - scaled if reverse else scaled

    def _taint_raw(self, pod: PodInfo) -> _Normalized:
        hit = self._taints.get(pod.class_id) if pod.class_id >= 0 else None
        if hit is None:
            raw = self.sctx.index.prefer_no_schedule_counts(pod.tolerations)
            hit = _Normalized.of(raw)
            if pod.class_id >= 0:
                self._taints[pod.class_id] = hit
        return hit

    def _affinity_raw(self, pod: PodInfo) -> Optional[_Normalized]:
        """NodeAffinity's raw preferred-term weights over every node; None: plugin skipped."""
        if pod.class_id >= 0 and pod.class_id in self._affinity:
            return self._affinity[pod.class_id]
        hit = None
        if pod.preferred_node_terms:
            raw = np.zeros(len(self.state.nodes), dtype=np.int64)
            for weight, term in pod.preferred_node_terms:
                if weight != 0:
                    raw += weight * self.sctx.index.term_mask(term)
            hit = _Normalized.of(raw)
        if pod.class_id >= 0:
            self._affinity[pod.class_id] = hit
        return hit

    # -- PodTopologySpread ---------------------------------------------------------------------

    def _spread_of(self, pod: PodInfo) -> Optional[_Spread]:
        """The pod's spread tables, shared by the pods of its class with the same constraints
        (the system default selector is made of a pod's labels, which its class does not fix;
        labels it leaves out, such as a StatefulSet pod's name, do not split the tables)."""
        if pod.class_id < 0:
            return self._build_spread(pod, *pod_topology_spread.soft_constraints(pod))
        owner = pod_topology_spread.controller_owner(pod)
        labels = (pod.class_id, pod.match_key, (owner.kind, owner.api_version) if owner is not None else None)
        constraints = self._constraints.get(labels)
        if constraints is None:
            constraints = self._constraints[labels] = pod_topology_spread.soft_constraints(pod)
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
            hostname = c.topology_key == pod_topology_spread.HOSTNAME_KEY
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

    # Beyond this many placements since a constraint's domain counts were last brought up to
    # date, they are recounted over every node instead of node by node.
    recount_after = 64

    def _per_domain(self, c: _Constraint, per_node: np.ndarray) -> np.ndarray:
        """Matching pods per domain over ``c``'s counted nodes (the plugin's bincount)."""
        touched = self.state.touched
        if c.per_domain is None or len(touched) - c.seen > self.recount_after:
            c.per_domain = np.bincount(c.counted_domain, weights=per_node[c.counted], minlength=c.domains).astype(np.int64)
            c.last = per_node.tolist()
        elif c.seen < len(touched):
            # Counts change only where pods came or went, and every such node is in ``touched``.
            # (``last`` is set with ``per_domain``; a non-hostname key has the per-node lists.)
            assert c.last is not None and c.counts_at is not None and c.domain_list is not None
            for node in set(touched[c.seen :]):
                if c.counts_at[node]:
                    now = per_node.item(node)
                    if now != c.last[node]:
                        c.per_domain[c.domain_list[node]] += now - c.last[node]
                        c.last[node] = now
        c.seen = len(touched)
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
