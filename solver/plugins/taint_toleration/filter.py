"""TaintToleration (filter): every NoSchedule/NoExecute taint of the node must be tolerated.

The first untolerated taint, in the node's own order, names the failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from models.objects import Taint, Toleration

from ...framework import SUCCESS, Status, unresolvable
from ...info import NodeInfo, PodInfo

NAME = "TaintToleration"
# Effects the filter enforces; PreferNoSchedule only affects scoring.
FILTER_EFFECTS = ("NoSchedule", "NoExecute")


def reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def untolerated(tolerations: Iterable[Toleration], taints: Iterable[Taint], effects=FILTER_EFFECTS) -> Optional[Taint]:
    """The first taint with one of ``effects`` that no toleration tolerates, or None."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def filter(pod: PodInfo, node: NodeInfo) -> Status:
    taint = untolerated(pod.tolerations, node.taints)
    if taint is None:
        return SUCCESS
    return unresolvable(NAME, reason(taint))
