"""DynamicResources' PreBind: what the live scheduler writes on a placed pod's ResourceClaims
before the pod is bound — each claim's allocation (the window's, or none for a claim allocated
already) and the pod in its ``reservedFor``; for the claim kube-scheduler makes itself
(extended resources backed by a DeviceClass), the claim to create and the pod's request
mappings. The writes themselves are the live scheduler's (``ClaimWrites``' writer)."""

from __future__ import annotations

from typing import Optional

from models import ClusterSnapshot, Node, Plan, Pod
from models.dra import EXTENDED_CLAIM_ANNOTATION, ClaimUse, extended_claim, extended_request_mappings

from ...plugin_api import ClaimWrites, PodPreBind


def prebind(plan: Plan, snapshot: ClusterSnapshot) -> PodPreBind:
    """The claims each pod the plan places uses, with the allocation the plan chose for each."""
    allocated = {a.claim: a.allocation for a in plan.allocations}

    def claims_of(pod: Pod, read: Pod, node: Node) -> Optional[ClaimWrites]:
        if not pod.spec.resource_claims:
            return None
        uses = []
        for pc in snapshot.pod_claims(pod):
            if not (pc.needed and pc.key and pc.claim is not None):
                continue
            if pc.from_template and pc.claim.metadata.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true":
                # the claim kube-scheduler makes for extended resources backed by DRA: made in PreBind
                requests = [r for r in pc.claim.spec.devices.requests if r.exactly is not None]
                spec = {"devices": {"requests": [
                    {"name": r.name, "exactly": {"deviceClassName": r.exactly.device_class_name,
                                                 "allocationMode": "ExactCount", "count": r.exactly.count}}
                    for r in requests if r.exactly is not None]}}
                names = [r.name for r in requests]
                uses.append(ClaimUse(pc.key, "", allocated.get(pc.key),
                                     create=extended_claim(pod.metadata.namespace, pod.metadata.name,
                                                           pod.metadata.uid or "", spec),
                                     mappings=tuple(extended_request_mappings(read, names))))
                continue
            uses.append(ClaimUse(pc.key, pc.claim.metadata.uid or "", allocated.get(pc.key)))
        return ClaimWrites(tuple(uses))

    return claims_of
