"""NodeResourcesFit in greedy's score cache (``scoring/cache.py`` asks the plugin's
``score_cache`` hook, never this module by name): the weighted score of one pod class over any
nodes from their requested amounts (``FitKernel``, node-local: the cache keeps its values per
class and refreshes the nodes placements touch), with every integer operation kept as
``score.py`` does it, so the totals are the plugin's bit for bit."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import MAX_NODE_SCORE, broken_linear
from ..shared.requested import requested_rows, source
from . import score

# A kernel's per-node arrays: allocatable of the picked columns, the same at least 1, which a
# node has, and the weights of those it has (at least 1).
_NodeArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class FitKernel:
    """Weighted NodeResourcesFit of one pod class, for any set of nodes."""

    def __init__(self, pod: PodInfo, state: ClusterState, sctx: Any, weight: int, alloc_rows: list[list[int]],
                 shared: Optional[dict[tuple, _NodeArrays]] = None) -> None:
        self.state = state
        self.alloc_rows = alloc_rows  # state.alloc as Python ints, for ``one``
        self.weight = weight
        self.strategy = sctx.strategy
        picked = [(src, spec.weight) for spec in sctx.scoring.resources if (src := source(pod, state, spec.name, nonzero=True))]
        self.fit_specs = [(src[0], src[1], src[2], w) for src, w in picked]
        self.fit_pick = np.array([s[0] for s, _ in picked], dtype=np.int64)
        self.fit_add = np.array([s[2] for s, _ in picked], dtype=np.int64)
        self.fit_w = np.array([w for _, w in picked], dtype=np.int64)
        # The per-node arrays depend only on the columns and weights picked: the pod classes
        # asking for the same resources share them (``shared``, the part's), instead of five
        # arrays over every node per class (a few hundred MB for 1,500 classes on 5,000 nodes).
        key = (tuple(s[1] for s, _ in picked), tuple(w for _, w in picked))
        arrays: Optional[_NodeArrays] = None if shared is None else shared.get(key)
        if arrays is None:
            alloc = state.alloc[:, list(key[0])]
            has = alloc > 0
            # Σ weights of the resources a node has (allocatable > 0): fixed per node.
            arrays = (alloc, np.maximum(alloc, 1), has, np.maximum(has.astype(np.int64) @ self.fit_w, 1))
            if shared is not None:
                shared[key] = arrays
        self.fit_alloc: np.ndarray = arrays[0]
        self.fit_safe: np.ndarray = arrays[1]
        self.fit_has: np.ndarray = arrays[2]
        self.fit_wsum_safe: np.ndarray = arrays[3]
        self.shape = tuple((p.utilization, p.score * score.SHAPE_SCORE_SCALE) for p in sctx.scoring.shape)
        # ``one`` covers the strategies whose per-resource score is a single expression.
        self.scalar = self.strategy != score.REQUESTED_TO_CAPACITY_RATIO

    reads_rows = True  # takes ``requested_rows(state, nodes)`` gathered by the cache

    def __call__(self, nodes: np.ndarray, rows: Optional[np.ndarray] = None) -> np.ndarray:
        return self.weight * self._fit(nodes, requested_rows(self.state, nodes) if rows is None else rows)

    def one(self, node: int) -> int:
        """``self(np.array([node]))[0]`` in Python integers (no value comes near 2**63)."""
        row = self.state.nonzero[node].tolist() + self.state.used[node].tolist()
        alloc = self.alloc_rows[node]
        numerator = weights = 0
        most = self.strategy == score.MOST_ALLOCATED
        for pick, column, add, weight in self.fit_specs:
            a = alloc[column]
            if a > 0:  # with nothing allocatable a resource scores 0 and does not count
                r = row[pick] + add
                if most:
                    value = (r if r < a else a) * MAX_NODE_SCORE // a
                else:
                    value = 0 if r > a else (a - r) * MAX_NODE_SCORE // a
                numerator += value * weight
                weights += weight
        return self.weight * (numerator // weights if weights > 0 else 0)

    def _fit(self, nodes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        requested = rows[:, self.fit_pick] + self.fit_add
        alloc, safe = self.fit_alloc[nodes], self.fit_safe[nodes]
        if self.strategy == score.REQUESTED_TO_CAPACITY_RATIO:
            over = (alloc == 0) | (requested > alloc)
            util = np.where(over, score.MAX_UTILIZATION, requested * score.MAX_UTILIZATION // safe)
            value = broken_linear(self.shape, util)
            counts = self.fit_has[nodes] & (value > 0)
            numerator = np.where(counts, value, 0) @ self.fit_w
            weights = counts.astype(np.int64) @ self.fit_w
            return np.where(weights > 0, (2 * numerator + weights) // np.maximum(2 * weights, 1), 0)
        if self.strategy == score.MOST_ALLOCATED:
            per_resource = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
        else:
            per_resource = np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
        # A resource with allocatable 0 scores 0 under both strategies, so only the weight sum
        # needs the "has it" mask; a node without any counted resource gets 0 // 1.
        return (per_resource @ self.fit_w) // self.fit_wsum_safe[nodes]


class FitPart:
    """The plugin's part in one score cache: a node-local kernel per pod class."""

    def __init__(self, state: ClusterState, sctx: Any, weight: int, owner: Any) -> None:
        self.state, self.sctx, self.weight = state, sctx, weight
        self._shared: dict[tuple, _NodeArrays] = {}  # the kernels' per-node arrays

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> Optional[FitKernel]:
        return FitKernel(pod, self.state, self.sctx, self.weight, alloc_rows, self._shared)

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> None:
        return None
