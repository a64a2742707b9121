"""A request against a node's room: NodeResourcesFit's rule (kube-scheduler's
``noderesources.Fits``), the one place it is computed. The plugin's filter, the engines'
candidate bounds and packing hints (through its ``capacity`` hook), preemption's dry run and a
gang's topology counts all ask it.

``fits`` is the rule; ``copies`` is how many pods of one request fit; ``insufficient`` gives the
reasons in kube-scheduler's order and ``status_of`` the filter's status for them; ``RoomOnNode``
follows one node's room as preemption's dry run takes pods off it and puts them back. The same request
vector (``ClusterState.vector``) is the coefficient row of the CP-SAT capacity constraints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.config import DEFAULT_KUBERNETES_VERSION, version_at_least
from models.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

from ...framework import SUCCESS, Code, Status
from ...info import PodInfo
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


class RoomOnNode:
    """The filter's dry run on one node (``plugin_api.NodeDryRun``): the node's free room in exact
    Python integers, a pod's request given back as it leaves and taken again as it returns.

    Only the resources the pod asks for are followed (the rule and its reasons read no other),
    a victim's amounts read from its requests: preemption's dry runs move thousands of pods, and
    a numpy row per move was most of their cost. ``request``: ``asked`` of the pod's vector."""

    __slots__ = ("state", "node", "version", "vec", "cols", "names", "need", "room", "slots")

    def __init__(self, pod: PodInfo, state: ClusterState, node: int, version: str,
                 request: list[tuple[int, int]]) -> None:
        self.state, self.node, self.version = state, node, version
        self.vec = state.vector(pod)
        pods = state.res_index[PODS]
        free = state.free[node]
        # Every asked resource but the pod count, which every pod takes one of and is followed on
        # its own (``slots``): its column, its name (a victim's requests are read by name) and
        # the amount asked.
        asked_ = [(c, amount) for c, amount in request if c != pods]
        self.cols = [c for c, _ in asked_]
        self.names = [state.resources[c] for c in self.cols]
        self.need = [amount for _, amount in asked_]
        row = free.tolist()
        self.room = [row[c] for c in self.cols]
        self.slots = row[pods]

    def remove_pod(self, pod: PodInfo) -> None:
        get = pod.requests.get
        self.room = [r + get(name, 0) for r, name in zip(self.room, self.names)]
        self.slots += 1

    def add_pod(self, pod: PodInfo) -> None:
        get = pod.requests.get
        self.room = [r - get(name, 0) for r, name in zip(self.room, self.names)]
        self.slots -= 1

    def fits(self) -> bool:
        if self.slots < 1:
            return False
        for r, amount in zip(self.room, self.need):
            if r < amount:
                return False
        return True

    def status(self) -> Status:
        if self.fits():
            return SUCCESS
        state = self.state
        free = state.free[self.node].astype(object)
        for r, c in zip(self.room, self.cols):
            free[c] = r
        free[state.res_index[PODS]] = self.slots
        return status_of(self.vec, free, state.alloc[self.node], state, version=self.version)

    def reads(self) -> tuple:
        return ()  # the node's own room
