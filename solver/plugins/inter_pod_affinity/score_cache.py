"""InterPodAffinity in greedy's score cache (``scoring/cache.py`` asks the plugin's
``score_cache`` hook, never this module by name): it reads pod counts of other nodes and domains,
so it is the plugin's own score per pod, skipped without a call when nothing can contribute (no
preferred terms on the pod, no pod with affinity terms in the state: exactly when the plugin
would skip)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from . import score
from .book import term_book


class InterPodPart:
    def __init__(self, state: ClusterState, sctx: Any, weight: int, owner: Any) -> None:
        self.state, self.sctx, self.weight = state, sctx, weight

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> None:
        return None

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> Optional[np.ndarray]:
        if not (pod.preferred_affinity or pod.preferred_anti_affinity or term_book(self.state).scored):
            return None
        scores = score.score(pod, nodes, self.state, self.sctx)
        return None if scores is None else self.weight * scores
