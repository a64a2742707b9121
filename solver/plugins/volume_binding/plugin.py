"""VolumeBinding: claims bound, or bindable, on the node (rules in the volume cycle,
window-wide encoding, final check)."""

from __future__ import annotations

import numpy as np

from ...plugin_api import Plugin
from . import check, encode, filter, rules


def prune(pod, state, can_evict, gangs):
    """Nodes where the pod's claims can never be bound (only for a pod with claims)."""
    return encode.prune(pod, state, can_evict) if pod.claims else np.ones(len(state.nodes), dtype=bool)


PLUGIN = Plugin(rules.NAME, prune=prune, filter=rules, cycle=filter.cycle, window_encode=(encode.encode,), checks=(check.check,),
                per_node_state=rules.uses_node_state)
