"""PodTopologySpread: DoNotSchedule (filter, encoding, check) and ScheduleAnyway (score)."""

from __future__ import annotations

from ...plugin_api import Coupling, Plugin, Reads
from . import check, crowding, encode, filter, hand_out, score
from .score_cache import SpreadPart
from .window_guard import GuardPass


def prune(pod, state, can_evict, window):
    return encode.prune(pod, state)


def couples(x):
    """x's DoNotSchedule constraints count the pods of its namespace their selectors match."""
    hard = x.hard_spread
    if not hard:
        return None
    return lambda y: y.namespace == x.namespace and any(c.selector.matches(y.labels) for c in hard)


HOSTNAME = "kubernetes.io/hostname"


def pod_label_keys(pod):
    """The pod label keys the pod's spread constraints select on."""
    return {k for c in pod.spread for k in c.selector.keys()}


def node_label_keys(pod):
    """The topology keys of the pod's constraints, and of the defaults its score reads (zone; the
    hostname one counts per node, which a node class keeps apart anyway)."""
    soft = {c.topology_key for c in score.soft_constraints(pod)[0]} - {HOSTNAME}
    return {c.topology_key for c in pod.spread} | soft


def topology_keys(pod):
    return {c.topology_key for c in pod.hard_spread}


def coupling(pod, state):
    """DoNotSchedule constraints count the matching pods of each domain of their key."""
    return Coupling.DOMAIN if pod.hard_spread else Coupling.NONE


def greedy(ctx, state, static, trial):
    """Greedy's window guard: no pod breaks the spread of a window pod placed before it."""
    return GuardPass(state, static)


PLUGIN = Plugin(filter.NAME, score_cache=SpreadPart, hand_out=hand_out, crowding=crowding.crowding, greedy=greedy, cycle=filter.cycle, prune=prune, couples=couples, filter=filter, score=score, encode=(encode.encode,),
                checks=(check.check,),
                reads=Reads(pod_label_keys=pod_label_keys, node_label_keys=node_label_keys, topology_keys=topology_keys,
                            coupling=coupling))
