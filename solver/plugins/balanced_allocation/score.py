"""NodeResourcesBalancedAllocation: prefer nodes whose resources would be used evenly.

Uses *actual* requests (no non-zero defaults): per configured resource with allocatable > 0,
the fraction ``min(1, requested / allocatable)`` as a float64; their spread is ``|f1 − f2| / 2``
for two resources and the population standard deviation for more (0 for fewer); the score is
``int64((1 − spread) × 100)``. Scalar resources the pod does not request are left out. From
v1.33 on a pod requesting none of the configured resources (best-effort) skips the plugin, so
such pods are not all piled onto the emptiest-looking node. No normalize step.

The float operations run in Go's order, resource by resource, so results match bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import MAX_NODE_SCORE
from ..node_resources_fit.score import allocatable_and_requested

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "NodeResourcesBalancedAllocation"
# Versions whose PreScore skips best-effort pods (SEMANTICS.md §0).
SKIPS_BEST_EFFORT = frozenset({"1.33", "1.34"})


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray | None:
    names = [r.name for r in sctx.scoring.balanced_resources]
    if sctx.kubernetes_version in SKIPS_BEST_EFFORT and all(pod.requests.get(r, 0) == 0 for r in names):
        return None
    fractions: list[tuple[np.ndarray, np.ndarray]] = []  # (fraction, counted) per resource
    for name in names:
        pair = allocatable_and_requested(pod, nodes, state, name, nonzero=False)
        if pair is None:
            continue
        alloc, requested = pair
        counted = alloc > 0
        fraction = requested.astype(np.float64) / np.maximum(alloc, 1).astype(np.float64)
        fractions.append((np.minimum(fraction, 1.0), counted))
    return score_of(spread(fractions, len(nodes)))


def pair_spread(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The spread of two fractions counted on every node: half their distance."""
    return np.abs((first - second) / 2)


def spread(fractions: list[tuple[np.ndarray, np.ndarray]], size: int) -> np.ndarray:
    """Per node, the spread of the ``(fraction, counted)`` pairs, resource by resource: half the
    distance of two counted fractions, the population standard deviation of more, 0 of fewer."""
    # Running sums in Go's order: the first two counted fractions and the total, per node.
    first = np.zeros(size, dtype=np.float64)
    second = np.zeros(size, dtype=np.float64)
    total = np.zeros(size, dtype=np.float64)
    n = np.zeros(size, dtype=np.int64)  # how many resources count on each node
    for fraction, counted in fractions:
        first = np.where(counted & (n == 0), fraction, first)
        second = np.where(counted & (n == 1), fraction, second)
        total = np.where(counted, total + fraction, total)
        n += counted
    out = np.where(n == 2, pair_spread(first, second), 0.0)
    many = n > 2
    if many.any():  # population standard deviation
        mean = total / np.maximum(n, 1)
        squares = np.zeros(size, dtype=np.float64)
        for fraction, counted in fractions:
            deviation = fraction - mean
            squares = np.where(counted, squares + deviation * deviation, squares)
        out = np.where(many, np.sqrt(squares / np.maximum(n, 1)), out)
    return out


def score_of(spread: np.ndarray) -> np.ndarray:
    """``int64((1 − spread) × 100)``, as kube-scheduler truncates it."""
    return np.trunc((1.0 - spread) * MAX_NODE_SCORE).astype(np.int64)
