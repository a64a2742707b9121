"""NodeUnschedulable: a cordoned node takes only pods that tolerate its unschedulable taint."""

from __future__ import annotations

from models.objects import Taint

from ...framework import SUCCESS, Status, unresolvable
from ...info import NodeInfo, PodInfo

NAME = "NodeUnschedulable"
# The node has spec.unschedulable set and the pod does not tolerate it.
REASON = "node(s) were unschedulable"
# The synthetic taint a cordoned node is treated as having.
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def filter(pod: PodInfo, node: NodeInfo) -> Status:
    if not node.unschedulable:
        return SUCCESS
    if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
        return SUCCESS
    return unresolvable(NAME, REASON)
