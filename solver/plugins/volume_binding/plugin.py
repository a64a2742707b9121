"""VolumeBinding: claims bound, or bindable, on the node (rules in the volume cycle,
window-wide encoding, final check)."""

from __future__ import annotations

import numpy as np

from ...plugin_api import Coupling, Plugin, Reads
from ...volume_catalog import VolumeCatalog
from . import check, encode, filter, rules


def prune(pod, state, can_evict, window):
    """Nodes where the pod's claims can never be bound (only for a pod with claims)."""
    return encode.prune(pod, state, can_evict) if pod.claims else np.ones(len(state.nodes), dtype=bool)


def prepare(snapshot, config, window, state):
    """A snapshot with volumes: its claims, volumes, classes and CSI limits (``VolumeCatalog``)
    on the state, and VolumeBinding's Reserve (``filter.reserve``/``release``) as its book."""
    if snapshot.pvcs or snapshot.pvs or snapshot.storage_classes or snapshot.csi_nodes:
        state.volumes = VolumeCatalog.of(snapshot.pvcs, snapshot.pvs, snapshot.storage_classes, snapshot.csi_nodes)
        state.volume_book = filter


def couples(x):
    """Pods with volume claims may share a claim or compete for one volume, wherever they land
    (``encode.py``): one with claims is tied to every other with claims."""
    return (lambda y: bool(y.claims)) if x.claims else None


def coupling(pod, state):
    """A claim's volume is used on the nodes of its pods (one node for ReadWriteOncePod)."""
    return Coupling.NODE if pod.claims else Coupling.NONE


PLUGIN = Plugin(rules.NAME, prune=prune, prepare=prepare, couples=couples, filter=rules, cycle=filter.cycle, window_encode=(encode.encode,), checks=(check.check,),
                per_node_state=rules.uses_node_state, reads=Reads(coupling=coupling))
