"""TaintToleration (score): prefer nodes with fewer untolerated ``PreferNoSchedule`` taints.

The raw score is that count; DefaultNormalizeScore reversed turns the node with the most such
taints into 0 and a node with none into 100 (all 100 when no feasible node has any). Never
skipped. Counts are computed once per distinct taint list (``NodeIndex``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import default_normalize

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "TaintToleration"


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray | None:
    raw = sctx.index.prefer_no_schedule_counts(pod.tolerations)[nodes]
    return default_normalize(raw, reverse=True)
