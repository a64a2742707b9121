"""NodePorts: a pod's host ports must be free on the node.

When two ports collide is ``shared.host_ports`` (preemption and provisioning ask it too). A pod's
own ports are not checked against each other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Optional

import numpy as np

from ...framework import SUCCESS, Status, unschedulable
from ...info import NodeInfo, PodInfo
from ...plugin_api import NodeByNode, NodeDryRun, StaticView
from ...state import ClusterState
from ..shared.host_ports import Port, conflicts
from .book import ports_on

NAME = "NodePorts"
# A wanted host port is already taken on the node.
REASON = "node(s) didn't have free ports for the requested pod ports"


def fits(pod: PodInfo, used: Iterable[Port]) -> bool:
    used = tuple(used)
    return not any(conflicts(p, used) for p in pod.host_ports)


def filter(pod: PodInfo, node: NodeInfo, state: ClusterState) -> Status:
    if not pod.host_ports or fits(pod, ports_on(state)[node.index]):
        return SUCCESS
    return unschedulable(NAME, REASON)


def feasible(pod: PodInfo, nodes: np.ndarray, state: ClusterState) -> np.ndarray:
    if not pod.host_ports:
        return np.ones(len(nodes), dtype=bool)
    return np.fromiter((fits(pod, ports_on(state)[n]) for n in nodes), dtype=bool, count=len(nodes))


class PortsCycle(NodeByNode):
    """NodePorts in one pod's filter cycle (``plugin_api.CycleFilter``): node-local."""

    local = True

    def __init__(self, pod: PodInfo, state: ClusterState, nodes: list[NodeInfo]) -> None:
        self.pod, self.state, self.nodes = pod, state, nodes

    def status(self, node: NodeInfo) -> Status:
        return filter(self.pod, node, self.state)

    def statuses(self, nodes: np.ndarray, out: list[Status]) -> np.ndarray:
        ok = feasible(self.pod, nodes, self.state)
        for n in nodes[~ok].tolist():
            out[n] = filter(self.pod, self.nodes[n], self.state)
        return nodes[ok]

    def feasible(self, nodes: np.ndarray) -> np.ndarray:
        return feasible(self.pod, nodes, self.state)

    def fits(self, node: int) -> bool:
        return fits(self.pod, ports_on(self.state)[node])

    def on_node(self, node: int) -> Optional[NodeDryRun]:
        return PortsOnNode(self.pod, ports_on(self.state)[node])


class PortsOnNode:
    """The filter's dry run on one node (``plugin_api.NodeDryRun``): the ports in use there, a
    pod's freed as it leaves and taken again as it returns."""

    def __init__(self, pod: PodInfo, used: Counter[Port]) -> None:
        self.pod = pod
        self.used = Counter(used)

    def remove_pod(self, pod: PodInfo) -> None:
        if pod.host_ports:
            self.used.subtract(pod.host_ports)
            self.used = +self.used

    def add_pod(self, pod: PodInfo) -> None:
        self.used.update(pod.host_ports)

    def status(self) -> Status:
        return SUCCESS if fits(self.pod, self.used) else unschedulable(NAME, REASON)

    def reads(self) -> tuple:
        return ()  # the node's own ports

    def fits(self) -> bool:
        return self.status().ok


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> PortsCycle | None:
    """The plugin's ``cycle`` hook: a pod without host ports passes everywhere."""
    return PortsCycle(pod, state, static.nodes) if pod.host_ports else None
