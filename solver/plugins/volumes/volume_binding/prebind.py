"""VolumeBinding's PreBind: what the live scheduler writes before a placed pod is bound — each
first-time claim's chosen volume gets the claim as its claimRef, or the claim gets the node to
provision for (``volume.kubernetes.io/selected-node``). The PV controller and the provisioner
finish the binding. The writes themselves are the live scheduler's (``VolumeWrites``' writer)."""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from models import ClusterSnapshot, Node, Plan, Pod

from ....plugin_api import ClaimVolume, PodPreBind, VolumeWrites


def prebind(plan: Plan, snapshot: ClusterSnapshot) -> PodPreBind:
    """The volumes the plan chose for each pod's first-time claims, with the claims' uids."""
    chosen: dict[str, list[ClaimVolume]] = defaultdict(list)
    for b in plan.volume_bindings:
        claim = snapshot.pvc_by_key.get(b.claim)
        chosen[b.pod].append(ClaimVolume(b.claim, b.volume, claim.metadata.uid if claim is not None else ""))

    def volumes_of(pod: Pod, read: Pod, node: Node) -> Optional[VolumeWrites]:
        got = chosen.get(pod.key)
        return VolumeWrites(tuple(got)) if got else None

    return volumes_of
