"""NodePorts: host ports (filter, CP-SAT encoding, final check)."""

from __future__ import annotations

from ...plugin_api import Coupling, Plugin, Reads
from ..shared.host_ports import ports_conflict
from . import check, encode, filter
from .book import PortBook


def prune(pod, state, can_evict, window):
    """Nodes where a running pod no eviction can remove holds one of the pod's host ports."""
    return encode.blocked_by_running(pod, state, can_evict)


def coupling(pod, state):
    """A host port is taken by the pods of one node."""
    return Coupling.NODE if pod.host_ports else Coupling.NONE


def apart(pod):
    """A pod never shares a node with a pod whose host ports collide with its own."""
    if not pod.host_ports:
        return None
    return lambda other: ports_conflict(pod.host_ports, other.host_ports)


PLUGIN = Plugin(filter.NAME, cycle=filter.cycle, prune=prune, filter=filter, encode=(encode.encode,), checks=(check.check,),
                reads=Reads(coupling=coupling), state=PortBook.make, apart=apart)
