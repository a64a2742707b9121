"""NodeName: a pod that names its node may only go there."""

from __future__ import annotations

from ...framework import SUCCESS, Status, unresolvable
from ...info import NodeInfo, PodInfo

NAME = "NodeName"
# spec.nodeName is set to another node.
REASON = "node(s) didn't match the requested node name"


def filter(pod: PodInfo, node: NodeInfo) -> Status:
    if not pod.node_name or pod.node_name == node.name:
        return SUCCESS
    return unresolvable(NAME, REASON)
