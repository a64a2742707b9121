"""``ScoreCache``: greedy's fast route to the totals ``score_nodes`` computes, bit for bit.

``score_nodes`` stays the reference (and the CP-SAT objective's source); it runs seven plugins
per pod, each a dozen numpy calls whose fixed cost dwarfs the work on a few hundred nodes. The
greedy loop scores thousands of pods of a few classes against a state that changes on one node
per placement, so most of that work repeats. This module splits the total by what it depends on:

* **Node-local, no normalization** — NodeResourcesFit, BalancedAllocation, ImageLocality: a
  node's value depends only on the pod class and that node's own requested amounts. Their
  weighted sum is kept per pod class and node: computed the first time the class asks about the
  node, and again only when the node is in ``state.touched`` since (the pattern of the
  predicates' ``_local_mask``). ImageLocality does not read the state at all.
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

Each plugin's part lives beside it (``plugins/<plugin>/score_cache.py``, its ``score_cache``
hook); this module keeps the node-local kernels' values per class and sums the parts. The
kernels are vectorised over (nodes × resources) instead of resource by resource, with every
integer and float operation kept as the plugins do it (same operands, same order), so the
totals are identical, not just close: ``tests/solver/test_score_cache.py`` checks
them against ``score_nodes`` for every pod of greedy runs over the benchmark workloads and
generated clusters. Class-keyed caches rely on what a pod class guarantees (``PodInfo.
scheduling_signature``: requests, images, tolerations, affinity are equal across the class);
the system default spread selector is derived from *all* of a pod's labels and its owner,
which the class does not fix, so spread constraints are resolved per class, labels and owner,
and spread tables are kept per class and resolved constraints. Pods without a class are scored
without caching anything.
"""

from __future__ import annotations

import numpy as np

from ..info import PodInfo
from ..plugin_api import LocalKernel, ScoreCachePart
from ..plugins import registry
from ..plugins.shared.requested import requested_rows
from ..state import ClusterState
from . import ScoreContext


class _Local:
    """The node-local parts' kernels of one pod class, summed (integers: any order)."""

    def __init__(self, state: ClusterState, kernels: list[LocalKernel]) -> None:
        self.state = state
        self.kernels = kernels
        self.scalar = all(k.scalar for k in kernels)
        # The requested amounts are gathered once per refresh for every kernel that reads them
        # (NodeResourcesFit and BalancedAllocation both do): the gather was a fifth of the cost.
        self.rows = any(k.reads_rows for k in kernels)

    def __call__(self, nodes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(nodes), dtype=np.int64)
        rows = requested_rows(self.state, nodes) if self.rows else None
        for kernel in self.kernels:
            out += kernel(nodes, rows)
        return out

    def one(self, node: int) -> int:
        return sum(kernel.one(node) for kernel in self.kernels)


class ScoreCache:
    """``totals(pod, nodes)`` equals ``score_nodes(pod, nodes, state, sctx)`` for the one
    ``state`` given here, as it changes; caches follow it through ``state.touched``."""

    def __init__(self, state: ClusterState, sctx: ScoreContext) -> None:
        self.state = state
        self.sctx = sctx
        self.weights = {p.NAME: sctx.weight(p.NAME) for p in registry.SCORE_PLUGINS}
        # class -> kernels, touched seen, values, which values are stale (a node changed since)
        self._local: dict[int, tuple[_Local, int, np.ndarray, np.ndarray]] = {}
        # The score plugins' parts (their ``score_cache`` hooks), those with a weight.
        self._parts: list[ScoreCachePart] = [make(state, sctx, self.weights[name], self)
                                             for name, make in registry.SCORE_CACHE if self.weights[name]]
        # Score plugins without a part (a plugin added to the registry): their own ``score``, as
        # ``score_nodes`` runs it, so the totals stay equal without a line here.
        derived = {name for name, _ in registry.SCORE_CACHE}
        self._others = tuple(p for p in registry.SCORE_PLUGINS if p.NAME not in derived and self.weights[p.NAME])

    # Up to this many nodes changed since a class's values were last refreshed, they are
    # recomputed one by one in Python (``LocalKernel.one``); more, with the numpy kernels.
    scalar_refresh = 8
    # Beyond this many changes to a spread constraint's counter since its domain counts were last
    # brought up to date, they are recounted over every node instead of change by change (read
    # by the part).
    recount_after = 64

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=np.int64)
        if len(nodes) == 0:
            return np.zeros(0, dtype=np.int64)
        total = self._local_values(pod, nodes)
        for part in self._parts:
            scores = part.totals(pod, nodes)
            if scores is not None:
                total += scores
        for plugin in self._others:
            scores = plugin.score(pod, nodes, self.state, self.sctx)
            if scores is not None:
                total += self.weights[plugin.NAME] * scores
        return total

    # -- node-local plugins --------------------------------------------------------------------

    def _local_values(self, pod: PodInfo, nodes: np.ndarray) -> np.ndarray:
        state = self.state
        if pod.class_id < 0:
            return self._kernel(pod)(nodes)
        hit = self._local.get(pod.class_id)
        touched = state.touched
        if hit is None:
            # Every node stale: only the nodes asked are computed, here and later. A class met
            # once asks a few hundred of 5,000 nodes (the sampled feasible ones); computing them
            # all at first sight was three quarters of the kernels' work on a cluster of many
            # small classes.
            kernel = self._kernel(pod)
            values = np.zeros(len(state.nodes), dtype=np.int64)
            stale = np.ones(len(state.nodes), dtype=bool)
        else:
            kernel, seen, values, stale = hit
            if seen < len(touched):
                if kernel.scalar and len(touched) - seen <= self.scalar_refresh:
                    for node in set(touched[seen:]):
                        if not stale[node]:  # a node never asked about stays to be computed when asked
                            values[node] = kernel.one(node)
                else:
                    # Only marked: a class met again after many placements elsewhere (classes
                    # interleave in the queue) would otherwise refresh thousands of nodes to be
                    # asked about a few hundred. The nodes asked are brought up to date below.
                    stale[state.changed_since(seen)] = True
        asked = nodes[stale[nodes]]
        if len(asked):
            # (a node asked twice is computed twice, the same value: no need to make them unique)
            values[asked] = kernel(asked)
            stale[asked] = False
        self._local[pod.class_id] = (kernel, len(touched), values, stale)
        return values[nodes]

    def _kernel(self, pod: PodInfo) -> _Local:
        alloc_rows = self.state.alloc_rows
        return _Local(self.state, [k for part in self._parts if (k := part.local(pod, alloc_rows)) is not None])
