"""VolumeBinding: claims bound, or bindable, on the node (rules in the volume cycle,
window-wide encoding, final check)."""

from __future__ import annotations

import numpy as np

from ....plugin_api import Coupling, PlanPart, Plugin, Reads
from ....volume_catalog import VolumeCatalog
from . import check, encode, filter, rules
from .prebind import prebind


def prune(pod, state, can_evict, window):
    """Nodes where the pod's claims can never be bound (only for a pod with claims)."""
    return encode.prune(pod, state, can_evict) if pod.claims else np.ones(len(state.nodes), dtype=bool)


def prepare(snapshot, config, window, state, static):
    """A snapshot with volumes: its claims, volumes, classes and CSI limits (``VolumeCatalog``)
    on the state, and VolumeBinding's Reserve (``filter.Reserve``) given to the volume book."""
    if snapshot.pvcs or snapshot.pvs or snapshot.storage_classes or snapshot.csi_nodes:
        filter.attach_volumes(state, VolumeCatalog.of(snapshot.pvcs, snapshot.pvs, snapshot.storage_classes,
                                                      snapshot.csi_nodes))


def plan_output(ctx, placements, victims, engine_state):
    """The plan's ``volume_bindings``: a volume (or provisioning) for every delayed claim."""
    return PlanPart(volume_bindings=filter.plan_volumes(ctx, placements, victims, engine_state))


def couples(x):
    """Pods with volume claims may share a claim or compete for one volume, wherever they land
    (``encode.py``): one with claims is tied to every other with claims."""
    return (lambda y: bool(y.claims)) if x.claims else None


def coupling(pod, state):
    """A claim's volume is used on the nodes of its pods (one node for ReadWriteOncePod)."""
    return Coupling.NODE if pod.claims else Coupling.NONE


PLUGIN = Plugin(rules.NAME, prune=prune, prepare=prepare, couples=couples, filter=rules, cycle=filter.cycle, window_encode=(encode.encode,), checks=(check.check,),
                per_node_state=rules.uses_node_state, reads=Reads(coupling=coupling), plan_output=plan_output,
                prebind=prebind)
