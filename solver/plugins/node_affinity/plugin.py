"""NodeAffinity: nodeSelector and required node affinity (static), preferred terms (score)."""

from __future__ import annotations

from ...framework import unresolvable
from ...plugin_api import Plugin
from . import filter, score
from .score_cache import AffinityPart

def node_names(pod):
    """PreFilterResult: required terms naming nodes (``metadata.name In``) restrict the pod to
    them; terms naming none at all fail the PreFilter."""
    allowed = filter.prefilter_node_names(pod)
    if allowed is None:
        return None
    return allowed, unresolvable(filter.NAME, filter.REASON_PREFILTER if allowed else filter.REASON_CONFLICT)


PLUGIN = Plugin(filter.NAME, score_cache=AffinityPart, filter=filter, static=True, score=score, node_names=node_names)
