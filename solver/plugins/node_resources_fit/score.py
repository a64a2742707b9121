"""NodeResourcesFit (score): how full each node would be with the pod, by the configured strategy.

For each configured resource: the node's allocatable, and what would be requested with the pod
on it — for cpu and memory the *non-zero* requests (containers that state nothing count
100m / 200Mi, SEMANTICS.md §1.3), for other resources the actual ones. A scalar resource the
pod does not request is left out, and so is any resource the node has none of (allocatable 0;
also ``pods`` and names kube-scheduler does not track).

* LeastAllocated: ``(alloc − req) × 100 // alloc`` (0 when over), weighted mean with ``//``.
* MostAllocated: ``min(req, alloc) × 100 // alloc``, weighted mean with ``//``.
* RequestedToCapacityRatio: utilization ``req × 100 // alloc`` (100 when over) through the
  configured shape (points scaled ×10); only resources scoring above 0 count in the weighted
  mean, which is rounded half away from zero.

No normalize step, never skipped. Which strategy applies comes from ``ScoreContext.strategy``,
so the ``packing`` profile can make it MostAllocated.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import MAX_NODE_SCORE, broken_linear
from ..shared.requested import allocatable_and_requested

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "NodeResourcesFit"
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
# Shape points score 0..10 (MaxCustomPriorityScore); scaled to the 0..100 node score range.
SHAPE_SCORE_SCALE = 10
# Utilization used when the node has none of the resource or the request exceeds it.
MAX_UTILIZATION = 100


def _resources(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(weight, allocatable, requested, has-allocatable mask) per resource that is not skipped."""
    for spec in sctx.scoring.resources:
        pair = allocatable_and_requested(pod, nodes, state, spec.name, nonzero=True)
        if pair is not None:
            alloc, requested = pair
            yield spec.weight, alloc, requested, alloc > 0


def least_allocated(requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    safe = np.maximum(alloc, 1)
    return np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)


def most_allocated(requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    safe = np.maximum(alloc, 1)
    return np.minimum(requested, alloc) * MAX_NODE_SCORE // safe


def utilization(requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    safe = np.maximum(alloc, 1)
    over = (alloc == 0) | (requested > alloc)
    return np.where(over, MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray | None:
    numerator = np.zeros(len(nodes), dtype=np.int64)
    weights = np.zeros(len(nodes), dtype=np.int64)
    if sctx.strategy == REQUESTED_TO_CAPACITY_RATIO:
        shape = tuple((p.utilization, p.score * SHAPE_SCORE_SCALE) for p in sctx.scoring.shape)
        for weight, alloc, requested, has in _resources(pod, nodes, state, sctx):
            value = broken_linear(shape, utilization(requested, alloc))
            counts = has & (value > 0)
            numerator += np.where(counts, value * weight, 0)
            weights += np.where(counts, weight, 0)
        # round(numerator / weights), half away from zero, in integers (both are non-negative).
        return np.where(weights > 0, (2 * numerator + weights) // np.maximum(2 * weights, 1), 0)
    per_resource = most_allocated if sctx.strategy == MOST_ALLOCATED else least_allocated
    for weight, alloc, requested, has in _resources(pod, nodes, state, sctx):
        numerator += np.where(has, per_resource(requested, alloc) * weight, 0)
        weights += np.where(has, weight, 0)
    return np.where(weights > 0, numerator // np.maximum(weights, 1), 0)
