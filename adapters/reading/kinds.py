"""The kinds a snapshot is read for, each with its model, its API groups and how an error names
one of its objects (``pods/default/web-1``); every other kind is counted and skipped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel

from models import Namespace, Node, Pod, PodDisruptionBudget, PodGroup, PriorityClass
from models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from models.group_api import CompositePodGroup, WorkloadTemplates
from models.workloads import CorePodGroup, Workload

__all__ = ["ALSO", "KINDS", "VERSIONED", "Kind", "group_of", "kind_of", "object_name"]


@dataclass(frozen=True)
class Kind:
    plural: str  # how an error names the object: pods/default/web-1
    model: type[BaseModel]
    groups: frozenset[str]  # API groups accepted for this kind ("" is the core group)
    namespaced: bool
    slot: str = ""  # where its objects are collected, when not under the kind's own name


KINDS: dict[str, Kind] = {
    "Node": Kind("nodes", Node, frozenset({""}), False),
    "Pod": Kind("pods", Pod, frozenset({""}), True),
    "PodDisruptionBudget": Kind("poddisruptionbudgets", PodDisruptionBudget, frozenset({"policy"}), True),
    "PriorityClass": Kind("priorityclasses", PriorityClass, frozenset({"scheduling.k8s.io"}), False),
    # scheduler-plugins coscheduling (older releases served it as scheduling.sigs.k8s.io), and
    # Volcano's, which has the same minMember and minResources.
    "PodGroup": Kind("podgroups", PodGroup,
                      frozenset({"scheduling.x-k8s.io", "scheduling.sigs.k8s.io", "scheduling.volcano.sh"}), True),
    # Kubernetes' own gang API, 1.35 (Workload) and 1.36 (PodGroup): ``models.workloads``.
    "Workload": Kind("workloads", Workload, frozenset({"scheduling.k8s.io"}), True),
    # 1.37's inner nodes of a group tree (v1alpha3): ``models.group_api``.
    "CompositePodGroup": Kind("compositepodgroups", CompositePodGroup, frozenset({"scheduling.k8s.io"}), True),
    "Namespace": Kind("namespaces", Namespace, frozenset({""}), False),
    "PersistentVolume": Kind("persistentvolumes", PersistentVolume, frozenset({""}), False),
    "PersistentVolumeClaim": Kind("persistentvolumeclaims", PersistentVolumeClaim, frozenset({""}), True),
    # Dynamic Resource Allocation (``models.dra``): resource.k8s.io/v1 (GA in 1.34).
    "DeviceClass": Kind("deviceclasses", DeviceClass, frozenset({"resource.k8s.io"}), False),
    "ResourceSlice": Kind("resourceslices", ResourceSlice, frozenset({"resource.k8s.io"}), False),
    "ResourceClaim": Kind("resourceclaims", ResourceClaim, frozenset({"resource.k8s.io"}), True),
    "ResourceClaimTemplate": Kind("resourceclaimtemplates", ResourceClaimTemplate, frozenset({"resource.k8s.io"}), True),
    "StorageClass": Kind("storageclasses", StorageClass, frozenset({"storage.k8s.io"}), False),
    "CSINode": Kind("csinodes", CSINode, frozenset({"storage.k8s.io"}), False),
}


# Kinds whose name another API group uses too: (kind, group) -> how to read it.
ALSO: dict[tuple[str, str], Kind] = {
    ("PodGroup", "scheduling.k8s.io"): Kind("podgroups", CorePodGroup, frozenset({"scheduling.k8s.io"}), True,
                                            slot="CorePodGroup"),
}


# Kinds whose shape changed between versions of one API group: (kind, apiVersion) -> how to read
# it. 1.37's Workload holds templates (``podGroupTemplates``), 1.35's pod groups (``podGroups``);
# every version of Kubernetes' own PodGroup reads into ``CorePodGroup`` (``ALSO``).
_TEMPLATES = Kind("workloads", WorkloadTemplates, frozenset({"scheduling.k8s.io"}), True, slot="WorkloadTemplates")
VERSIONED: dict[tuple[str, str], Kind] = {
    ("Workload", "scheduling.k8s.io/v1beta1"): _TEMPLATES,
    ("Workload", "scheduling.k8s.io/v1alpha3"): _TEMPLATES,
}


def kind_of(kind: Any, api_version: Any) -> Optional[Kind]:
    if isinstance(api_version, str) and (kind, api_version) in VERSIONED:
        return VERSIONED[(kind, api_version)]
    group = group_of(api_version)
    return ALSO.get((kind, group)) if group is not None and (kind, group) in ALSO else KINDS.get(kind)


def group_of(api_version: Any) -> Optional[str]:
    """API group of an apiVersion (``policy/v1`` → ``policy``, ``v1`` → ``""``); None if absent."""
    if not isinstance(api_version, str) or not api_version:
        return None
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def object_name(spec: Kind, item: dict, position: str) -> str:
    """How an error names ``item``: ``pods/shop/web-1`` (``nodes/n1`` for a cluster-scoped kind,
    ``default`` for a namespace left out, as kubectl reads it). Without a usable name, its
    ``position`` in the input with what the object says of itself, ``items[3] (Pod in namespace
    shop)``, since a position alone leaves the user counting items. A namespace that is there but
    not a string is left out, not taken for ``default``: the error is about that very field."""
    meta = item.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    namespace = _namespace(meta) if spec.namespaced else None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        where = f" in namespace {namespace}" if namespace and "namespace" in meta else ""
        return f"{position} ({_KIND_OF_PLURAL[spec.plural]}{where})"
    if namespace is None:
        return f"{spec.plural}/{name}"
    return f"{spec.plural}/{namespace}/{name}"


def _namespace(meta: dict) -> Optional[str]:
    """The namespace ``meta`` gives its object (``default`` when it gives none), or None when
    ``metadata.namespace`` is not a string."""
    namespace = meta.get("namespace", "")
    if not isinstance(namespace, str):
        return None
    return namespace or "default"


# Each resource's kind, for an object an error names by its position: ``pods`` -> ``Pod``.
_KIND_OF_PLURAL = {spec.plural: kind for kind, spec in KINDS.items()}
