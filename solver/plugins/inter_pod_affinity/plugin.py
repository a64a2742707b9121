"""InterPodAffinity: required (anti-)affinity (filter, encoding, checks), preferred (score)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, encode, filter, score
from .score_cache import InterPodPart


def prune(pod, state, can_evict, window):
    return encode.prune(pod, state, can_evict)


def couples(x):
    """x's required (anti-)affinity terms count the pods they match, in x's domain."""
    if not x.anti_affinity and not x.affinity:
        return None
    terms = (*x.anti_affinity, *x.affinity)
    every = filter.AllTerms(x.affinity) if x.affinity else None
    return lambda y: (any(t.matches(y.namespace, y.labels, y.ns_labels) for t in terms)
                      or (every is not None and every.matches(y)))


PLUGIN = Plugin(filter.NAME, score_cache=InterPodPart, cycle=filter.cycle, prune=prune, couples=couples, filter=filter, score=score, encode=(encode.encode,),
                checks=(check.check_anti_affinity, check.check_affinity))
