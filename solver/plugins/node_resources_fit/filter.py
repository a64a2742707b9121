"""NodeResourcesFit (filter): the pod's request fits what the node has left, for every resource
and for the pod count.

The rule itself (``fits``, ``copies``, the reasons and status of a shortage) is
``shared.resource_fit``, where preemption's dry run and gangs ask it too; ``feasible``/``fits_alone``
apply it to a state's nodes, ``ResourcesCycle`` runs it in a pod's filter cycle. The module is
also the plugin's ``capacity`` (``fits``, ``copies``).
"""

from __future__ import annotations

from collections import deque
from typing import Optional

import numpy as np

from models.config import DEFAULT_KUBERNETES_VERSION
from models.resources import PODS

from ...framework import SUCCESS, Status
from ...info import NodeInfo, PodInfo
from ...plugin_api import NodeByNode, NodeDryRun, StaticView
from ...state import ClusterState
from ..shared.resource_fit import NAME, RoomOnNode, asked, copies, fits, status_of

__all__ = ["NAME", "ResourcesCycle", "RoomOnNode", "copies", "cycle", "feasible", "filter", "fits", "fits_alone"]


def filter(pod: PodInfo, node: NodeInfo, state: ClusterState, *, version: str = DEFAULT_KUBERNETES_VERSION) -> Status:
    n = node.index
    return status_of(state.vector(pod), state.alloc[n] - state.used[n], state.alloc[n], state, version=version)


def feasible(pod: PodInfo, nodes: np.ndarray, state: ClusterState) -> np.ndarray:
    """Per node in ``nodes``: does the request fit what is free?"""
    vec = state.vector(pod)
    return fits(vec, state.free[nodes])


def fits_alone(pod: PodInfo, nodes: np.ndarray, state: ClusterState) -> np.ndarray:
    """Would the pod fit on an empty node? (used to prune solver variables and for v1.34's
    UnschedulableAndUnresolvable)"""
    return fits(state.vector(pod), state.alloc[nodes])


class ResourcesCycle(NodeByNode):
    """NodeResourcesFit in one pod's filter cycle (``plugin_api.CycleFilter``): node-local."""

    local = True

    def __init__(self, pod: PodInfo, state: ClusterState, nodes: list[NodeInfo], version: str) -> None:
        self.pod, self.state, self.nodes, self.version = pod, state, nodes, version

    def status(self, node: NodeInfo) -> Status:
        return filter(self.pod, node, self.state, version=self.version)

    def statuses(self, nodes: np.ndarray, out: list[Status]) -> np.ndarray:
        """Nodes failing on the same resources share one Status."""
        if not len(nodes):
            return nodes
        state = self.state
        vec = state.vector(self.pod)
        cols = np.flatnonzero(vec)
        short = state.free[np.ix_(nodes, cols)] < vec[cols]
        fails = short.any(axis=1)
        failing = np.flatnonzero(fails)
        if not len(failing):
            return nodes
        # Reasons follow the short resources; the code also depends on exceeding allocatable.
        hopeless = state.alloc[np.ix_(nodes[failing], cols)] < vec[cols]
        rows = np.hstack((short[failing], hopeless))
        if rows.shape[1] <= 62:  # one integer per row: a 1-d unique, far cheaper than axis=0
            rows = rows.astype(np.int64) @ (np.int64(1) << np.arange(rows.shape[1], dtype=np.int64))
        patterns, inverse = np.unique(rows, axis=0 if rows.ndim == 2 else None, return_inverse=True)
        by_pattern = [
            self.status(self.nodes[int(nodes[failing[np.flatnonzero(inverse == k)[0]]])])
            for k in range(len(patterns))
        ]
        # (per node in Python: a failing pod asks this of thousands of nodes before preempting)
        failed = nodes[failing].tolist()
        if len(by_pattern) == 1:
            status = by_pattern[0]
            for node in failed:
                out[node] = status
        else:
            deque(map(out.__setitem__, failed, map(by_pattern.__getitem__, np.ravel(inverse).tolist())), maxlen=0)
        return nodes[~fails]

    def feasible(self, nodes: np.ndarray) -> np.ndarray:
        return feasible(self.pod, nodes, self.state)

    def fits(self, node: int) -> bool:
        return bool(fits(self.state.vector(self.pod), self.state.free[node]))

    def on_node(self, node: int) -> Optional[NodeDryRun]:
        if self._asked is None:
            self._asked = asked(self.state.vector(self.pod))
        return RoomOnNode(self.pod, self.state, node, self.version, self._asked)

    _asked: Optional[list[tuple[int, int]]] = None  # ``asked`` of the pod's request, made once


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> ResourcesCycle:
    """The plugin's ``cycle`` hook: every pod asks at least for the pod count."""
    return ResourcesCycle(pod, state, static.nodes, version)
