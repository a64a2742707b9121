"""DynamicResources Filter: a pod with ResourceClaims fits a node only where every claim is
allocated already and admits the node, or can be allocated from devices the node can use
(``allocator.Rules.allocate``). Pods without claims always pass. The state's ``dra``
(``hold.DraHold``) holds what earlier pods of the decision took."""

from __future__ import annotations

import numpy as np

from ...framework import SUCCESS, Status, unresolvable, unschedulable
from ...info import NodeInfo, PodInfo
from ...state import ClusterState
from .hold import hold_of

NAME = "DynamicResources"
# kube-scheduler's reason when no allocation of the pod's claims exists on the node.
REASON = "cannot allocate all claims"


def uses_node_state(pod: PodInfo) -> bool:
    """Whether the pod asks for devices: each node has its own, so nodes alike in every other way
    are not interchangeable for it (the plugin's ``per_node_state``)."""
    return bool(pod.pod.spec.resource_claims)


def applies(pod: PodInfo, state: ClusterState) -> bool:
    return hold_of(state) is not None and bool(pod.pod.spec.resource_claims)


def filter(pod: PodInfo, node: NodeInfo, state: ClusterState) -> Status:
    if not applies(pod, state):
        return SUCCESS
    dra = hold_of(state)
    assert dra is not None
    found, why = dra.allocation(pod, node.index)
    if found is not None:
        return SUCCESS
    if why.startswith(REASON):
        return unschedulable(NAME, why)
    return unresolvable(NAME, why)


def feasible(pod: PodInfo, nodes: np.ndarray, state: ClusterState) -> np.ndarray:
    if not applies(pod, state):
        return np.ones(len(nodes), dtype=bool)
    dra = hold_of(state)
    assert dra is not None
    return np.fromiter((dra.fits(pod, int(n)) for n in nodes), dtype=bool, count=len(nodes))
