"""kube-scheduler's node order and sampling: zones round-robin, and how many feasible nodes
one scheduling cycle looks for before it stops filtering."""

from __future__ import annotations

import numpy as np

from .info import NodeInfo, node_derived

ZONE_KEYS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_KEYS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
# Below this many nodes every node is filtered (minFeasibleNodesToFind).
MIN_FEASIBLE_NODES_TO_FIND = 100
# Floor of the adaptive percentage of nodes to score (minFeasibleNodesPercentageToFind).
MIN_FEASIBLE_NODES_PERCENTAGE = 5


def _label(node: NodeInfo, keys: tuple[str, ...]) -> str:
    for key in keys:
        if key in node.labels:
            return node.labels[key]
    return ""


def node_tree_order(nodes: list[NodeInfo]) -> np.ndarray:
    """Node indices round-robin across zones (zones in first-seen order, nodes in insertion
    order). Read-only: the array may be the one handed out for the same list before."""
    return node_derived(nodes, "tree order", lambda: _tree_order(nodes))


def _tree_order(nodes: list[NodeInfo]) -> np.ndarray:
    zones: dict[tuple[str, str], list[int]] = {}
    for node in nodes:
        zones.setdefault((_label(node, REGION_KEYS), _label(node, ZONE_KEYS)), []).append(node.index)
    order: list[int] = []
    lists = list(zones.values())
    depth = max((len(z) for z in lists), default=0)
    for i in range(depth):
        for z in lists:
            if i < len(z):
                order.append(z[i])
    out = np.array(order, dtype=np.int64)
    out.flags.writeable = False
    return out


def num_feasible_nodes_to_find(num_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes to find before scoring (adaptive when ``percentage`` is 0)."""
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_nodes
    if percentage <= 0:
        percentage = max(50 - num_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return min(num_nodes, max(num_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND))
