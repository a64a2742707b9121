"""NodeResourcesFit (filter): the pod's request fits what the node has left, for every resource
and for the pod count.

``fits`` is the rule itself, the one place it is computed — greedy's filters, the CP-SAT
candidates and hint, preemption's dry run and re-packing all ask it; ``copies`` is how many pods
of one request fit; ``feasible``/``fits_alone`` apply it to a state's nodes; ``insufficient``
gives the reasons in kube-scheduler's order. The same request vector (``ClusterState.vector``) is the
coefficient row of the CP-SAT capacity constraints (``encode.py``).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from models.config import DEFAULT_KUBERNETES_VERSION, version_at_least
from models.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

from ...framework import SUCCESS, Code, Status
from ...info import NodeInfo, PodInfo
from ...plugin_api import NodeByNode, NodeDryRun, StaticView
from ...state import ClusterState

NAME = "NodeResourcesFit"
# The node already runs as many pods as its allocatable "pods" allows.
REASON_TOO_MANY_PODS = "Too many pods"


def insufficient_reason(resource: str) -> str:
    """``Insufficient cpu``, ``Insufficient nvidia.com/gpu``, ..."""
    return f"Insufficient {resource}"


def insufficient(vec: np.ndarray, free: np.ndarray, alloc: np.ndarray, state: ClusterState) -> tuple[list[str], bool]:
    """Reasons the request ``vec`` does not fit ``free``, and whether any part exceeds ``alloc``
    outright (no eviction could make room)."""
    reasons: list[str] = []
    hopeless = False
    idx = state.res_index
    if vec[idx[PODS]] > free[idx[PODS]]:
        # Never unresolvable, even with no pods allocatable: kube-scheduler's fit.go does not
        # mark the pod-count shortage Unresolvable (only cpu, memory, storage and scalars).
        reasons.append(REASON_TOO_MANY_PODS)
    order = [CPU, MEMORY, EPHEMERAL_STORAGE] + sorted(r for r in state.resources[4:])
    for name in order:
        i = idx[name]
        if vec[i] > 0 and vec[i] > free[i]:
            reasons.append(insufficient_reason(name))
            hopeless |= bool(vec[i] > alloc[i])
    return reasons, hopeless


def filter(pod: PodInfo, node: NodeInfo, state: ClusterState, *, version: str = DEFAULT_KUBERNETES_VERSION) -> Status:
    n = node.index
    return status_of(state.vector(pod), state.alloc[n] - state.used[n], state.alloc[n], state, version=version)


def status_of(vec: np.ndarray, free, alloc: np.ndarray, state: ClusterState, *, version: str = DEFAULT_KUBERNETES_VERSION) -> Status:
    """The filter's status for a request ``vec`` against ``free`` of a node with ``alloc``
    (preemption's dry run asks it of amounts the state does not hold)."""
    reasons, hopeless = insufficient(vec, free, alloc, state)
    if not reasons:
        return SUCCESS
    # From 1.34 a request larger than the whole allocatable is one no eviction can help.
    code = Code.UNRESOLVABLE if hopeless and version_at_least(version, "1.34") else Code.UNSCHEDULABLE
    return Status(code, tuple(reasons), NAME)


def asked(vec: np.ndarray) -> list[tuple[int, int]]:
    """``(column, amount)`` of every resource a request asks for (non-zero; the pod count always
    is): the request as ``fits`` reads it, for callers that ask it of one node many times."""
    return [(c, int(vec[c])) for c in np.flatnonzero(vec).tolist()]


def fits(vec: np.ndarray | list[tuple[int, int]], room: Any) -> Any:
    """The rule: a request fits ``room`` when every resource it asks for is at most what is
    there; a resource it does not ask for (0) always fits, even where the node is overcommitted.

    ``vec`` is a request vector and ``room`` one node's row (a numpy bool comes back) or one row
    per node (a bool per row). Preemption's dry run asks it of one node thousands of times in
    exact Python integers: it passes ``asked(vec)`` and a list, and gets a plain bool at Python
    speed (numpy's per-call cost dominated greedy preemption: 35% slower)."""
    if isinstance(vec, list):
        return all(room[c] >= amount for c, amount in vec)
    cols = np.flatnonzero(vec)
    return np.all(np.asarray(room)[..., cols] >= vec[cols], axis=-1)


def copies(vec: np.ndarray, room: np.ndarray) -> np.ndarray:
    """How many pods of request ``vec`` fit ``room`` together, per row: ``fits`` repeated (0 where
    not even one fits). ``vec`` must ask for something (a pod always asks for the pod count)."""
    cols = np.flatnonzero(vec)
    return np.maximum((room[..., cols] // vec[cols]).min(axis=-1), 0)


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
        for row, k in zip(failing.tolist(), np.ravel(inverse).tolist()):
            out[int(nodes[row])] = by_pattern[k]
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


class RoomOnNode:
    """The filter's dry run on one node (``plugin_api.NodeDryRun``): the node's free room in exact
    Python integers, a pod's request given back as it leaves and taken again as it returns."""

    def __init__(self, pod: PodInfo, state: ClusterState, node: int, version: str,
                 request: list[tuple[int, int]]) -> None:
        self.state, self.node, self.version = state, node, version
        self.vec = state.vector(pod)
        self.request = request
        self.room = state.free[node].tolist()

    def remove_pod(self, pod: PodInfo) -> None:
        self.room = [r + a for r, a in zip(self.room, self.state.vector(pod).tolist())]

    def add_pod(self, pod: PodInfo) -> None:
        self.room = [r - a for r, a in zip(self.room, self.state.vector(pod).tolist())]

    def status(self) -> Status:
        if fits(self.request, self.room):
            return SUCCESS
        free = np.array(self.room, dtype=object)
        return status_of(self.vec, free, self.state.alloc[self.node], self.state, version=self.version)

    def reads(self) -> tuple:
        return ()  # the node's own room


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> ResourcesCycle:
    """The plugin's ``cycle`` hook: every pod asks at least for the pod count."""
    return ResourcesCycle(pod, state, static.nodes, version)
