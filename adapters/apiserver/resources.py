"""The resources this fake API server serves, described once.

Routing, storage, list/watch and the write paths all need the same facts about a
resource: its group, version and plural (the URL), its kind (the body), whether it is
namespaced, whether it has a `status` subresource, which field selectors the real
server accepts for it, and whether an update may omit `metadata.resourceVersion`.
Keeping them in one table is what lets the rest stay generic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

# the CRD group of the scheduler-plugins coscheduling PodGroup
PODGROUP_GROUP = "scheduling.x-k8s.io"

# every resource accepts these field selectors
_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class Resource:
    """One REST resource, as the URL names it and as the store keeps it."""

    group: str  # "" for the core API
    version: str
    plural: str
    kind: str
    namespaced: bool
    # the store key; two URL resources can share one storage (core and events.k8s.io Events)
    storage: str = ""
    status_subresource: bool = False
    # metadata.generation is kept and bumped on spec changes
    generation: bool = False
    # PUT without metadata.resourceVersion is allowed (false for Leases and custom resources)
    unconditional_update: bool = True
    # a custom resource: no strategic merge patch, kind/apiVersion kept in list items
    custom: bool = False
    # DELETE answers with the deleted object rather than a Status
    delete_returns_object: bool = False
    field_labels: frozenset[str] = _META_FIELDS
    # field selector label -> path in the stored object, where they differ
    field_paths: dict[str, str] = field(default_factory=dict)
    # converters between the stored form and this resource's representation
    to_view: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    from_view: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def key(self) -> str:
        return self.storage or self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def view(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object as this resource presents it."""
        return self.to_view(obj) if self.to_view else obj

    def stored(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object in this resource's representation, in its stored form."""
        return self.from_view(obj) if self.from_view else obj


# --- events.k8s.io/v1 <-> core/v1 Event -------------------------------------------------

# events.k8s.io field name -> core v1 field name, for the fields that were renamed
_EVENTS_V1_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_RENAMES = {core: new for new, core in _EVENTS_V1_RENAMES.items()}


def _rename(obj: dict[str, Any], renames: dict[str, str], api_version: str) -> dict[str, Any]:
    out = {renames.get(k, k): v for k, v in obj.items()}
    out["apiVersion"] = api_version
    out["kind"] = "Event"
    return out


def event_to_events_v1(obj: dict[str, Any]) -> dict[str, Any]:
    return _rename(obj, _CORE_RENAMES, "events.k8s.io/v1")


def event_from_events_v1(obj: dict[str, Any]) -> dict[str, Any]:
    return _rename(obj, _EVENTS_V1_RENAMES, "v1")


# --- the table ---------------------------------------------------------------------------

_POD_FIELDS = _META_FIELDS | {
    "spec.nodeName",
    "spec.schedulerName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
_EVENT_FIELDS = _META_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}
_EVENTS_V1_FIELDS = _META_FIELDS | {
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
}

PODS = Resource(
    "", "v1", "pods", "Pod", True,
    status_subresource=True, delete_returns_object=True, field_labels=_POD_FIELDS,
)
NODES = Resource(
    "", "v1", "nodes", "Node", False,
    status_subresource=True, field_labels=_META_FIELDS | {"spec.unschedulable"},
)
NAMESPACES = Resource(
    "", "v1", "namespaces", "Namespace", False,
    status_subresource=True, field_labels=_META_FIELDS | {"status.phase"},
)
EVENTS = Resource(
    "", "v1", "events", "Event", True,
    field_labels=_EVENT_FIELDS, field_paths={"source": "source.component"},
)
EVENTS_V1 = Resource(
    "events.k8s.io", "v1", "events", "Event", True, storage="events",
    field_labels=_EVENTS_V1_FIELDS,
    field_paths={
        **{f"regarding.{f}": f"involvedObject.{f}" for f in
           ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
        "reportingController": "reportingComponent",
    },
    to_view=event_to_events_v1, from_view=event_from_events_v1,
)
PDBS = Resource(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
    status_subresource=True, generation=True,
)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True, unconditional_update=False)
PODGROUPS = Resource(
    PODGROUP_GROUP, "v1alpha1", "podgroups", "PodGroup", True,
    status_subresource=True, generation=True, unconditional_update=False, custom=True,
    delete_returns_object=True,
)

# Gangs as Kubernetes declares them (alpha APIs, served only with their feature gates) and as
# Volcano's CRD does. Three resources named `podgroups`: each has its own storage.
CORE_PODGROUPS = Resource(
    "scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True, storage="podgroups.scheduling.k8s.io",
    status_subresource=True, generation=True, delete_returns_object=True,
)
WORKLOADS = Resource(
    "scheduling.k8s.io", "v1alpha1", "workloads", "Workload", True, storage="workloads.scheduling.k8s.io",
    generation=True, delete_returns_object=True,
)
VOLCANO_PODGROUPS = Resource(
    "scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, storage="podgroups.scheduling.volcano.sh",
    status_subresource=True, generation=True, unconditional_update=False, custom=True, delete_returns_object=True,
)
# Kubernetes 1.37's: v1beta1 PodGroup and Workload, v1alpha3 CompositePodGroup. Served only when
# `gang_apis` names them (a 1.37 server); each version has its own storage here, where a real
# server stores one object and serves it in each version (tests create in the version served).
PODGROUPS_V1BETA1 = Resource(
    "scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", True, storage="podgroups.v1beta1.scheduling.k8s.io",
    status_subresource=True, generation=True, delete_returns_object=True,
)
WORKLOADS_V1BETA1 = Resource(
    "scheduling.k8s.io", "v1beta1", "workloads", "Workload", True, storage="workloads.v1beta1.scheduling.k8s.io",
    generation=True, delete_returns_object=True,
)
COMPOSITE_PODGROUPS = Resource(
    "scheduling.k8s.io", "v1alpha3", "compositepodgroups", "CompositePodGroup", True,
    storage="compositepodgroups.scheduling.k8s.io", status_subresource=True, generation=True,
    delete_returns_object=True,
)
# What `gang_apis` names each by (FakeApiServer): its group/version (two share scheduling.k8s.io/v1beta1).
GANG_APIS: dict[str, Resource] = {r.api_version: r for r in (CORE_PODGROUPS, WORKLOADS, VOLCANO_PODGROUPS,
                                                             COMPOSITE_PODGROUPS)}
GANG_APIS_EXTRA: dict[str, tuple[Resource, ...]] = {"scheduling.k8s.io/v1beta1": (PODGROUPS_V1BETA1, WORKLOADS_V1BETA1)}
# What a FakeApiServer serves unless told: the 1.36 shapes (and Volcano's).
DEFAULT_GANG_APIS: tuple[str, ...] = (CORE_PODGROUPS.api_version, WORKLOADS.api_version, VOLCANO_PODGROUPS.api_version)

# What the volume plugins read (the scheduler lists and watches them; PVs and claims have a status).
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True,
                status_subresource=True, field_labels=_META_FIELDS)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", False,
               status_subresource=True, field_labels=_META_FIELDS)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSI_NODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)

# Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes 1.34): a claim's status
# (allocation, reservedFor) is written through its status subresource, as the scheduler does.
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, generation=True)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, generation=True)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True,
                           status_subresource=True, generation=True)
RESOURCE_CLAIM_TEMPLATES = Resource("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True,
                                    generation=True)

BUILTIN: tuple[Resource, ...] = (PODS, NODES, NAMESPACES, EVENTS, EVENTS_V1, PDBS, PRIORITY_CLASSES, LEASES,
                                 PVCS, PVS, STORAGE_CLASSES, CSI_NODES,
                                 DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)


class Registry:
    """The resources one server instance serves, looked up by URL or by object."""

    def __init__(self, *, podgroups_crd: bool, gang_apis: Iterable[str] = ()) -> None:
        wanted = list(gang_apis)
        unknown = [api for api in wanted if api not in GANG_APIS and api not in GANG_APIS_EXTRA]
        if unknown:
            raise ValueError(f"unknown gang APIs {unknown}; known: {sorted({*GANG_APIS, *GANG_APIS_EXTRA})}")
        gangs = [r for api in wanted for r in ((GANG_APIS[api],) if api in GANG_APIS else GANG_APIS_EXTRA[api])]
        self.resources: tuple[Resource, ...] = BUILTIN + ((PODGROUPS,) if podgroups_crd else ()) + tuple(gangs)
        self._by_url = {(r.group, r.version, r.plural): r for r in self.resources}
        self._by_kind = {(r.api_version, r.kind): r for r in self.resources}

    def by_url(self, group: str, version: str, plural: str) -> Resource | None:
        return self._by_url.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> Resource | None:
        """The resource that stores objects of this apiVersion and kind."""
        return self._by_kind.get((api_version, kind))

    def groups(self) -> dict[str, list[str]]:
        """API group -> versions served, for discovery (core group as "")."""
        out: dict[str, list[str]] = {}
        for r in self.resources:
            versions = out.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)
        return out
