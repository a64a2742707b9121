"""NodeResourcesBalancedAllocation: prefer nodes whose resources would be used evenly.

Uses *actual* requests (no non-zero defaults): per configured resource with allocatable > 0,
the fraction ``min(1, requested / allocatable)`` as a float64; their spread is ``|f1 − f2| / 2``
for two resources and the population standard deviation for more (0 for fewer); a node's
balance is ``int64((1 − spread) × 100)``. Scalar resources the pod does not request are left
out. Before v1.36 the score is the balance with the pod; v1.36 scores the change the pod brings,
``50 + (50 + withPod − withoutPod) / 2`` (SEMANTICS.md §4.2), so a node the pod evens out scores
towards 100 and one it unbalances towards 50. From v1.33 on a pod requesting none of the
configured resources (best-effort) skips the plugin, so such pods are not all piled onto the
emptiest-looking node. No normalize step.

The float operations run in Go's order, resource by resource, so results match bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from models.config import version_at_least

from ...info import PodInfo
from ...state import ClusterState
from ..helper import MAX_NODE_SCORE, trunc_div
from ..shared.requested import allocatable_and_requested

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "NodeResourcesBalancedAllocation"
# The release from which PreScore skips best-effort pods (SEMANTICS.md §0).
SKIPS_BEST_EFFORT_FROM = "1.33"
# The release from which the score is the change in balance the pod brings, not the balance
# with it (``balancedResourceScorer``, SEMANTICS.md §4.2).
SCORES_CHANGE_FROM = "1.36"
# Half of MaxNodeScore: the change score's midpoint (no change scores 75).
HALF = MAX_NODE_SCORE // 2


def skips(version: str, pod: PodInfo, names: list[str]) -> bool:
    """Whether PreScore skips ``pod`` (best-effort in every configured resource) on ``version``."""
    return version_at_least(version, SKIPS_BEST_EFFORT_FROM) and all(pod.requests.get(r, 0) == 0 for r in names)


def scores_change(version: str) -> bool:
    return version_at_least(version, SCORES_CHANGE_FROM)


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray | None:
    names = [r.name for r in sctx.scoring.balanced_resources]
    if skips(sctx.kubernetes_version, pod, names):
        return None
    # (fraction, counted) per resource, with the pod and without it
    with_pod: list[tuple[np.ndarray, np.ndarray]] = []
    without_pod: list[tuple[np.ndarray, np.ndarray]] = []
    for name in names:
        pair = allocatable_and_requested(pod, nodes, state, name, nonzero=False)
        if pair is None:
            continue
        alloc, requested = pair
        counted = alloc > 0
        safe = np.maximum(alloc, 1).astype(np.float64)
        with_pod.append((fraction_of(requested, safe), counted))
        without_pod.append((fraction_of(requested - pod.requests.get(name, 0), safe), counted))
    after = score_of(spread(with_pod, len(nodes)))
    if not scores_change(sctx.kubernetes_version):
        return after
    return change_score(after, score_of(spread(without_pod, len(nodes))))


def fraction_of(requested: np.ndarray, safe_alloc: np.ndarray) -> np.ndarray:
    """``min(1, requested / allocatable)`` as float64 (``safe_alloc``: allocatable, 1 where 0)."""
    return np.minimum(requested.astype(np.float64) / safe_alloc, 1.0)


def change_score(with_pod: np.ndarray, without_pod: np.ndarray) -> np.ndarray:
    """v1.36's ``50 + (50 + withPod − withoutPod) / 2`` with Go's division, which truncates
    towards zero (Python's ``//`` floors). The numerator is never negative in practice — a
    balance is at least 50, the spread of fractions in [0, 1] being at most 0.5 — but the
    division is Go's all the same."""
    return HALF + trunc_div(HALF + with_pod - without_pod, 2)


def change_score_one(with_pod: int, without_pod: int) -> int:
    """``change_score`` of one node, in Python ints."""
    numerator = HALF + with_pod - without_pod
    return HALF + (-((-numerator) // 2) if numerator < 0 else numerator // 2)


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
