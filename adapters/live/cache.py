"""The scheduler's view of the cluster: watched objects, parsed once, plus its own assumptions.

kube-scheduler binds asynchronously, which is safe only because it first *assumes* each
decision in its cache: the pod is shown on its node at once, so the next decision already
counts its resources, long before the API server's answer and the watch event arrive. This
cache does the same for a whole window: `assume` puts a pod on a node; the assumption ends
when the watch shows the pod bound (confirmed) or deleted, or when the scheduler `forget`s
it because the bind failed. Victims whose eviction was asked for are shown as terminating,
so no later window counts their room twice or picks them as victims again.

`snapshot(window)` freezes the cache into a `models.ClusterSnapshot` for one decision. It
holds every pod that occupies a node (assumed ones on their node) and, of the pods waiting
for a node, only the window's: pods of other schedulers hold nothing, and our own pending
pods outside the window are decided in a later window (the solver and the validator then
agree on what the window is). The pods that hold nodes are kept as a snapshot shows them,
updated pod by pod as events and assumptions come (`_refresh`), with what a snapshot derives
from them (their positions, namespaces, Workload gangs), so a snapshot costs a copy of the
pods, not a pass over every pod, and nodes and the other objects that did not change are
handed over as the last snapshot had them; and it says which pods changed since the last one
(its `delta`), so the solver brings its own state up to date from those alone, as
kube-scheduler updates only the NodeInfos whose generation moved.

Kubernetes 1.37's group trees (CompositePodGroups and the PodGroups naming a parent) are kept
beside the gangs (`group_trees.py`) and resolved by the dump reader's own code: a snapshot holds
the trees a dump of the same objects gives, a tree it would refuse is left out whole (its pods
wait: `group_problem`), and the queue is told which gangs share a tree. A PodGroup's own
`priorityClassName` is resolved the same way (one naming no parent is a tree of one), and the
device claims a PodGroup owns are shared by its members as a dump's are (`_shown`).

Watch events enter through `replace` (a full list) and `apply` (one event). Each object is
parsed once, by `convert.parse_object`; one that does not parse is left out and logged with
its object and field named. Listeners (the queue's event handlers) are told about every
change, under the cache lock, so that what they see and what a snapshot shows never disagree.
"""

from __future__ import annotations

import logging
import marshal
import math
import sys
import threading
import weakref
from bisect import insort
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Optional, Protocol, cast

from pydantic import BaseModel

from models import ClusterSnapshot, InputError, Namespace, Node, Pod, PodDisruptionBudget, PodGroup, PriorityClass
from models.dra import ResourceClaim
from models.group_claims import group_claims, share_group_claims
from models.objects import DISRUPTION_TARGET, READY, copy_with
from models.snapshot import PodPositions, SnapshotDelta, asks_beyond_cpu_and_memory, pod_group_key, resolve_pod
from models.group_api import WorkloadTemplates
from models.group_tree import COMPOSITES, PODGROUPS as TREE_PODGROUPS
from models.workloads import CorePodGroup, Workload, workload_pod_groups

from adapters.gang_api import as_parser_input

from .convert import parse_object
from .dra_writes import ClaimOverlay
from .api_client import (COMPOSITE_PODGROUPS, CORE_PODGROUPS, CSI_NODES, DEVICE_CLASSES, DRA_RESOURCES, GANG_RESOURCES,
                         NAMESPACES, NEWEST_SERVED, NODES, PDBS, PODS, PRIORITY_CLASSES, PVCS, PVS, RESOURCE_CLAIMS,
                         RESOURCE_SLICES, STORAGE_CLASSES, VOLUME_RESOURCES, WATCHED, WORKLOADS, Resource)
from .group_trees import GroupTrees, Resolved

log = logging.getLogger(__name__)

# The resource a refused tree's object is kept in `invalid` under, by how `group_trees` names it.
_TREE_RESOURCES = {TREE_PODGROUPS: CORE_PODGROUPS.name, COMPOSITES: COMPOSITE_PODGROUPS.name}

# Assumption states: a bind is being sent; the API server said yes and the watch has not shown
# it yet; the pod waits for its victims to leave; the outcome of a bind is unknown (the answer
# was lost and the pod could not be read back); a dry run's decision, kept to the end.
BINDING, BOUND, AWAITING_VICTIMS, UNCERTAIN, DRY_RUN = "binding", "bound", "awaiting-victims", "uncertain", "dry-run"


class CacheListener(Protocol):
    def pod_added(self, pod: Pod) -> None: ...
    def pod_updated(self, old: Pod, new: Pod) -> None: ...
    def pod_deleted(self, pod: Pod) -> None: ...
    def node_changed(self, old: Optional[Node], new: Optional[Node]) -> None: ...
    def pod_group_changed(self, group: PodGroup) -> None: ...
    def workload_changed(self, workload: Workload) -> None: ...
    def group_tree_changed(self, gangs: frozenset[str]) -> None: ...
    def pdb_changed(self, old: Optional[PodDisruptionBudget], new: Optional[PodDisruptionBudget]) -> None: ...
    def namespace_changed(self, old: Optional[Namespace], new: Optional[Namespace]) -> None: ...
    def volumes_changed(self, kind: str) -> None: ...
    def devices_changed(self, kind: str) -> None: ...


@dataclass
class Assumption:
    pod: Pod  # the watched pod with spec.nodeName set to `node`
    node: str
    state: str
    since: float
    expires: Optional[float] = None  # for UNCERTAIN: when to stop believing it may be bound


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def model_key(resource: Resource, model: BaseModel) -> str:
    meta = model.metadata  # type: ignore[attr-defined]
    if resource in (PODS, PDBS, PVCS, RESOURCE_CLAIMS, *GANG_RESOURCES, COMPOSITE_PODGROUPS):
        return f"{meta.namespace or 'default'}/{meta.name}"
    return str(meta.name)


def _version_read(resource: Resource, obj: dict[str, Any]) -> str:
    """The apiVersion `obj` is parsed as: its own for a kind listed in the version the server
    serves (a 1.37 Workload of templates is not 1.35's), else the resource's (which tells
    Kubernetes' PodGroup from scheduler-plugins' whatever the object says)."""
    own = obj.get("apiVersion")
    if resource in NEWEST_SERVED and isinstance(own, str) and own.startswith(resource.group + "/"):
        return own
    return resource.api_version


def node_relevant(node: Node) -> tuple:
    """What about a node can change a scheduling decision (not its heartbeat or conditions)."""
    return (node.metadata.labels, node.spec, node.allocatable, node.status.images)


def node_feasibility(node: Node) -> tuple:
    """What about a node decides whether a pod may go there (not its images: they only score)."""
    return (node.metadata.uid, node.metadata.labels, node.spec, node.allocatable)


def _namespace_view(obj: dict[str, Any]) -> dict[str, Any]:
    """What a snapshot reads of a Namespace: its name and labels (a namespace's annotations can
    be large, a kubectl last-applied-configuration, and nothing reads them)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj  # the parser names what is wrong
    kept = {k: meta[k] for k in ("name", "uid", "resourceVersion", "labels") if k in meta}
    return {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Namespace"), "metadata": kept}


def _same_node(old: Node, new: Node) -> bool:
    """Nothing a decision reads of the node changed (its status heartbeat, its
    resourceVersion): the scheduler keeps the object it had."""
    return old.metadata.uid == new.metadata.uid and node_relevant(old) == node_relevant(new)


def _workload_ref(pod: Pod) -> Optional[tuple[str, str, str, str]]:
    """The Workload gang ``pod`` names: (namespace, workload, pod group, replica key)."""
    ref = pod.spec.workload_ref
    return None if ref is None else (pod.metadata.namespace, ref.name, ref.pod_group, ref.pod_group_replica_key)


def _extended_claim(pod: Pod) -> Optional[str]:
    """The key of the claim made for ``pod``'s extended resources, as its status names it."""
    status = pod.status.extended_resource_claim_status
    return f"{pod.metadata.namespace}/{status.resource_claim_name}" if status is not None and status.resource_claim_name else None


def _terminating(pod: Pod) -> Pod:
    """The pod as it will look once its eviction is under way (a deletionTimestamp set)."""
    meta = copy_with(pod.metadata, {"deletion_timestamp": datetime.now(timezone.utc)})
    return copy_with(pod, {"metadata": meta})


def _on_node(pod: Pod, node: str) -> Pod:
    return copy_with(pod, {"spec": copy_with(pod.spec, {"node_name": node})})


# Our own bind's watch echo: the pod as it was, plus spec.nodeName, a new resourceVersion, the
# managedFields of the write, the PodScheduled condition (the model keeps no condition but
# DisruptionTarget and Ready) and, since Kubernetes 1.33 (PodTopologyLabels admission), the node's
# topology.kubernetes.io/ labels. Parsing it again is ~5% of the process's interpreter time at a
# steady 100 pods/s; instead the echo is compared with the unbound object it follows, all but
# those fields, and the model kept is reused with the node, resourceVersion and labels put in.
_ECHO_META = frozenset({"resourceVersion", "managedFields", "labels"})
_TOPOLOGY_LABELS = "topology.kubernetes.io/"
_READ_CONDITIONS = (DISRUPTION_TARGET, READY)


def _echo_print(obj: dict[str, Any]) -> Optional[bytes]:
    """Equal bytes for two versions of a pod that differ only where a bind changes it (None:
    it cannot be encoded, or holds a DisruptionTarget or Ready condition, which the model reads)."""
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status") or {}
    if not (isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)):
        return None
    conditions = status.get("conditions") or []
    if not isinstance(conditions, list) or any(not isinstance(c, dict) or c.get("type") in _READ_CONDITIONS
                                               for c in conditions):
        return None
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return None
    try:  # version 2: no back-references, so the bytes depend on the values alone, not on which
        # strings are interned or shared (a parsed object's are shared with its model)
        return marshal.dumps(([(k, v) for k, v in meta.items() if k not in _ECHO_META],
                              [(k, v) for k, v in labels.items() if not str(k).startswith(_TOPOLOGY_LABELS)],
                              [(k, v) for k, v in spec.items() if k != "nodeName"],
                              [(k, v) for k, v in status.items() if k != "conditions"],
                              [(k, v) for k, v in obj.items() if k not in ("metadata", "spec", "status")]), 2)
    except ValueError:
        return None


# Changes (pods taken out of or put in the holding pods) a snapshot's `PodPositions` may carry
# before every holding pod is indexed again, at the least (`ClusterCache._positions`).
REINDEX_AFTER = 32


class ClusterCache:
    def __init__(self, *, listener: Optional[CacheListener] = None) -> None:
        self.lock = threading.RLock()
        self.listener = listener
        self._objects: dict[Resource, dict[str, BaseModel]] = {r: {} for r in WATCHED}
        # Each unbound pod's `_echo_print`, to know our own bind's watch echo (`_bound_echo`).
        self._prints: dict[str, bytes] = {}
        self.echoes_reused = 0  # bind echoes taken without parsing (what the tests check)
        # The status conditions of each scheduling.k8s.io/v1alpha2 PodGroup, as the watch last
        # showed them: a merge patch replaces the whole list, so the scheduler's own condition is
        # written with the others kept (`core_group_conditions`).
        self._conditions: dict[str, list[dict[str, Any]]] = {}
        self._synced: set[Resource] = set()
        self._assumed: dict[str, Assumption] = {}
        self._evicting: dict[str, Pod] = {}  # victim key -> its terminating look
        # objects that failed to parse, with the error (reported once per change)
        self.invalid: dict[tuple[str, str], str] = {}
        self.changed = threading.Condition(self.lock)
        # Every pod that holds a node as a snapshot shows it: assumed ones on their node, victims
        # being evicted as terminating, priority and preemption policy resolved from its class.
        # `_refresh` keeps it current on every change to a pod, an assumption or an eviction
        # mark; a pod that changes moves to the end, so the pods a snapshot did not see change
        # keep their order, ahead of those it did. `_sources`: what each was made from.
        self._holding: dict[str, Pod] = {}
        self._sources: dict[str, Pod] = {}
        # Where each holding pod stands, for a snapshot's `PodPositions`: its index when they
        # were last indexed all together (`_positions`) and their keys in that order, the base
        # indexes of those taken out since (sorted), and those put in since (at the end), in order.
        self._base: dict[str, int] = {}
        self._base_keys: tuple[str, ...] = ()
        self._gaps: list[int] = []
        self._tail: dict[str, None] = {}
        self._unresolved: dict[str, InputError] = {}  # holding pods whose priority class is unknown
        # Pending pods (any scheduler's, not assumed) with a status.nominatedNodeName: a snapshot
        # carries those outside its window, whose room the decision must leave them
        # (the PostFilter's nominations). Kept current by `_refresh`.
        self._nominated: dict[str, Pod] = {}
        self._namespaces: Counter[str] = Counter()  # of the holding pods
        self._workload_refs: Counter[tuple[str, str, str, str]] = Counter()  # of the holding pods (`_workload_ref`)
        self._asking_beyond: set[str] = set()  # holding pods asking for more than cpu and memory (DRA extended resources)
        self._classes: dict[str, PriorityClass] = {}
        self._classes_changed = False  # since `_resolve_all`: the next snapshot resolves every pod again
        # The last snapshot and the keys of the pods it showed besides the holding ones (its
        # window's, the nominated), and the holding pods changed since it.
        self._last: Optional[tuple[weakref.ReferenceType[ClusterSnapshot], frozenset[str]]] = None
        self._changed: set[str] = set()
        # Each resource's objects as the last snapshot had them, with the count of changes to
        # the resource they were taken at: a snapshot takes the same tuple (and, for nodes, the
        # same dict by name) while nothing changed, instead of copying every node again.
        self._changes: Counter[str] = Counter()  # by the resource's name (hashed faster than a Resource)
        self._taken: dict[str, tuple[int, tuple[Any, ...], dict[str, Any]]] = {}
        # What decides how a snapshot shows a pod asking for an extended resource a DeviceClass
        # backs (`ClusterSnapshot.build`'s rewrite): the classes and the nodes (their change
        # counts when the last snapshot was taken), and the claim its status names (the holding
        # pods by that claim's key; the claims come or gone since the last snapshot). When they
        # moved, such a pod may read otherwise with no change of its own: the delta names it.
        self._rewrites_at: tuple[int, int] = (0, 0)
        self._by_extended_claim: dict[str, set[str]] = {}
        self._claims_moved: set[str] = set()
        # Claims a window allocated whose status.allocation the watch does not show yet
        # (``dra_writes.ClaimOverlay``): a snapshot shows them allocated, so no later window
        # hands their devices out again before the PreBind write is seen.
        self.claims = ClaimOverlay()
        # Kubernetes 1.37's group trees: the CompositePodGroups and the PodGroups naming a parent
        # (``group_trees.py``), and the refusals of trees last logged (kept in `invalid` too).
        self.trees = GroupTrees()
        self._trees_refused: dict[tuple[str, str], str] = {}
        # CompositePodGroups changed by the batch of events being applied, and gangs to try again
        # once it is in (`_trees_settled`): those of their trees before it, and those of refused
        # trees when a Workload or PriorityClass changed (what they lacked may have come).
        self._trees_touched: set[str] = set()
        self._trees_retry: set[str] = set()
        # The device claims PodGroups own (1.37, ``spec.resourceClaims``) by (group key, entry):
        # the group's entry and the claim its status names, which its members' matching entries
        # are pointed at (``models.group_claims``, as a dump's reader does). A group whose
        # claim the resourceclaim controller has not made yet shares none: its members' entries
        # name the template, and they wait for the claim as any pod's from a template does
        # (``claims_from_templates`` is false here; ``dra_writes.py``).
        self._shared_claims: dict[tuple[str, str], tuple[Any, str]] = {}

    # --- feeding from list and watch -----------------------------------------------------------

    def replace(self, resource: Resource, objects: Iterable[dict[str, Any]]) -> None:
        """The result of a full list: objects absent from it are deleted, the rest applied."""
        parsed = [(object_key(obj), self._parse(resource, obj), obj) for obj in objects]  # outside the lock
        with self.lock:
            for key, model, obj in parsed:
                self._store(resource, key, model, obj)
            seen = {key for key, _, _ in parsed}
            for key in [k for k in self._objects[resource] if k not in seen]:
                self._delete(resource, key)
            self._synced.add(resource)
            self._trees_settled()
            self.changed.notify_all()

    def apply(self, resource: Resource, event_type: str, obj: dict[str, Any], *, newer_only: bool = False) -> None:
        """One watch event (ADDED, MODIFIED or DELETED) for `resource`.

        The object is parsed before the lock is taken, so a snapshot never waits for parsing.
        `newer_only`: ignore it unless its resourceVersion is newer than the cached one (an
        object read directly may race with the watch)."""
        key = object_key(obj)
        if event_type == "DELETED":
            with self.lock:
                self.invalid.pop((resource.name, key), None)
                self._delete(resource, key)
                self._trees_settled()
                self.changed.notify_all()
            return
        echo = self._bound_echo(key, obj) if resource is PODS and event_type == "MODIFIED" else None
        model = echo[1] if echo is not None else self._parse(resource, obj)
        with self.lock:
            if newer_only and not self._is_newer(resource, key, obj):
                return
            if echo is not None and self._objects[PODS].get(key) is not echo[0]:
                model = self._parse(resource, obj)  # the pod changed meanwhile: the echo is not of it
            self._store(resource, key, model, obj)
            self._trees_settled()
            self.changed.notify_all()

    def _bound_echo(self, key: str, obj: dict[str, Any]) -> Optional[tuple[Pod, Pod]]:
        """(the pod kept, the model of ``obj``) when ``obj`` is the watch's echo of our own bind:
        the pod is assumed (binding or bound) on the very node ``obj`` names, and ``obj`` is the
        unbound object kept but for what a bind changes (`_echo_print`). None: parse it."""
        spec = obj.get("spec")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if not node or not isinstance(node, str):
            return None
        with self.lock:
            assumption = self._assumed.get(key)
            old: Optional[Pod] = self._objects[PODS].get(key)  # type: ignore[assignment]
            printed = self._prints.get(key)
        if (assumption is None or assumption.node != node or assumption.state not in (BINDING, BOUND) or old is None
                or printed is None or old.spec.node_name or _echo_print(obj) != printed):
            return None
        version, labels = obj["metadata"].get("resourceVersion"), obj["metadata"].get("labels") or {}
        if not isinstance(version, str) or not all(type(k) is str and type(v) is str for k, v in labels.items()):
            return None
        update: dict[str, Any] = {"resource_version": version}
        if labels != old.metadata.labels:  # the node's topology labels, as the API server adds them
            update["labels"] = {sys.intern(k): sys.intern(v) for k, v in labels.items()}
        meta = copy_with(old.metadata, update)
        self.echoes_reused += 1
        return old, copy_with(old, {"metadata": meta, "spec": copy_with(old.spec, {"node_name": node})})

    def _parse(self, resource: Resource, obj: dict[str, Any]) -> Any:
        """The model, or the InputError that says why there is none."""
        readable = _namespace_view(obj) if resource is NAMESPACES else as_parser_input(obj)
        if readable is None:
            return InputError(f"{resource.name}/{object_key(obj)}", "spec", "no pod group template at any level")
        try:
            return parse_object(readable, resource.kind, _version_read(resource, readable))
        except InputError as exc:
            return exc

    def _store(self, resource: Resource, key: str, model: Any, obj: dict[str, Any]) -> None:
        if isinstance(model, InputError):
            if self.invalid.get((resource.name, key)) != str(model):
                log.warning("ignoring %s from the API server: %s", resource.name, model)
            self.invalid[(resource.name, key)] = str(model)
            self._delete(resource, key)
            return
        self.invalid.pop((resource.name, key), None)
        if isinstance(model, CorePodGroup):  # the one gang model, converted as a snapshot file's is
            self.trees.put_group(key, model)
            self._share_claims(key, model)
            model = model.pod_group()
        elif resource is COMPOSITE_PODGROUPS:
            self._put_composite(key, model)
        store = self._objects[resource]
        old = store.get(key)
        if resource is NODES and old is not None and _same_node(old, model):  # type: ignore[arg-type]
            return  # a heartbeat: the node kept as it was, so the solver's view of it stays
        if resource is NAMESPACES and old is not None and old.metadata.labels == model.metadata.labels:  # type: ignore[attr-defined]
            return  # its status or annotations: the snapshot's namespace labels stay as they were
        store[key] = model
        self._changes[resource.name] += 1
        if resource is RESOURCE_CLAIMS and old is None:
            self._claims_moved.add(key)
        if resource is PODS:
            printed = _echo_print(obj) if not model.spec.node_name else None  # type: ignore[attr-defined]
            if printed is not None:
                self._prints[key] = printed
            else:
                self._prints.pop(key, None)
            self._reconcile_assumption(model)
            self._refresh(key)
        elif resource is PRIORITY_CLASSES:
            self._classes_changed = True
        if resource is WORKLOADS or resource is PRIORITY_CLASSES:
            self._trees_retry |= self.trees.refused_gangs  # a template or class a refused tree lacked may be here now
        if resource is CORE_PODGROUPS:
            conditions = (obj.get("status") or {}).get("conditions")
            self._conditions[key] = [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []
        self._notify(resource, old, model)

    def _is_newer(self, resource: Resource, key: str, obj: dict[str, Any]) -> bool:
        current = self._objects[resource].get(key)
        if current is None:
            return True
        new_rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        old_rv = current.metadata.resource_version  # type: ignore[attr-defined]
        return not (new_rv.isdigit() and old_rv.isdigit()) or int(new_rv) > int(old_rv)

    def mark_synced(self, resource: Resource) -> None:
        """A resource that cannot be listed but need not be (an absent CRD) counts as synced."""
        with self.lock:
            self._synced.add(resource)

    def _delete(self, resource: Resource, key: str) -> None:
        old = self._objects[resource].pop(key, None)
        if old is None:
            return
        self._changes[resource.name] += 1
        if resource is RESOURCE_CLAIMS:
            self._claims_moved.add(key)
        if resource is PRIORITY_CLASSES:
            self._classes_changed = True
        if resource is CORE_PODGROUPS:
            self._conditions.pop(key, None)
            self.trees.put_group(key, None)
            self._share_claims(key, None)
        if resource is COMPOSITE_PODGROUPS:
            self._put_composite(key, None)
        if resource is PODS:
            self._prints.pop(key, None)
            self._assumed.pop(key, None)
            self.claims.forget(key)
            self._evicting.pop(key, None)
            self._refresh(key)
            if self.listener:
                self.listener.pod_deleted(old)  # type: ignore[arg-type]
        elif resource is NODES and self.listener:
            self.listener.node_changed(old, None)  # type: ignore[arg-type]
        elif resource is PDBS and self.listener:
            self.listener.pdb_changed(old, None)  # type: ignore[arg-type]
        elif resource is NAMESPACES and self.listener:
            self.listener.namespace_changed(old, None)  # type: ignore[arg-type]
        elif resource in VOLUME_RESOURCES and self.listener:
            self.listener.volumes_changed(resource.kind)
        elif resource in DRA_RESOURCES:
            if resource is RESOURCE_CLAIMS:
                self.claims.seen(key, None)
            if self.listener:
                self.listener.devices_changed(resource.kind)

    def _notify(self, resource: Resource, old: Optional[BaseModel], new: BaseModel) -> None:
        if resource is PODS:
            pod: Pod = new  # type: ignore[assignment]
            if self.listener:
                if old is None:
                    self.listener.pod_added(pod)
                else:
                    self.listener.pod_updated(old, pod)  # type: ignore[arg-type]
        elif resource is NODES and self.listener:
            self.listener.node_changed(old, new)  # type: ignore[arg-type]
        elif resource is WORKLOADS and self.listener:
            self.listener.workload_changed(new)  # type: ignore[arg-type]
        elif resource in GANG_RESOURCES and self.listener:
            self.listener.pod_group_changed(new)  # type: ignore[arg-type]
        elif resource is PDBS and self.listener:
            self.listener.pdb_changed(old, new)  # type: ignore[arg-type]
        elif resource is NAMESPACES and self.listener:
            self.listener.namespace_changed(old, new)  # type: ignore[arg-type]
        elif resource in VOLUME_RESOURCES and self.listener:
            self.listener.volumes_changed(resource.kind)
        elif resource in DRA_RESOURCES:
            if resource is RESOURCE_CLAIMS:
                claim = cast(ResourceClaim, new)
                self.claims.seen(f"{claim.metadata.namespace}/{claim.metadata.name}", claim, self._pod_uid)
            if self.listener:
                self.listener.devices_changed(resource.kind)

    def _share_claims(self, key: str, group: Optional[CorePodGroup]) -> None:
        """Under the lock: PodGroup `key`'s shared claims are now `group`'s (None: gone). When
        they changed (the controller made the group's claim, the group went), its holding pods
        are shown again and named in the next snapshot's delta."""
        shared, _ = group_claims([group] if group is not None else [], {}, {})  # no templates: none made here
        old = {entry: found for entry, found in self._shared_claims.items() if entry[0] == key}
        if shared == old:
            return
        for entry in old:
            del self._shared_claims[entry]
        self._shared_claims.update(shared)
        for pod_key, source in self._sources.items():
            if source.spec.resource_claims and pod_group_key(source) == key:
                self._holding[pod_key] = self._resolve(pod_key, source)
                self._changed.add(pod_key)

    def _shown(self, pod: Pod) -> Pod:
        """`pod` as a snapshot shows it: its priority resolved from its class (`InputError` if
        it cannot be) and its entries of its group's claims pointed at them."""
        pod = resolve_pod(pod, self._classes)
        if self._shared_claims and pod.spec.resource_claims:
            pod = share_group_claims([pod], self._shared_claims, pod_group_key)[0]
        return pod

    def _put_composite(self, key: str, composite: Any) -> None:
        """CompositePodGroup `key` is now `composite` (None: gone)."""
        self._trees_retry |= self.trees.gangs_with(key)  # as indexed before this batch
        self.trees.put_composite(key, composite)
        self._trees_touched.add(key)

    def _trees_settled(self) -> None:
        """Under the lock, once a batch of events is in: the trees indexed again, and the gangs
        of every tree a CompositePodGroup of the batch was or is in decided again (one created
        after its pods lets them be tried at last)."""
        self.trees.index()
        if not (self._trees_touched or self._trees_retry):
            return
        gangs = frozenset(self._trees_retry.union(*map(self.trees.gangs_with, self._trees_touched)))
        self._trees_touched, self._trees_retry = set(), set()
        if gangs and self.listener:
            self.listener.group_tree_changed(gangs)

    def _pod_uid(self, key: str) -> str:
        pod: Optional[Pod] = self._objects[PODS].get(key)  # type: ignore[assignment]
        return (pod.metadata.uid or "") if pod is not None else ""

    def _reconcile_assumption(self, pod: Pod) -> None:
        """A watched pod that has a node ends its assumption; one still unbound refreshes it."""
        key = pod.key
        assumption = self._assumed.get(key)
        if key in self._evicting:  # the victim as it is now: labels changed meanwhile count (affinity, spread)
            self._evicting[key] = pod if pod.is_terminating else _terminating(pod)
        if assumption is None:
            return
        if pod.spec.node_name:
            if pod.spec.node_name != assumption.node:
                log.warning("pod %s was assumed on %s but is bound to %s", key, assumption.node, pod.spec.node_name)
            del self._assumed[key]
        elif pod.is_terminating:
            del self._assumed[key]
        else:
            assumption.pod = _on_node(pod, assumption.node)

    def _refresh(self, key: str) -> None:
        """Under the lock: make `_holding[key]` what a snapshot shows of pod `key` now."""
        pod: Optional[Pod] = self._objects[PODS].get(key)  # type: ignore[assignment]
        assumption = self._assumed.get(key)
        if (pod is not None and assumption is None and pod.status.nominated_node_name and not pod.spec.node_name
                and not pod.is_terminating and not pod.is_terminal):
            self._nominated[key] = pod
        else:
            self._nominated.pop(key, None)
        view: Optional[Pod] = None
        if assumption is not None:
            view = assumption.pod
        elif pod is not None and pod.spec.node_name:
            view = self._evicting.get(key) or pod
        source = self._sources.get(key)
        if source is view:
            return
        self._changed.add(key)
        if source is not None:
            del self._sources[key]
            held = self._holding.pop(key)
            if key in self._tail:
                del self._tail[key]
            else:
                insort(self._gaps, self._base[key])
            namespace = held.metadata.namespace
            self._namespaces[namespace] -= 1
            if not self._namespaces[namespace]:
                del self._namespaces[namespace]
            ref = _workload_ref(held)
            if ref is not None:
                self._workload_refs[ref] -= 1
                if not self._workload_refs[ref]:
                    del self._workload_refs[ref]
            self._asking_beyond.discard(key)
            claim = _extended_claim(held)
            if claim is not None:
                named = self._by_extended_claim[claim]
                named.discard(key)
                if not named:
                    del self._by_extended_claim[claim]
            self._unresolved.pop(key, None)
        if view is None:
            return
        self._sources[key] = view
        self._holding[key] = self._resolve(key, view)
        self._tail[key] = None
        self._namespaces[view.metadata.namespace] += 1
        ref = _workload_ref(view)
        if ref is not None:
            self._workload_refs[ref] += 1
        if asks_beyond_cpu_and_memory(view):
            self._asking_beyond.add(key)
        claim = _extended_claim(view)
        if claim is not None:
            self._by_extended_claim.setdefault(claim, set()).add(key)

    def _resolve(self, key: str, pod: Pod) -> Pod:
        """Under the lock: `pod` resolved against the priority classes (as it is, if it cannot
        be: every snapshot then says why, naming the pod, until it can)."""
        try:
            return self._shown(pod)
        except InputError as exc:
            self._unresolved[key] = exc
            return pod

    def _resolve_all(self) -> None:
        """Under the lock, for a snapshot: the priority classes changed (a relist changes them
        one by one, so this waits for the snapshot); every holding pod is resolved again. The
        snapshot says nothing of what changed (its delta would name every pod)."""
        self._classes = {c.metadata.name: c for c in self._objects[PRIORITY_CLASSES].values()
                         if isinstance(c, PriorityClass)}  # all are: the store holds each resource's own model
        self._classes_changed = False
        self._unresolved = {}
        self._holding = {key: self._resolve(key, source) for key, source in self._sources.items()}
        self._last = None

    def _positions(self, extra: list[str]) -> PodPositions:
        """Under the lock, for a snapshot: the holding pods' positions, then ``extra``'s after
        them. Every snapshot copies the gaps and indexes the tail; every pod is indexed again
        once they together outgrow a small multiple of the square root of the pods' count, which
        keeps both that and each snapshot's share small (a few microseconds at 3,000 pods)."""
        if len(self._gaps) + len(self._tail) > max(REINDEX_AFTER, 3 * math.isqrt(len(self._holding))):
            self._base_keys = tuple(self._holding)
            self._base = dict(zip(self._base_keys, range(len(self._base_keys))))
            self._gaps, self._tail = [], {}
        placed = len(self._base) - len(self._gaps)
        after = [*self._tail, *extra]
        return PodPositions(self._base, self._base_keys, tuple(self._gaps),
                            dict(zip(after, range(placed, placed + len(after)))))

    def _taken_values(self, resource: Resource) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Under the lock: ``resource``'s objects as a tuple and by name (store key), the last
        snapshot's own while the resource did not change."""
        changes = self._changes[resource.name]
        taken = self._taken.get(resource.name)
        if taken is None or taken[0] != changes:
            store = self._objects[resource]
            values = tuple(store.values())
            taken = self._taken[resource.name] = (changes, values, dict(zip(store, values)))
        return taken[1], taken[2]

    # --- reading -------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        with self.lock:
            return len(self._synced) == len(self._objects)

    def pod(self, key: str) -> Optional[Pod]:
        with self.lock:
            return self._objects[PODS].get(key)  # type: ignore[return-value]

    def nominated_below(self, node: str, priority: int, scheduler_name: str) -> list[Pod]:
        """Pending pods of `scheduler_name` nominated to `node` with a priority below `priority`
        (those whose priority class is unknown left out)."""
        with self.lock:
            out = []
            for pod in self._nominated.values():
                if pod.status.nominated_node_name != node or pod.spec.scheduler_name != scheduler_name:
                    continue
                try:
                    resolved = resolve_pod(pod, self._classes)
                except InputError:
                    continue
                if (resolved.spec.priority or 0) < priority:
                    out.append(pod)
            return out

    def pods(self) -> list[Pod]:
        with self.lock:
            return list(self._objects[PODS].values())  # type: ignore[arg-type]

    def has_node(self, name: str) -> bool:
        with self.lock:
            return name in self._objects[NODES]

    def node(self, name: str) -> Optional[Node]:
        with self.lock:
            return self._objects[NODES].get(name)  # type: ignore[return-value]

    def node_count(self) -> int:
        with self.lock:
            return len(self._objects[NODES])

    def pod_group(self, key: str) -> Optional[PodGroup]:
        """The PodGroup of gang `key` among the PodGroup shapes (not a Workload's groups)."""
        with self.lock:
            for resource in GANG_RESOURCES:
                if resource is not WORKLOADS and key in self._objects[resource]:
                    return self._objects[resource][key]  # type: ignore[return-value]
            return None

    def core_group_conditions(self, key: str) -> Optional[tuple[str, list[dict[str, Any]]]]:
        """The UID and status conditions of the scheduling.k8s.io/v1alpha2 PodGroup `key`
        (namespace/name) that gang `key` stands for; None when the gang is of another shape (or gone)."""
        with self.lock:
            group = self._objects[CORE_PODGROUPS].get(key)
            if group is None or self._shadowed(key, CORE_PODGROUPS):
                return None
            return group.metadata.uid or "", list(self._conditions.get(key, ()))  # type: ignore[attr-defined]

    def _shadowed(self, key: str, resource: Resource) -> bool:
        """Under the lock: gang `key` is also a PodGroup of a shape listed before `resource`."""
        for earlier in GANG_RESOURCES[:GANG_RESOURCES.index(resource)]:
            if earlier is not WORKLOADS and key in self._objects[earlier]:
                return True
        return False

    def _pod_groups(self, pending: Iterable[Pod], trees: Optional[Resolved]) -> list[PodGroup]:
        """Under the lock: every gang of a snapshot, in one model. Two PodGroups of different
        shapes with one namespace/name would be one gang key: the first shape in `GANG_RESOURCES`
        is kept (and the clash logged), so one stray object cannot stop every window. A
        Workload's gangs are those its pods name (each replica key its own), as for a file: the
        holding pods' as `_refresh` counts them, and those of the snapshot's ``pending`` pods. A
        PodGroup of a group tree is as ``trees`` resolved it, and left out if its tree was refused."""
        groups: dict[str, PodGroup] = {}
        for resource in GANG_RESOURCES:
            if resource is WORKLOADS:
                continue
            for key, group in self._objects[resource].items():
                if key in groups:
                    if (resource.name, key) not in self.invalid:
                        log.warning("ignoring %s %s: a PodGroup of another API has the same name", resource.name, key)
                        self.invalid[(resource.name, key)] = "same name as a PodGroup of another API"
                    continue
                groups[key] = group  # type: ignore[assignment]
        if trees is not None:  # a refused tree's PodGroups are left out (their pods wait: `group_problem`)
            core = self._objects[CORE_PODGROUPS]  # (a PodGroup of another API by the same name is kept)
            for key in trees.problems:
                if key in core and groups.get(key) is core[key]:
                    del groups[key]
            for key, group in trees.groups.items():
                if key in core and groups.get(key) is core[key]:
                    groups[key] = group
        workloads = [w for w in self._objects[WORKLOADS].values() if isinstance(w, Workload)]  # 1.35's, not templates
        if workloads:
            refs = set(self._workload_refs)
            refs.update(ref for p in pending if (ref := _workload_ref(p)) is not None)
            for group in workload_pod_groups(workloads, refs):
                groups.setdefault(group.key, group)
        return list(groups.values())

    def _resolved_trees(self) -> Optional[Resolved]:
        """Under the lock: the group trees resolved as a dump's are (None without any), each
        refused tree logged once per change and kept in `invalid` while it stays refused."""
        if not self.trees:
            self._forget_refused({})
            return None
        stamp = (self._changes[WORKLOADS.name], self._changes[PRIORITY_CLASSES.name])
        resolved = self.trees.resolve(
            stamp, lambda: [w for w in self._objects[WORKLOADS].values() if isinstance(w, WorkloadTemplates)],
            lambda: {c.metadata.name: c for c in self._objects[PRIORITY_CLASSES].values() if isinstance(c, PriorityClass)})
        refused = {(_TREE_RESOURCES[kind], key): problem for (kind, key), problem in resolved.invalid.items()}
        for entry, problem in refused.items():
            if self.invalid.get(entry) != problem:
                log.warning("ignoring the group tree of %s/%s from the API server: %s", *entry, problem)
                self.invalid[entry] = problem
        self._forget_refused(refused)
        return resolved

    def _forget_refused(self, refused: dict[tuple[str, str], str]) -> None:
        """Under the lock: the trees refused before and not now leave `invalid`."""
        for entry, problem in self._trees_refused.items():
            if entry not in refused and self.invalid.get(entry) == problem:
                del self.invalid[entry]
        self._trees_refused = refused

    def group_problem(self, gang: str) -> Optional[str]:
        """Why the pods of gang `gang` must wait for its group tree to be fixed; None if they need not."""
        with self.lock:
            trees = self._resolved_trees()
            return trees.problems.get(gang) if trees is not None else None

    def snapshot(self, window: Iterable[str] = ()) -> ClusterSnapshot:
        """Everything one decision reads: nodes, pods holding nodes (assumed ones included),
        the window's pending pods, PDBs, priority classes and pod groups. A pod whose priority
        class is unknown makes it an `InputError` naming the pod."""
        with self.lock:
            if self._classes_changed:
                self._resolve_all()
            objects = self._objects[PODS]
            waiting = [(key, pod) for key in dict.fromkeys(window)
                       if (pod := objects.get(key)) is not None and key not in self._holding]
            if self._unresolved:
                raise next(iter(self._unresolved.values()))
            pending = [self._shown(pod) for _, pod in waiting]  # type: ignore[arg-type]
            extra = [key for key, _ in waiting]
            # Pods nominated to a node and not decided now keep their room there; one whose
            # priority class is unknown cannot be weighed and is left out.
            window_keys = frozenset(extra)
            nominated = [key for key in self._nominated if key in window_keys]
            for key, pod in self._nominated.items():
                if key in window_keys:
                    continue
                try:
                    pending.append(self._shown(pod))
                except InputError:
                    continue
                extra.append(key)
                nominated.append(key)
            namespaces = [*self._namespaces, *(p.metadata.namespace for p in pending)]
            # The pods shown besides the holding ones (the window's and the nominated ones, each
            # resolved again) may differ from the last snapshot's: the delta names them all.
            shown = frozenset(extra)
            last = self._last
            delta = None
            rewrites = (self._changes[DEVICE_CLASSES.name], self._changes[NODES.name])
            if last is not None and last[0]() is not None:
                changed = self._changed | last[1] | shown
                # No class now and none at the last snapshot (the count of their changes is the
                # same): no pod was rewritten, in either.
                if self._objects[DEVICE_CLASSES] or rewrites[0] != self._rewrites_at[0]:
                    if rewrites != self._rewrites_at:  # every pod a class may back may read otherwise
                        changed |= self._asking_beyond
                    else:  # those whose claim came or went
                        for claim in self._claims_moved:
                            changed |= self._by_extended_claim.get(claim, set())
                delta = SnapshotDelta(last[0], frozenset(changed))
            nodes, node_by_name = self._taken_values(NODES)
            pods = (*self._holding.values(), *pending)
            trees = self._resolved_trees()
            snapshot = ClusterSnapshot.build(
                nodes=nodes, pods=pods, pdbs=self._taken_values(PDBS)[0],
                priority_classes=self._classes.values(), pod_groups=self._pod_groups(pending, trees),
                composite_groups=trees.composites if trees is not None else (),
                pvcs=self._taken_values(PVCS)[0], pvs=self._taken_values(PVS)[0],
                storage_classes=self._taken_values(STORAGE_CLASSES)[0],
                csi_nodes=self._taken_values(CSI_NODES)[0], namespaces=self._taken_values(NAMESPACES)[0],
                device_classes=self._taken_values(DEVICE_CLASSES)[0],
                resource_slices=self._taken_values(RESOURCE_SLICES)[0],
                resource_claims=self.claims.view(self._objects[RESOURCE_CLAIMS]),  # type: ignore[arg-type]
                claims_from_templates=False,
                positions=self._positions(extra), node_by_name=node_by_name,
                keyed=True, resolved=True, pod_namespaces=namespaces, delta=delta, nominated=nominated,
                asking_beyond=[*self._asking_beyond,
                               *(key for key, pod in zip(extra, pending) if asks_beyond_cpu_and_memory(pod))])
            self._last = (weakref.ref(snapshot), shown)
            self._changed = set()
            self._rewrites_at = rewrites
            self._claims_moved = set()
            return snapshot

    # --- assumptions ---------------------------------------------------------------------------

    def assume(self, key: str, node: str, *, state: str, now: float) -> bool:
        """Show pending pod `key` on `node`; False if it is no longer pending or the node is gone."""
        with self.lock:
            pod: Optional[Pod] = self._objects[PODS].get(key)  # type: ignore[assignment]
            if pod is None or pod.spec.node_name or pod.is_terminating or key in self._assumed:
                return False
            if node not in self._objects[NODES]:
                return False
            self._assumed[key] = Assumption(_on_node(pod, node), node, state, now)
            self._refresh(key)
            return True

    def set_state(self, key: str, state: str, *, expires: Optional[float] = None) -> bool:
        """Move an assumption to `state`; False if it has ended meanwhile (confirmed or deleted)."""
        with self.lock:
            assumption = self._assumed.get(key)
            if assumption is None:
                return False
            assumption.state = state
            assumption.expires = expires
            return True

    def assume_claims(self, key: str, claims: Iterable[tuple[str, Optional[dict[str, Any]]]]) -> None:
        """The claims assumed pod `key` is given: (claim key, the allocation the window chose for
        it, or None when it is allocated already). Shown allocated until the watch shows them so
        or the pod's assumption is forgotten."""
        with self.lock:
            self.claims.assume(key, claims, self._objects[RESOURCE_CLAIMS])  # type: ignore[arg-type]

    def forget(self, key: str) -> bool:
        """Drop an assumption (a failed bind); True if there was one."""
        with self.lock:
            self.claims.forget(key)
            found = self._assumed.pop(key, None) is not None
            if found:
                self._refresh(key)
                self.changed.notify_all()
            return found

    def assumption(self, key: str) -> Optional[Assumption]:
        with self.lock:
            return self._assumed.get(key)

    def assumed(self) -> dict[str, Assumption]:
        with self.lock:
            return dict(self._assumed)

    def is_assumed(self, key: str) -> bool:
        with self.lock:
            return key in self._assumed

    def observe_pod(self, obj: dict[str, Any]) -> None:
        """A pod read directly (after an unclear bind): applied if newer than the watched copy."""
        self.apply(PODS, "MODIFIED", obj, newer_only=True)

    # --- victims -------------------------------------------------------------------------------

    def mark_evicting(self, key: str) -> bool:
        """Show a victim as terminating from now on; False if it is gone or not bound."""
        with self.lock:
            pod: Optional[Pod] = self._objects[PODS].get(key)  # type: ignore[assignment]
            if pod is None or not pod.spec.node_name:
                return False
            self._evicting[key] = pod if pod.is_terminating else _terminating(pod)
            self._refresh(key)
            return True

    def unmark_evicting(self, key: str) -> None:
        """The eviction was refused: the victim keeps running as it was."""
        with self.lock:
            if self._evicting.pop(key, None) is not None:
                self._refresh(key)

    def is_evicting(self, key: str) -> bool:
        with self.lock:
            return key in self._evicting

    def wait_until(self, predicate: Any, timeout: float) -> bool:
        """Block until `predicate()` holds (checked on every cache change) or `timeout` passes."""
        with self.changed:
            return self.changed.wait_for(predicate, timeout)
