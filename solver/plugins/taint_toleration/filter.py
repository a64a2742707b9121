"""TaintToleration (filter): every NoSchedule/NoExecute taint of the node must be tolerated.

The first untolerated taint, in the node's own order, names the failure.
"""

from __future__ import annotations

from models.objects import Taint

from ...framework import SUCCESS, Status, unresolvable
from ...info import NodeInfo, PodInfo
from ...terms import NO_SCHEDULE_EFFECTS, untolerated  # the filter's rule, shared with scoring's node index

__all__ = ["FILTER_EFFECTS", "NAME", "filter", "reason", "untolerated"]

NAME = "TaintToleration"
# Effects the filter enforces; PreferNoSchedule only affects scoring.
FILTER_EFFECTS = NO_SCHEDULE_EFFECTS


def reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def filter(pod: PodInfo, node: NodeInfo) -> Status:
    taint = untolerated(pod.tolerations, node.taints)
    if taint is None:
        return SUCCESS
    return unresolvable(NAME, reason(taint))
