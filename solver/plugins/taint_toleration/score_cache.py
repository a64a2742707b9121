"""TaintToleration in greedy's score cache (``scoring/cache.py`` asks the plugin's
``score_cache`` hook, never this module by name): a pod class's raw counts of untolerated
PreferNoSchedule taints over every node are computed once, and normalized per pod over the
nodes scored (a constant 100 when no node has any)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import Normalized, normalized


class TaintPart:
    def __init__(self, state: ClusterState, sctx: Any, weight: int, owner: Any) -> None:
        self.state, self.sctx, self.weight = state, sctx, weight
        self._taints: dict[int, Normalized] = {}

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> None:
        return None

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> np.ndarray | int:
        return self.weight * normalized(self._raw(pod), nodes, reverse=True)

    def _raw(self, pod: PodInfo) -> Normalized:
        hit = self._taints.get(pod.class_id) if pod.class_id >= 0 else None
        if hit is None:
            raw = self.sctx.index.prefer_no_schedule_counts(pod.tolerations)
            hit = Normalized.of(raw)
            if pod.class_id >= 0:
                self._taints[pod.class_id] = hit
        return hit
