"""NodePorts: host ports (filter, CP-SAT encoding, final check)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, encode, filter


def prune(pod, state, can_evict, window):
    """Nodes where a running pod no eviction can remove holds one of the pod's host ports."""
    return encode.blocked_by_running(pod, state, can_evict)


PLUGIN = Plugin(filter.NAME, cycle=filter.cycle, prune=prune, filter=filter, encode=(encode.encode,), checks=(check.check,))
