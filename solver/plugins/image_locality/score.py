"""ImageLocality: prefer nodes that already hold the pod's container images.

For every init and regular container whose image (``:latest`` added when untagged) a node
reports, the node earns the image's size scaled by the fraction of all nodes that have it —
``int64(float64(size) × (float64(numNodes) / float64(totalNodes)))``, in floats as Go computes it,
which can differ by one byte from the exact quotient and is kept for that reason. The sum is
clamped to [23 MiB, 1000 MiB × containers] and mapped linearly onto [0, 100]. No normalize
step, never skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import MAX_NODE_SCORE

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "ImageLocality"
MIB = 1024 * 1024
# Below this much image data on a node the score is 0.
MIN_THRESHOLD = 23 * MIB
# Per container: at or above this much image data the score is 100.
MAX_CONTAINER_THRESHOLD = 1000 * MIB


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    """An image's contribution: its size, scaled down by how widely it has spread."""
    spread = float(num_nodes) / float(total_nodes)
    return int(float(size) * spread)


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray:
    total = np.zeros(len(nodes), dtype=np.int64)
    if sctx.num_nodes > 0:
        for image in pod.images:
            summary = sctx.image_nodes.get(image)
            held = sctx.index.image_mask(image)
            if summary is None or held is None:
                continue
            size, num_nodes = summary
            total += held[nodes] * scaled_image_score(size, num_nodes, sctx.num_nodes)
    max_threshold = MAX_CONTAINER_THRESHOLD * pod.containers
    if max_threshold <= MIN_THRESHOLD:  # no containers: the clamped sum sits at the minimum
        return np.zeros(len(nodes), dtype=np.int64)
    # ``np.clip`` would do, at the cost of building the dtype's bounds on every call.
    clamped = np.minimum(np.maximum(total, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
