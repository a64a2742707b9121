"""The static verdicts topology spread's inclusion policies read (``nodeAffinityPolicy`` and
``nodeTaintsPolicy: Honor``): whether a node matches the pod's nodeSelector and required node
affinity (NodeAffinity's rule, its filter asks it here too), and whether the pod tolerates the
node's NoSchedule and NoExecute taints (TaintToleration's rule, ``terms.untolerated``)."""

from __future__ import annotations

from ...info import NodeInfo, PodInfo
from ...terms import untolerated


def matches(pod: PodInfo, node: NodeInfo) -> bool:
    """nodeSelector (every key equal) AND required node affinity (terms ORed)."""
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return False
    required = pod.required_node_affinity
    if required is not None and not required.matches(node.name, node.labels):
        return False
    return True


def tolerates(pod: PodInfo, node: NodeInfo) -> bool:
    """Every NoSchedule and NoExecute taint of the node is tolerated."""
    return untolerated(pod.tolerations, node.taints) is None
