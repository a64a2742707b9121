"""kube-scheduler's score plugins, in its order, and the weighted total it picks a node by.

Each plugin module exposes ``NAME`` and ``score(pod, nodes, state, sctx)``: for the feasible
node indices ``nodes`` it returns the plugin's *normalized* scores (int64, each in [0, 100]),
or None when kube-scheduler would skip the plugin for this pod (PreScore returned Skip), in
which case it adds nothing. ``score_nodes`` is ``Σ weight × score`` (SEMANTICS.md §2, §4.8);
kube-scheduler does not score at all when only one node is feasible, and that decision is
the caller's.

``ScoreContext`` carries what the plugins read besides the pod and the cluster state: the
scoring configuration (with the NodeResourcesFit strategy resolved, so the ``packing`` profile
can switch it to MostAllocated), the Kubernetes version, the snapshot's node count and image
summary for ImageLocality, and a ``NodeIndex`` of per-snapshot node lookups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from models.config import SchedulerConfig, ScoringConfig

from ..info import NodeInfo, PodInfo
from ..state import ClusterState
from ..plugins import registry
from .node_index import NodeIndex

if TYPE_CHECKING:
    from ..context import SchedulingContext

# A score plugin configured without a weight gets this one.
DEFAULT_WEIGHT = 1
# The NodeResourcesFit strategy of the ``packing`` profile: fill nodes up.
PACKING_STRATEGY = "MostAllocated"


@dataclass(eq=False)
class ScoreContext:
    scoring: ScoringConfig
    strategy: str  # NodeResourcesFit: LeastAllocated, MostAllocated or RequestedToCapacityRatio
    kubernetes_version: str
    num_nodes: int  # every node in the snapshot (ImageLocality's spread denominator)
    image_nodes: Mapping[str, tuple[int, int]]  # image -> (size, number of nodes with it)
    index: NodeIndex
    # Plugins' own per-snapshot caches, each under the plugin's NAME.
    memo: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def of(ctx: "SchedulingContext") -> "ScoreContext":
        return ScoreContext.build(ctx.config, ctx.nodes, image_nodes=ctx.image_nodes)

    @staticmethod
    def build(
        config: SchedulerConfig,
        nodes: list[NodeInfo],
        *,
        image_nodes: Optional[Mapping[str, tuple[int, int]]] = None,
        strategy: Optional[str] = None,
    ) -> "ScoreContext":
        """``strategy`` overrides the configured one; by default ``packing`` means MostAllocated."""
        index = NodeIndex.of(nodes)
        if strategy is None:
            strategy = PACKING_STRATEGY if config.profile == "packing" else config.scoring.strategy
        return ScoreContext(
            scoring=config.scoring,
            strategy=strategy,
            kubernetes_version=config.kubernetes_version,
            num_nodes=len(nodes),
            image_nodes=image_nodes if image_nodes is not None else index.image_summary(),
            index=index,
        )

    def weight(self, plugin: str) -> int:
        return self.scoring.weights.get(plugin, DEFAULT_WEIGHT)


def plugin_scores(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: ScoreContext) -> dict[str, Optional[np.ndarray]]:
    """Each plugin's normalized scores over ``nodes`` (None: skipped), in plugin order."""
    nodes = np.asarray(nodes, dtype=np.int64)
    return {p.NAME: p.score(pod, nodes, state, sctx) for p in registry.SCORE_PLUGINS}


def score_nodes(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: ScoreContext) -> np.ndarray:
    """``Σ weight × score`` per node of ``nodes`` (int64); skipped plugins add nothing."""
    nodes = np.asarray(nodes, dtype=np.int64)
    total = np.zeros(len(nodes), dtype=np.int64)
    if len(nodes) == 0:
        return total
    for plugin in registry.SCORE_PLUGINS:
        weight = sctx.weight(plugin.NAME)
        if weight == 0:
            continue
        scores = plugin.score(pod, nodes, state, sctx)
        if scores is not None:
            total += weight * scores
    return total


def __getattr__(name: str) -> Any:
    """``SCORE_PLUGINS``/``SCORE_PLUGIN_NAMES``: the registry's, as they are now (a plugin may
    be registered after this module is imported)."""
    if name in ("SCORE_PLUGINS", "SCORE_PLUGIN_NAMES"):
        return getattr(registry, name)
    raise AttributeError(name)


__all__ = [
    "SCORE_PLUGINS",
    "SCORE_PLUGIN_NAMES",
    "NodeIndex",
    "ScoreContext",
    "plugin_scores",
    "score_nodes",
]
