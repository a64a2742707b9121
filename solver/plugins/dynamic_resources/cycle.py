"""DynamicResources in greedy's filter cycle (``plugin_api.CycleFilter``): the filter node by
node, the many-node mask through the state's device book."""

from __future__ import annotations

import numpy as np

from ...framework import Status
from ...info import NodeInfo, PodInfo
from ...plugin_api import NodeByNode, StaticView
from ...state import ClusterState
from . import filter as dra


class DraCycle(NodeByNode):
    def __init__(self, pod: PodInfo, state: ClusterState, nodes: list[NodeInfo]) -> None:
        self.pod, self.state, self.nodes = pod, state, nodes

    def status(self, node: NodeInfo) -> Status:
        return dra.filter(self.pod, node, self.state)

    def feasible(self, nodes: np.ndarray) -> np.ndarray:
        return dra.feasible(self.pod, nodes, self.state)


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> DraCycle | None:
    """The plugin's ``cycle`` hook: only for a pod with claims when the state books devices."""
    return DraCycle(pod, state, static.nodes) if dra.applies(pod, state) else None
