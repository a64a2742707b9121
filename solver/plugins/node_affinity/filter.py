"""NodeAffinity (filter): ``nodeSelector`` and required node affinity must both match.

PreFilter: when every required term pins ``metadata.name`` with ``In``, only those nodes are
considered at all; the others fail with the PreFilter reason.
"""

from __future__ import annotations

from typing import Optional

from ...framework import SUCCESS, Status, unresolvable
from ...info import NodeInfo, PodInfo
from ..shared.node_inclusion import matches

NAME = "NodeAffinity"
# nodeSelector or required node affinity does not match the node.
REASON = "node(s) didn't match Pod's node affinity/selector"
# Nodes outside the set named by matchFields metadata.name In [...] (PreFilterResult).
REASON_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
# Every term names nodes, and together they name none.
REASON_CONFLICT = "pod affinity terms conflict"


def prefilter_node_names(pod: PodInfo) -> Optional[set[str]]:
    """Node names a pod's required terms restrict it to, or None when they do not all do so."""
    required = pod.required_node_affinity
    if required is None or not required.node_selector_terms:
        return None
    allowed: set[str] = set()
    for term in required.node_selector_terms:
        names: Optional[set[str]] = None
        for field in term.match_fields:
            if field.key == "metadata.name" and field.operator == "In":
                names = set(field.values) if names is None else names & set(field.values)
        if names is None:
            return None
        allowed |= names
    return allowed


def filter(pod: PodInfo, node: NodeInfo) -> Status:
    if matches(pod, node):
        return SUCCESS
    return unresolvable(NAME, REASON)
