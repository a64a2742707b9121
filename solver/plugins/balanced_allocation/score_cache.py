"""BalancedAllocation in greedy's score cache (``scoring/cache.py`` asks the plugin's
``score_cache`` hook, never this module by name): the weighted score of one pod class over any
nodes from their requested amounts (``BalanceKernel``, node-local), with every float operation
kept as ``score.py`` does it (same operands, same order), so the totals are the plugin's bit for
bit."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import MAX_NODE_SCORE
from ..shared.requested import requested_rows, source
from . import score


class BalanceKernel:
    """Weighted BalancedAllocation of one pod class, for any set of nodes."""

    scalar = True

    def __init__(self, pod: PodInfo, state: ClusterState, sctx: Any, weight: int, alloc_rows: list[list[int]],
                 names: list[str], shared: Optional[dict[tuple, tuple[np.ndarray, np.ndarray, bool]]] = None) -> None:
        self.state = state
        self.alloc_rows = alloc_rows  # state.alloc as Python ints, for ``one``
        self.weight = weight
        picked_b = [src for name in names if (src := source(pod, state, name, nonzero=False))]
        self.bal_specs = picked_b
        self.bal_pick = np.array([s[0] for s in picked_b], dtype=np.int64)
        self.bal_add = np.array([s[2] for s in picked_b], dtype=np.int64)
        # Per-node arrays of the columns picked, shared by the classes picking the same (the
        # part's ``shared``).
        key = tuple(s[1] for s in picked_b)
        arrays: Optional[tuple[np.ndarray, np.ndarray, bool]] = None if shared is None else shared.get(key)
        if arrays is None:
            alloc_b = state.alloc[:, list(key)]
            counted = alloc_b > 0
            # The usual case: exactly two resources, both present on every node.
            arrays = (np.maximum(alloc_b, 1).astype(np.float64), counted, len(key) == 2 and bool(counted.all()))
            if shared is not None:
                shared[key] = arrays
        self.bal_safe: np.ndarray = arrays[0]
        self.bal_counted: np.ndarray = arrays[1]
        self.bal_pair: bool = arrays[2]
        # v1.36: the change in balance the pod brings, not the balance with it
        self.change = score.scores_change(sctx.kubernetes_version)

    reads_rows = True  # takes ``requested_rows(state, nodes)`` gathered by the cache

    def __call__(self, nodes: np.ndarray, rows: Optional[np.ndarray] = None) -> np.ndarray:
        before = (requested_rows(self.state, nodes) if rows is None else rows)[:, self.bal_pick]
        after = self._balance(nodes, before + self.bal_add)
        if not self.change:
            return self.weight * after
        return self.weight * score.change_score(after, self._balance(nodes, before))

    def one(self, node: int) -> int:
        """``self(np.array([node]))[0]`` in Python floats (IEEE doubles, as numpy's), in the same
        operations and order."""
        row = self.state.nonzero[node].tolist() + self.state.used[node].tolist()
        after = self._balance_one(node, row, True)
        if not self.change:
            return self.weight * after
        return self.weight * score.change_score_one(after, self._balance_one(node, row, False))

    def _balance_one(self, node: int, row: list[int], with_pod: bool) -> int:
        """One node's balance from its gathered requested ``row``, with the pod or without it."""
        alloc = self.alloc_rows[node]
        fractions = []
        for pick, column, add in self.bal_specs:
            a = alloc[column]
            if a > 0:
                f = float(row[pick] + (add if with_pod else 0)) / float(a)
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
        return int((1.0 - spread) * MAX_NODE_SCORE)

    def _balance(self, nodes: np.ndarray, requested: np.ndarray) -> np.ndarray:
        """The balance of ``nodes`` given their requested amounts (nodes × picked resources)."""
        fraction = score.fraction_of(requested, self.bal_safe[nodes])
        if self.bal_pair:
            spread = score.pair_spread(fraction[:, 0], fraction[:, 1])
        else:  # the plugin's own running sums, resource by resource
            counted = self.bal_counted[nodes]
            spread = score.spread([(fraction[:, j], counted[:, j]) for j in range(fraction.shape[1])], len(nodes))
        return score.score_of(spread)


class BalancePart:
    """The plugin's part in one score cache: a node-local kernel per pod class (none for a
    best-effort pod where the version's PreScore skips it)."""

    def __init__(self, state: ClusterState, sctx: Any, weight: int, owner: Any) -> None:
        self.state, self.sctx, self.weight = state, sctx, weight
        self._shared: dict[tuple, tuple[np.ndarray, np.ndarray, bool]] = {}  # the kernels' per-node arrays

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> Optional[BalanceKernel]:
        names = [r.name for r in self.sctx.scoring.balanced_resources]
        if score.skips(self.sctx.kubernetes_version, pod, names):
            return None  # PreScore Skip: the plugin adds nothing
        return BalanceKernel(pod, self.state, self.sctx, self.weight, alloc_rows, names, self._shared)

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> None:
        return None
