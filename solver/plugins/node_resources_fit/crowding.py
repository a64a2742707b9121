"""NodeResourcesFit's crowding term for the CP-SAT objective (``Plugin.crowding``, summed by
``scoring/crowding.drop_per_pod``): under LeastAllocated each further pod of a class on a node
uses ``q_r / alloc_r`` more of it per resource, so the weighted score drops by
``100 × Σ_r w_r q_r / alloc_r / Σ_r w_r`` (exact, before kube-scheduler's integer rounding).
MostAllocated and RequestedToCapacityRatio get no term: their sequential scores do not fall as
a node fills."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from models.resources import CPU, MEMORY

from ...info import PodInfo
from ...state import ClusterState
from ..helper import MAX_NODE_SCORE
from ..shared.requested import allocatable_and_requested
from . import score


def crowding(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: Any, class_size: int) -> Optional[np.ndarray]:
    """Per node of ``nodes``, the weighted score one more pod of the class takes from each
    further one (None: no term)."""
    weight = sctx.weight(score.NAME)
    if not (weight and sctx.strategy == score.LEAST_ALLOCATED):
        return None
    numerator = np.zeros(len(nodes), dtype=np.float64)
    total = np.zeros(len(nodes), dtype=np.float64)
    for spec in sctx.scoring.resources:
        pair = allocatable_and_requested(pod, nodes, state, spec.name, nonzero=True)
        if pair is None:
            continue
        alloc, _ = pair
        request = _scored_request(pod, spec.name)
        has = alloc > 0
        numerator += np.where(has, spec.weight * request / np.maximum(alloc, 1), 0.0)
        total += np.where(has, spec.weight, 0)
    return weight * MAX_NODE_SCORE * np.where(total > 0, numerator / np.maximum(total, 1), 0.0)


def _scored_request(pod: PodInfo, resource: str) -> int:
    """The request NodeResourcesFit scores with: non-zero defaults for cpu and memory."""
    if resource == CPU:
        return pod.nonzero_cpu
    if resource == MEMORY:
        return pod.nonzero_mem
    return pod.requests.get(resource, 0)
