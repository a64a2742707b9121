"""NodeAffinity in greedy's score cache (``scoring/cache.py`` asks the plugin's ``score_cache``
hook, never this module by name): a pod class's raw preferred-term weights over every node are
computed once, and normalized per pod over the nodes scored (nothing when every raw value is 0,
or the pod has no preferred term: the plugin is skipped)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from ..helper import Normalized, normalized
from . import score


class AffinityPart:
    def __init__(self, state: ClusterState, sctx: Any, weight: int, owner: Any) -> None:
        self.state, self.sctx, self.weight = state, sctx, weight
        self._affinity: dict[int, Optional[Normalized]] = {}

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> None:
        return None

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> Optional[np.ndarray | int]:
        raw = self._raw(pod)
        if raw is None or raw.zero:
            return None
        return self.weight * normalized(raw, nodes, reverse=False)

    def _raw(self, pod: PodInfo) -> Optional[Normalized]:
        """The raw preferred-term weights over every node; None: plugin skipped."""
        if pod.class_id >= 0 and pod.class_id in self._affinity:
            return self._affinity[pod.class_id]
        hit = None
        if pod.preferred_node_terms:
            hit = Normalized.of(score.raw_weights(pod, self.sctx))
        if pod.class_id >= 0:
            self._affinity[pod.class_id] = hit
        return hit
