"""InterPodAffinity: required (anti-)affinity (filter, encoding, checks), preferred (score)."""

from __future__ import annotations

from ...plugin_api import Coupling, Plugin, Reads
from . import check, encode, filter, score
from .book import TermBook, term_book
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


def _terms(pod):
    return (*pod.affinity, *pod.anti_affinity, *pod.preferred_affinity, *pod.preferred_anti_affinity)


def pod_label_keys(pod):
    """The pod label keys the pod's (anti-)affinity terms select on."""
    return {k for t in _terms(pod) for k in t.selector.keys()}


def node_label_keys(pod):
    return {t.topology_key for t in _terms(pod)}


def topology_keys(pod):
    return {t.topology_key for t in (*pod.affinity, *pod.anti_affinity)}


def coupling(pod, state):
    """Required terms read the pods of the pod's domain; so do running pods' required
    anti-affinity terms that match the pod (``state``)."""
    if pod.affinity or pod.anti_affinity:
        return Coupling.ACROSS
    if state is not None and any(t.matches(pod.namespace, pod.labels, pod.ns_labels) for t in term_book(state).owners):
        return Coupling.ACROSS
    return Coupling.NONE


PLUGIN = Plugin(filter.NAME, score_cache=InterPodPart, cycle=filter.cycle, prune=prune, couples=couples, filter=filter, score=score, encode=(encode.encode,),
                checks=(check.check_anti_affinity, check.check_affinity), state=TermBook.make,
                reads=Reads(pod_label_keys=pod_label_keys, node_label_keys=node_label_keys, topology_keys=topology_keys,
                            coupling=coupling))
