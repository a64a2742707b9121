"""PodTopologySpread's crowding term for the CP-SAT objective (``Plugin.crowding``, summed by
``scoring/crowding.drop_per_pod``): a ScheduleAnyway constraint on the hostname key whose
selector matches the class's own pods adds one to the node's count with each further pod; with
the counts normalized against the most crowded node, one more pod is worth about ``100 / (m +
1)``, ``m`` the class's even share per candidate node (an approximation of the normalization)."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ...terms import spreads_itself_per_node
from ..helper import MAX_NODE_SCORE
from . import score


def crowding(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: Any, class_size: int) -> Optional[float]:
    """The weighted score one more pod of the class takes from each further one on any node
    (None: no term)."""
    weight = sctx.weight(score.NAME)
    if weight and spreads_itself_per_node(pod) and len(nodes) > 1:
        share = math.ceil(class_size / len(nodes))
        return weight * MAX_NODE_SCORE / (share + 1)
    return None
