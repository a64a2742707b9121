"""What the window's own pods do to each other's scores on a node, for the CP-SAT objective.

kube-scheduler scores each pod against the cluster as the pods before it left it. The model's
linear score terms are each class's scores against the cluster *before* the window, so the
second, third, ... pod of a class on one node scores as if the node were still as empty as for
the first: under LeastAllocated nothing stops the solver from piling a whole class onto one
node (10 identical pods on 5 empty nodes all landed on one). This module sums, per class and
candidate node, how much the score drops with each further pod of the class there, as the score
plugins' ``crowding`` hooks say (``plugins/<plugin>/crowding.py``):

* NodeResourcesFit, LeastAllocated: each further pod uses ``q_r / alloc_r`` more of the node per
  resource, so the weighted score drops by ``100 × Σ_r w_r q_r / alloc_r / Σ_r w_r`` (exact,
  before kube-scheduler's integer rounding);
* PodTopologySpread, a ScheduleAnyway constraint on the hostname key whose selector matches the
  class's own pods: each further pod on the node adds one to its count; with the domain counts
  normalized against the most crowded node, one more pod is worth about ``100 / (m + 1)``, where
  ``m`` is the class's even share per candidate node (an approximation of the normalization).

With a drop of ``δ`` per further pod, ``k`` pods of the class on the node score
``k × s₁ − δ × k(k − 1) / 2`` in all: concave in ``k``, so the objective spreads a class as
kube-scheduler's one-at-a-time placement does. The ``packing`` profile (MostAllocated) and
RequestedToCapacityRatio get no term: their sequential scores do not fall as a node fills.
"""

from __future__ import annotations

import numpy as np

from ..info import PodInfo
from ..plugins import registry
from ..state import ClusterState
from ..terms import spreads_itself_per_node
from . import ScoreContext

__all__ = ["SCALE", "drop_per_pod", "spreads_itself_per_node", "tangent_points"]

# Scores are multiplied by this in the model so that a drop of a fraction of a point counts.
SCALE = 10


def drop_per_pod(
    pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: ScoreContext, *, class_size: int
) -> np.ndarray:
    """Per node of ``nodes``: the weighted score (× SCALE) one more pod of ``pod``'s class there
    takes from each further one (integer, ≥ 0): the score plugins' ``crowding`` terms, summed in
    ``PLUGINS`` order."""
    drop = np.zeros(len(nodes), dtype=np.float64)
    for term in registry.CROWDING:
        part = term(pod, nodes, state, sctx, class_size)
        if part is not None:
            drop += part
    return np.round(drop * SCALE).astype(np.int64)


def tangent_points(upper: int) -> list[int]:
    """Points ``j`` whose tangents bound ``δ k(k−1)/2`` from below on ``0..upper``: every point
    up to 4, then doubling (exact at those points, a close lower envelope between them)."""
    points, j = [], 1
    while j < upper:
        points.append(j)
        j = j + 1 if j < 4 else j * 2
    return points
