"""Device claims a PodGroup owns (Kubernetes 1.37, ``spec.resourceClaims``, KEP-5729): one claim
shared by the group's members, in place of one claim per pod.

A member uses the group's claim by listing an entry of the same name and the same source (the
same ResourceClaim, or the same ResourceClaimTemplate) in its own ``spec.resourceClaims``. For a
ResourceClaim by name nothing changes: pods naming one claim already share it. For a template,
the group's claim is the one its ``status.resourceClaimStatuses`` names (made already by the
controller), else the claim the template would make for the group, named ``<group>-<entry>-``
(the controller's name less its random suffix), which this module adds to the snapshot's
claims. Each member's entry then points at that claim (``status.resourceClaimStatuses``), and
the DRA rules (``solver/plugins/dynamic_resources``) allocate it once, on the nodes its devices
allow, for every member.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from .dra import ResourceClaim, ResourceClaimStatus, ResourceClaimTemplate, template_claim_name
from .objects import ObjectMeta, Pod, PodResourceClaimStatus, copy_with
from .workloads import CorePodGroup

# The annotation a claim made for a group's entry carries (as a pod's carries its entry's name).
GROUP_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/podgroup-claim-name"


def group_claims(groups: Iterable[CorePodGroup], templates: Mapping[str, ResourceClaimTemplate],
                 claims: Mapping[str, ResourceClaim]) -> tuple[dict[tuple[str, str], tuple[Any, str]], list[ResourceClaim]]:
    """Per (group key, entry name): the group's entry and the name of the claim it shares; and
    the claims made here from templates (none made when the controller made the group's)."""
    shared: dict[tuple[str, str], tuple[Any, str]] = {}
    made: list[ResourceClaim] = []
    for group in groups:
        ns = group.metadata.namespace
        statuses = {s.name: s for s in group.status.resource_claim_statuses} if group.status else {}
        for entry in group.spec.resource_claims:
            if entry.resource_claim_name:
                continue  # a claim by name is shared by whoever names it
            status = statuses.get(entry.name)
            if status is not None and status.resource_claim_name:
                shared[group.key, entry.name] = (entry, status.resource_claim_name)
                continue
            template = templates.get(f"{ns}/{entry.resource_claim_template_name}")
            if template is None:
                continue  # the members' own entries wait for the template, with the reason
            name = template_claim_name(group.metadata.name, entry.name)
            if f"{ns}/{name}" not in claims:
                made.append(ResourceClaim.model_construct(
                    api_version="resource.k8s.io/v1", kind="ResourceClaim",
                    metadata=ObjectMeta(name=name, namespace=ns, annotations={GROUP_CLAIM_NAME_ANNOTATION: entry.name}),
                    spec=template.spec.spec, status=ResourceClaimStatus()))
            shared[group.key, entry.name] = (entry, name)
    return shared, made


def share_group_claims(pods: Iterable[Pod], shared: Mapping[tuple[str, str], tuple[Any, str]],
                       group_of: Callable[[Pod], Optional[str]]) -> list[Pod]:
    """``pods`` with each member's entry matching its group's (same name, same template) pointed
    at the group's claim; every other pod as it was."""
    if not shared:
        return list(pods)
    out = []
    for pod in pods:
        key = group_of(pod)
        points: dict[str, str] = {}
        for entry in pod.spec.resource_claims if key is not None else ():
            assert key is not None
            found = shared.get((key, entry.name))
            if found is not None and entry.resource_claim_template_name == found[0].resource_claim_template_name:
                points[entry.name] = found[1]
        if not points:
            out.append(pod)
            continue
        kept = [s for s in pod.status.resource_claim_statuses if s.name not in points]
        statuses = kept + [PodResourceClaimStatus(name=n, resource_claim_name=c) for n, c in points.items()]
        out.append(copy_with(pod, {"status": copy_with(pod.status, {"resource_claim_statuses": statuses})}))
    return out
