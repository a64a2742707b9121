"""A plan's device allocations written into the cluster it leaves (``plan_applied``): what
``why`` and ``provision`` reason about must see the devices the plan's pods take as taken.

A claim the snapshot has gets the plan's ``status.allocation`` and its pods in
``status.reservedFor``. A claim still to be made from a template (the plan names it by its
``generateName``, ``<pod>-<entry>-``) is made, named ``<generateName>plan``, with the template's
spec, and the pod's ``status.resourceClaimStatuses`` names it for the entry — as the
resourceclaim controller and kube-scheduler would leave them.
"""

from __future__ import annotations

from models.dra import (POD_CLAIM_NAME_ANNOTATION, AllocationResult, ResourceClaim, ResourceClaimConsumerReference,
                        template_claim_name)
from models.objects import ObjectMeta, Pod, PodResourceClaimStatus, copy_with
from models.plan import Plan
from models.snapshot import ClusterSnapshot

MADE_SUFFIX = "plan"


def carried_claims(snapshot: ClusterSnapshot, plan: Plan, pods: list[Pod]) -> tuple[list[Pod], list[ResourceClaim]]:
    """``pods`` (the cluster's, after the plan) and the snapshot's claims, with ``plan``'s
    allocations written in."""
    if not plan.allocations:
        return pods, list(snapshot.resource_claims)
    claims = {c.key: c for c in snapshot.resource_claims}
    by_key = {p.key: i for i, p in enumerate(pods)}
    out_pods = list(pods)
    for a in plan.allocations:
        allocation = AllocationResult.model_validate(a.allocation)
        users = [out_pods[by_key[k]] for k in a.pods if k in by_key]
        reserved = [ResourceClaimConsumerReference(resource="pods", name=p.metadata.name, uid=p.metadata.uid or "")
                    for p in users]
        claim = claims.get(a.claim)
        if claim is not None:
            status = copy_with(claim.status, {"allocation": allocation, "reserved_for": reserved})
            claims[a.claim] = copy_with(claim, {"status": status})
            continue
        if len(users) != 1:
            continue  # (a claim from a template is one pod's)
        pod = users[0]
        made = _made(snapshot, pod, a.claim, allocation, reserved)
        if made is None:
            continue
        entry, claim = made
        claims[claim.key] = claim
        statuses = [s for s in pod.status.resource_claim_statuses if s.name != entry]
        statuses.append(PodResourceClaimStatus(name=entry, resource_claim_name=claim.metadata.name))
        out_pods[by_key[pod.key]] = copy_with(pod, {"status": copy_with(pod.status, {"resource_claim_statuses": statuses})})
    return out_pods, list(claims.values())


def _made(snapshot: ClusterSnapshot, pod: Pod, key: str, allocation: AllocationResult,
          reserved: list[ResourceClaimConsumerReference]) -> tuple[str, ResourceClaim] | None:
    """(entry, claim) for the template claim ``key`` of ``pod``; None when no entry makes it."""
    ns, _, generate_name = key.partition("/")
    for pc in snapshot.pod_claims(pod):
        if pc.from_template and pc.claim is not None and template_claim_name(pod.metadata.name, pc.name) == generate_name:
            meta = ObjectMeta(name=generate_name + MADE_SUFFIX, namespace=ns,
                              annotations={POD_CLAIM_NAME_ANNOTATION: pc.name})
            status = copy_with(pc.claim.status, {"allocation": allocation, "reserved_for": reserved})
            return pc.name, ResourceClaim.model_construct(api_version="resource.k8s.io/v1", kind="ResourceClaim",
                                                          metadata=meta, spec=pc.claim.spec, status=status)
    return None
