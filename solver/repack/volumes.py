"""Where a moved pod's persistent volumes let its replacement run.

A StatefulSet pod with a zonal disk (a PersistentVolume whose ``nodeAffinity`` names a zone) can
only be re-created in that zone: moved anywhere else, its replacement never starts. So:

* a pod whose claims are all in the snapshot, bound to volumes that are too, moves only to nodes
  every one of those volumes admits (their node affinity joins the pod's required node affinity
  for the re-placement);
* a pod whose claims or volumes are not in the snapshot does not move at all: where its data can
  be reached is unknown (dump them too: ``kubectl get pv,pvc -A``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from models.objects import Affinity, NodeAffinity, NodeSelector, NodeSelectorTerm, Pod
from models.snapshot import ClusterSnapshot
from models.storage import claim_names

# Why a pod with persistent volumes stays: the detail names the claim and what is missing.
REASON_VOLUME_UNKNOWN = "its persistent volume's topology is not in the snapshot (dump pv,pvc too)"


@dataclass(frozen=True)
class VolumePlacement:
    """Where a pod's volumes admit it: ``unknown`` says why that cannot be told (it must stay);
    otherwise ``nodes`` is the volumes' joint node selector (None: anywhere)."""

    nodes: Optional[NodeSelector] = None
    unknown: str = ""


def volume_placement(pod: Pod, snapshot: ClusterSnapshot) -> Optional[VolumePlacement]:
    """None when the pod mounts no PersistentVolumeClaim."""
    claims = claim_names(pod.spec.volumes)
    if not claims:
        return None
    selector: Optional[NodeSelector] = None
    for name in claims:
        claim = snapshot.pvc_by_key.get(f"{pod.metadata.namespace}/{name}")
        if claim is None:
            return VolumePlacement(unknown=f"claim {name} not in the snapshot")
        if not claim.spec.volume_name:
            return VolumePlacement(unknown=f"claim {name} is not bound to a volume")
        volume = snapshot.pv_by_name.get(claim.spec.volume_name)
        if volume is None:
            return VolumePlacement(unknown=f"volume {claim.spec.volume_name} of claim {name} not in the snapshot")
        if volume.required_nodes is not None:
            selector = both(selector, volume.required_nodes)
    return VolumePlacement(nodes=selector)


def both(first: Optional[NodeSelector], second: NodeSelector) -> NodeSelector:
    """A selector admitting the nodes both admit. Terms are ORed within a selector, so the
    result's terms are every pairing of a term of each, their requirements joined."""
    if first is None:
        return second
    terms = [
        NodeSelectorTerm(
            match_expressions=[*a.match_expressions, *b.match_expressions],
            match_fields=[*a.match_fields, *b.match_fields],
        )
        for a in first.node_selector_terms if not a.is_empty()
        for b in second.node_selector_terms if not b.is_empty()
    ]
    return NodeSelector(node_selector_terms=terms or [NodeSelectorTerm()])  # an empty term admits no node


def confined(pod: Pod, nodes: NodeSelector) -> Pod:
    """``pod`` with ``nodes`` joined to its required node affinity (for its re-placement)."""
    affinity = pod.spec.affinity or Affinity()
    node_affinity = affinity.node_affinity or NodeAffinity()
    required = both(node_affinity.required_during_scheduling_ignored_during_execution, nodes)
    node_affinity = node_affinity.model_copy(update={"required_during_scheduling_ignored_during_execution": required})
    affinity = affinity.model_copy(update={"node_affinity": node_affinity})
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={"affinity": affinity})})
