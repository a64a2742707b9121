"""ImageLocality in greedy's score cache (``scoring/cache.py`` asks the plugin's ``score_cache``
hook, never this module by name): it reads no state, so a pod class's weighted scores over
every node are computed once (``ImageKernel``, node-local)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...info import PodInfo
from ...state import ClusterState
from . import score


class ImageKernel:
    """Weighted ImageLocality of one pod class over every node, computed once."""

    scalar = True
    reads_rows = False

    def __init__(self, pod: PodInfo, state: ClusterState, sctx: Any, weight: int) -> None:
        every = np.arange(len(state.nodes), dtype=np.int64)
        self.images = weight * score.score(pod, every, state, sctx)
        self.image_list = self.images.tolist()

    def __call__(self, nodes: np.ndarray, rows: Optional[np.ndarray] = None) -> np.ndarray:
        return self.images[nodes]

    def one(self, node: int) -> int:
        return self.image_list[node]


class ImagePart:
    """The plugin's part in one score cache: a node-local kernel per pod class."""

    def __init__(self, state: ClusterState, sctx: Any, weight: int, owner: Any) -> None:
        self.state, self.sctx, self.weight = state, sctx, weight

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> Optional[ImageKernel]:
        return ImageKernel(pod, self.state, self.sctx, self.weight)

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> None:
        return None
