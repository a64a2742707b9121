"""NodeAffinity: nodeSelector and required node affinity (static), preferred terms (score)."""

from __future__ import annotations

from ...framework import unresolvable
from ...plugin_api import Plugin, Reads
from . import filter, score
from .score_cache import AffinityPart

def node_names(pod):
    """PreFilterResult: required terms naming nodes (``metadata.name In``) restrict the pod to
    them; terms naming none at all fail the PreFilter."""
    allowed = filter.prefilter_node_names(pod)
    if allowed is None:
        return None
    return allowed, unresolvable(filter.NAME, filter.REASON_PREFILTER if allowed else filter.REASON_CONFLICT)


def node_label_keys(pod):
    """The node label keys the pod's node selector and node affinity terms read; None when a term
    reads the node's name (``matchFields``)."""
    keys = set(pod.node_selector)
    required = pod.required_node_affinity
    terms = [*(required.node_selector_terms if required is not None else ()), *(t for _, t in pod.preferred_node_terms)]
    for term in terms:
        if term.match_fields:
            return None
        keys.update(e.key for e in term.match_expressions)
    return keys


PLUGIN = Plugin(filter.NAME, score_cache=AffinityPart, filter=filter, static=True, score=score, node_names=node_names,
                reads=Reads(node_label_keys=node_label_keys))
