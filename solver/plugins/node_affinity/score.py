"""NodeAffinity (score): prefer nodes matching the pod's preferred node-affinity terms.

The raw score is the sum of the weights of the preferred terms a node matches (an empty term
matches nothing); DefaultNormalizeScore scales it by the best feasible node. A pod without
preferred terms skips the plugin. The profile's ``addedAffinity`` is not configurable here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import default_normalize

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "NodeAffinity"


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray | None:
    if not pod.preferred_node_terms:
        return None
    return default_normalize(raw_weights(pod, sctx)[nodes])


def raw_weights(pod: PodInfo, sctx: "ScoreContext") -> np.ndarray:
    """Over every node, the summed weights of the pod's preferred terms it matches (the raw
    score before normalizing; greedy's score cache keeps it per pod class)."""
    raw = np.zeros(sctx.num_nodes, dtype=np.int64)
    for weight, term in pod.preferred_node_terms:
        if weight != 0:
            raw += weight * sctx.index.term_mask(term)
    return raw
