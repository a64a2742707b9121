"""``ClusterSnapshot``: everything one scheduling decision reads, as immutable parsed objects.

Built from the objects an adapter parsed (a file, stdin, or the live watch cache): priorities
and preemption policies are resolved once here, names are checked for duplicates, and pods are
split into the ones that hold node capacity and the ones waiting for a node.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Optional
from functools import cached_property

from pydantic import BaseModel, ConfigDict, PrivateAttr

from .errors import InputError
from .objects import Namespace, Node, Pod, PodDisruptionBudget, PodGroup, PriorityClass, copy_with
from .storage import PersistentVolume, PersistentVolumeClaim
from .dra import (
    DeviceClass, PodClaim, ResourceClaim, ResourceClaimTemplate, ResourceSlice, back_extended_resources, resolve_pod_claims,
)
from .storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from .group_api import CompositePodGroup
from .group_tree import apply_group_priority
from .workloads import workload_key
from .priority import PriorityResolutionError, resolve_preemption_policy, resolve_priority

DEFAULT_SCHEDULER_NAME = "cpsat-scheduler"
# Resources no DeviceClass backs in place of a node (``asking_beyond`` in ``ClusterSnapshot.build``).
_NATIVE = frozenset({"cpu", "memory"})
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True, eq=False)
class SnapshotDelta:
    """How a snapshot differs from an earlier one of the same source (the live cache's last):
    only the pods keyed in ``pods`` may differ — added, gone, or another object; every other pod
    is the very same object in both, at the same place relative to the others. What a consumer
    derived from ``base`` it may bring up to date from these keys instead of reading every pod
    again (``solver/context.py``). Nodes and the other objects are not covered: compare them."""

    base: "weakref.ReferenceType[ClusterSnapshot]"
    pods: frozenset[str]


class PodPositions(Mapping[str, int]):
    """Each pod's index in a snapshot's ``pods``, by key, made in proportion to what changed
    since an earlier snapshot of the same source rather than to the cluster (the live cache
    takes one per decision, and a dict of every pod's index cost more than the rest of it).

    The source keeps its pods in one order between snapshots and changes a few at a time:
    ``base`` is every pod's index when it last indexed them all, and ``base_keys`` the keys in
    that order (both shared by the snapshots since, never changed); ``gaps`` the base indexes
    of those taken out since, sorted, each moving the pods after it one place up; ``tail`` the
    pods put in since, all after the others, with their indexes. A lookup costs a bisection of
    the gaps; the source indexes afresh before they grow long."""

    __slots__ = ("_base", "_base_keys", "_gaps", "_tail", "_full")

    def __init__(self, base: dict[str, int], base_keys: tuple[str, ...], gaps: tuple[int, ...],
                 tail: dict[str, int]) -> None:
        self._base, self._base_keys, self._gaps, self._tail = base, base_keys, gaps, tail
        self._full: Optional[dict[str, int]] = None

    def get(self, key: str, default: Optional[int] = None) -> Optional[int]:  # type: ignore[override]
        index = self._tail.get(key)
        if index is not None:
            return index
        index = self._base.get(key)
        if index is None:
            return default
        gaps = self._gaps
        if not gaps:
            return index
        up = bisect_left(gaps, index)
        if up < len(gaps) and gaps[up] == index:
            return default  # taken out (and, if put back, found in the tail above)
        return index - up

    def __getitem__(self, key: str) -> int:
        index = self.get(key)
        if index is None:
            raise KeyError(key)
        return index

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __len__(self) -> int:
        return len(self._base) - len(self._gaps) + len(self._tail)

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def as_dict(self) -> dict[str, int]:
        """The same as one dict, in the pods' order (made once, on first use)."""
        if self._full is None:
            # A copy of the base (one block, no rehashing) with the pods taken out deleted, those
            # after the first gap given their index again (set in place: the order stands), and
            # the tail put at the end: cheaper than a dict made key by key.
            full = self._base.copy()
            gaps, base_keys = self._gaps, self._base_keys
            if gaps:
                moved: list[str] = []
                start = gaps[0] + 1
                for gap in gaps:
                    del full[base_keys[gap]]
                    moved += base_keys[start:gap]
                    start = gap + 1
                moved += base_keys[start:]
                full.update(zip(moved, range(gaps[0], gaps[0] + len(moved))))
            full.update(self._tail)
            self._full = full
        return self._full


class ClusterSnapshot(BaseModel):
    """Nodes, pods (bound, pending and terminal alike), PDBs, priority classes, pod groups."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    # (delta, this snapshot): a copy of the snapshot is not the one the delta was made for.
    _delta: Optional[tuple[SnapshotDelta, "weakref.ReferenceType[ClusterSnapshot]"]] = PrivateAttr(default=None)

    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    priority_classes: tuple[PriorityClass, ...] = ()
    pod_groups: tuple[PodGroup, ...] = ()
    # Kubernetes 1.37's CompositePodGroups: the inner nodes of group trees (``models.group_tree``).
    composite_groups: tuple[CompositePodGroup, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    # Where persistent data lives (read by ``repack``: a pod moves only where its volume can follow).
    pvs: tuple[PersistentVolume, ...] = ()
    pvcs: tuple[PersistentVolumeClaim, ...] = ()
    # Dynamic Resource Allocation (``models.dra``).
    device_classes: tuple[DeviceClass, ...] = ()
    resource_slices: tuple[ResourceSlice, ...] = ()
    resource_claims: tuple[ResourceClaim, ...] = ()
    resource_claim_templates: tuple[ResourceClaimTemplate, ...] = ()
    # Whether a pod's template entry that names no claim yet is read as the claim the template
    # would make (a dump taken before the controller made it), or waits for kube-controller-
    # manager's resourceclaim controller to make it (the live scheduler: it writes claims'
    # status, and only a claim that exists has one).
    claims_from_templates: bool = True
    # What the volume plugins read besides claims and volumes (``solver/plugins/volumes/``).
    storage_classes: tuple[StorageClass, ...] = ()
    csi_nodes: tuple[CSINode, ...] = ()

    @classmethod
    def build(
        cls,
        *,
        nodes: Iterable[Node] = (),
        pods: Iterable[Pod] = (),
        pdbs: Iterable[PodDisruptionBudget] = (),
        priority_classes: Iterable[PriorityClass] = (),
        pod_groups: Iterable[PodGroup] = (),
        composite_groups: Iterable[CompositePodGroup] = (),
        namespaces: Iterable[Namespace] = (),
        pvs: Iterable[PersistentVolume] = (),
        pvcs: Iterable[PersistentVolumeClaim] = (),
        device_classes: Iterable[DeviceClass] = (),
        resource_slices: Iterable[ResourceSlice] = (),
        resource_claims: Iterable[ResourceClaim] = (),
        resource_claim_templates: Iterable[ResourceClaimTemplate] = (),
        storage_classes: Iterable[StorageClass] = (),
        csi_nodes: Iterable[CSINode] = (),
        claims_from_templates: bool = True,
        pod_keys: Optional[list[str]] = None,
        node_names: Optional[list[str]] = None,
        positions: Optional[PodPositions] = None,
        node_by_name: Optional[dict[str, Node]] = None,
        keyed: bool = False,
        resolved: bool = False,
        pod_namespaces: Optional[Iterable[str]] = None,
        delta: Optional[SnapshotDelta] = None,
        nominated: Optional[Iterable[str]] = None,
        asking_beyond: Optional[Iterable[str]] = None,
    ) -> "ClusterSnapshot":
        """Check names, resolve every pod's priority and preemption policy, freeze.

        What a caller that keeps the cluster between snapshots (the live cache) already knows
        need not be worked out again from every pod:
        ``pod_keys``, ``node_names``: the pods' keys and the nodes' names, in order: they index
        the snapshot's pods and nodes;
        ``positions``: the pods' indexes, by key, as the caller keeps them (in place of ``pod_keys``);
        ``node_by_name``: the nodes by name, in order (an earlier snapshot's, when its nodes are these);
        ``keyed``: every list comes from a store keyed by name: no name can repeat;
        ``resolved``: every pod went through ``resolve_pod`` with these priority classes;
        ``pod_namespaces``: the namespaces the pods are in (any order, repeats allowed);
        ``delta``: how the snapshot differs from the caller's last (``SnapshotDelta``);
        ``nominated``: the keys of every pod ``nominated_pending`` may hold (a superset);
        ``asking_beyond``: the keys of every pod whose containers request anything but cpu and
        memory (a superset): only those are read for extended resources a DeviceClass backs."""
        # Tuples from the start: a tuple given (the live cache's, kept while nothing changed)
        # is taken as it is, without a copy.
        nodes, pods, pdbs = tuple(nodes), tuple(pods), tuple(pdbs)
        priority_classes, pod_groups, namespaces = tuple(priority_classes), tuple(pod_groups), tuple(namespaces)
        composite_groups = tuple(composite_groups)
        pvs, pvcs = tuple(pvs), tuple(pvcs)
        device_classes, resource_slices = tuple(device_classes), tuple(resource_slices)
        resource_claims, resource_claim_templates = tuple(resource_claims), tuple(resource_claim_templates)
        storage_classes, csi_nodes = tuple(storage_classes), tuple(csi_nodes)
        if positions is not None and len(positions) != len(pods):
            positions = None
        if positions is None and (pod_keys is None or len(pod_keys) != len(pods)):
            pod_keys = [p.key for p in pods]
        if not keyed:
            _check_unique({
                "nodes": [n.metadata.name for n in nodes],
                "pods": pod_keys if pod_keys is not None else [p.key for p in pods],
                "poddisruptionbudgets": [p.key for p in pdbs],
                "priorityclasses": [c.metadata.name for c in priority_classes],
                "podgroups": [g.key for g in pod_groups],
                "namespaces": [n.metadata.name for n in namespaces],
                "persistentvolumes": [v.name for v in pvs],
                "persistentvolumeclaims": [c.key for c in pvcs],
                "deviceclasses": [c.name for c in device_classes],
                "resourceslices": [s.name for s in resource_slices],
                "resourceclaims": [c.key for c in resource_claims],
                "resourceclaimtemplates": [t.key for t in resource_claim_templates],
                "storageclasses": [c.name for c in storage_classes],
                "csinodes": [c.name for c in csi_nodes],
            })
        if not resolved:
            classes = {c.metadata.name: c for c in priority_classes}
            pods = tuple(resolve_pod(pod, classes) for pod in pods)
        if any(g.spec.priority is not None or g.spec.preemption_policy is not None for g in pod_groups):
            # 1.37: a group's own priority and preemption policy are its members'.
            pods = tuple(apply_group_priority(pods, {g.key: g for g in pod_groups}, pod_group_key))
        if device_classes:
            pods, made = _back_extended(pods, device_classes, nodes, resource_claims, asking_beyond,
                                        positions, pod_keys)
            resource_claim_templates = resource_claim_templates + made
        # Every field is already of its type: no validation pass over tens of thousands of pods.
        snapshot = cls.model_construct(
            nodes=nodes, pods=pods, pdbs=pdbs, priority_classes=priority_classes, pod_groups=pod_groups,
            composite_groups=composite_groups, namespaces=namespaces, pvs=pvs, pvcs=pvcs, device_classes=device_classes,
            resource_slices=resource_slices, resource_claims=resource_claims,
            resource_claim_templates=resource_claim_templates, storage_classes=storage_classes,
            csi_nodes=csi_nodes, claims_from_templates=claims_from_templates,
        )
        _prefill(snapshot, positions=positions, pod_keys=pod_keys, node_by_name=node_by_name, node_names=node_names,
                 pod_namespaces=pod_namespaces, delta=delta, nominated=nominated)
        return snapshot

    @property
    def delta(self) -> Optional[SnapshotDelta]:
        """How this snapshot differs from its source's last one, when its source said so."""
        held = self._delta
        return held[0] if held is not None and held[1]() is self else None

    # -- queries -----------------------------------------------------------------------------

    @cached_property
    def node_by_name(self) -> dict[str, Node]:
        return {n.metadata.name: n for n in self.nodes}

    @cached_property
    def pod_position(self) -> dict[str, int]:
        """Each pod's index in ``pods``, by key."""
        kept = self.__dict__.get("positions")
        if isinstance(kept, PodPositions):
            return kept.as_dict()
        return {p.key: i for i, p in enumerate(self.pods)}

    @cached_property
    def positions(self) -> Mapping[str, int]:
        """``pod_position``, as a mapping that may cost less to make than the dict: the live
        cache gives each snapshot a ``PodPositions``, made from what changed since its last
        one. What looks up a few pods (``pod``, ``pods_among``, a delta's keys) reads this."""
        return self.pod_position

    @cached_property
    def pod_by_key(self) -> dict[str, Pod]:
        return dict(zip(self.pod_position, self.pods))  # pod_position runs in the pods' order

    @cached_property
    def pv_by_name(self) -> dict[str, PersistentVolume]:
        return {v.name: v for v in self.pvs}

    @cached_property
    def pvc_by_key(self) -> dict[str, PersistentVolumeClaim]:
        return {c.key: c for c in self.pvcs}

    @cached_property
    def device_class_by_name(self) -> dict[str, DeviceClass]:
        return {c.name: c for c in self.device_classes}

    @cached_property
    def resource_claim_by_key(self) -> dict[str, ResourceClaim]:
        return {c.key: c for c in self.resource_claims}

    @cached_property
    def resource_claim_template_by_key(self) -> dict[str, ResourceClaimTemplate]:
        return {t.key: t for t in self.resource_claim_templates}

    def pod_claims(self, pod: Pod) -> list[PodClaim]:
        """The DRA claims of ``pod`` (``models.dra.resolve_pod_claims``); none for most pods."""
        if not pod.spec.resource_claims:
            return []
        return resolve_pod_claims(pod, self.resource_claim_by_key, self.resource_claim_template_by_key,
                                  from_templates=self.claims_from_templates)

    @cached_property
    def pod_group_by_key(self) -> dict[str, PodGroup]:
        return {g.key: g for g in self.pod_groups}

    @cached_property
    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """Labels of each namespace; a namespace seen only through its pods has the standard
        ``kubernetes.io/metadata.name`` label the API server sets on every namespace."""
        return _namespace_labels({p.metadata.namespace for p in self.pods}, self.namespaces)

    @cached_property
    def nominated_pending(self) -> tuple[Pod, ...]:
        """Pending pods (no node, not terminating or finished) with a ``status.nominatedNodeName``,
        in the snapshot's order."""
        return tuple(p for p in self.pods if _nominated_pending(p))

    @cached_property
    def bound_pod_tuple(self) -> tuple[Pod, ...]:
        """``bound_pods``, found once: a decision, its validator and their rules each ask (a pass
        over every pod, 150,000 of them at 5,000 nodes)."""
        return tuple(p for p in self.pods if holds_node(p))

    def bound_pods(self) -> list[Pod]:
        """Pods that hold node capacity: assigned to a node and not Succeeded/Failed.

        Terminating pods still hold their node's resources until the kubelet lets go.
        """
        return list(self.bound_pod_tuple)

    def missing_nodes(self) -> list[str]:
        """The names of nodes bound pods run on that the snapshot has no Node for, sorted: a dump
        of pods without all their nodes. Nothing can be placed there, and those pods' requests
        hold no room anywhere in the snapshot."""
        names = self.node_by_name
        return sorted({p.spec.node_name for p in self.bound_pod_tuple if p.spec.node_name not in names})

    @cached_property
    def pending_found(self) -> dict[tuple[str, bool], tuple[Pod, ...]]:
        """``pending_pods`` per (scheduler name, all pending) asked so far."""
        return {}

    def pending_pods(self, scheduler_name: str = DEFAULT_SCHEDULER_NAME, *, all_pending: bool = False) -> list[Pod]:
        """Pods this scheduler should place: no node, not terminating, not terminal, not held by
        scheduling gates (kube-scheduler's PreEnqueue keeps those out of the queue), ours."""
        found = self.pending_found
        hit = found.get((scheduler_name, all_pending))
        if hit is None:
            hit = found[(scheduler_name, all_pending)] = tuple(
                p for p in self.pods if is_pending(p, scheduler_name, all_pending))
        return list(hit)

    def pod(self, key: str) -> Optional[Pod]:
        """The pod ``key`` (namespace/name), without building ``pod_by_key``."""
        index = self.positions.get(key)
        return self.pods[index] if index is not None else None

    def pods_among(self, keys: Iterable[str]) -> list[Pod]:
        """The pods named by ``keys``, in the snapshot's order, without a pass over every pod
        (keys not in the snapshot are left out)."""
        position, pods = self.positions, self.pods
        found = sorted({i for key in keys if (i := position.get(key)) is not None})
        return [pods[i] for i in found]

    def pending_among(self, keys: Iterable[str], scheduler_name: str = DEFAULT_SCHEDULER_NAME, *,
                      all_pending: bool = False) -> list[Pod]:
        """``pending_pods`` restricted to ``keys`` (``pods_among``)."""
        return [p for p in self.pods_among(keys) if is_pending(p, scheduler_name, all_pending)]


def _namespace_labels(pod_namespaces: set[str], namespaces: Iterable[Namespace]) -> dict[str, dict[str, str]]:
    labels: dict[str, dict[str, str]] = {}
    for ns in sorted(pod_namespaces):
        labels[ns] = {"kubernetes.io/metadata.name": ns}
    for namespace in namespaces:
        meta = namespace.metadata
        labels[meta.name] = {"kubernetes.io/metadata.name": meta.name, **meta.labels}
    return labels


def resolve_pod(pod: Pod, classes: dict[str, PriorityClass]) -> Pod:
    """The pod with its priority and preemption policy resolved from its PriorityClass (the
    same object when they already are); an unknown class is an ``InputError`` naming the pod."""
    try:
        priority = resolve_priority(pod, classes)
    except PriorityResolutionError as exc:
        field, _, problem = str(exc).partition(": ")
        raise InputError(f"pods/{pod.key}", field, problem) from None
    policy = resolve_preemption_policy(pod, classes)
    if priority != pod.spec.priority or policy != pod.spec.preemption_policy:
        spec = copy_with(pod.spec, {"priority": priority, "preemption_policy": policy})
        pod = copy_with(pod, {"spec": spec})
    return pod


def asks_beyond_cpu_and_memory(pod: Pod) -> bool:
    """Whether a container of ``pod`` requests anything but cpu and memory (``asking_beyond``)."""
    return any(name not in _NATIVE for c in pod.spec.containers for name in c.resources.requests)


def _nominated_pending(p: Pod) -> bool:
    return bool(p.status.nominated_node_name) and not p.spec.node_name and not p.is_terminating and not p.is_terminal


def holds_node(p: Pod) -> bool:
    """Whether ``p`` holds node capacity (``ClusterSnapshot.bound_pods``)."""
    return bool(p.spec.node_name) and not p.is_terminal


def is_pending(p: Pod, scheduler_name: str, all_pending: bool) -> bool:
    """Whether this scheduler should place ``p`` (``ClusterSnapshot.pending_pods``)."""
    return (
        not p.spec.node_name
        and not p.is_terminating
        and not p.is_terminal
        and not p.spec.scheduling_gates
        and (all_pending or p.spec.scheduler_name == scheduler_name)
    )


# Volcano's pods name their PodGroup in this annotation.
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


def pod_group_key(pod: Pod) -> str | None:
    """The key of the gang a pod belongs to, if any: ``namespace/name`` of its PodGroup (the
    scheduler-plugins label, ``spec.schedulingGroup``, or Volcano's annotation), or
    ``namespace/workload:podGroup[:replicaKey]`` for a Workload's pod (``models.workloads``)."""
    ns = pod.metadata.namespace
    name = pod.metadata.labels.get(POD_GROUP_LABEL)
    if name:
        return f"{ns}/{name}"
    spec = pod.spec
    if spec.scheduling_group is not None:
        return f"{ns}/{spec.scheduling_group.pod_group_name}"
    if spec.workload_ref is not None:
        ref = spec.workload_ref
        return workload_key(ns, ref.name, ref.pod_group, ref.pod_group_replica_key)
    name = pod.metadata.annotations.get(VOLCANO_GROUP_ANNOTATION)
    return f"{ns}/{name}" if name else None


def _no_duplicates(resource: str, names: list[str]) -> None:
    if len(set(names)) == len(names):
        return
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"{resource}/{name}", "metadata.name", "duplicate object in snapshot")
        seen.add(name)


def _check_unique(names: dict[str, list[str]]) -> None:
    """Each kind's names (or keys) are unique: ``_no_duplicates`` per kind, in this order."""
    for kind, listed in names.items():
        _no_duplicates(kind, listed)


def _back_extended(pods: tuple[Pod, ...], device_classes: tuple[DeviceClass, ...], nodes: tuple[Node, ...],
                   resource_claims: tuple[ResourceClaim, ...], asking_beyond: Optional[Iterable[str]],
                   positions: Optional[PodPositions], pod_keys: Optional[list[str]],
                   ) -> tuple[tuple[Pod, ...], tuple[ResourceClaimTemplate, ...]]:
    """Extended resources a DeviceClass backs and no node advertises: asked for by claim. The
    scheduler makes that claim itself (also live: `adapters/live/dra_writes.py`). The pods keep
    their keys and order, so the positions stand; returns them and the templates made."""
    backed: list[Pod] = []
    made: list[ResourceClaimTemplate] = []
    if asking_beyond is None or any(c.spec.extended_resource_name in _NATIVE for c in device_classes):
        backed, made = back_extended_resources(list(pods), list(device_classes), list(nodes), list(resource_claims))
        return tuple(backed), tuple(made)
    # the pods that ask for nothing but cpu and memory would come back as they are
    position: Mapping[str, int] = positions if positions is not None else dict(zip(pod_keys or (), range(len(pods))))
    found = sorted({i for key in asking_beyond if (i := position.get(key)) is not None})
    if found:
        backed, made = back_extended_resources([pods[i] for i in found], list(device_classes), list(nodes),
                                               list(resource_claims))
    if any(a is not pods[i] for i, a in zip(found, backed)):
        rewritten = list(pods)
        for i, pod in zip(found, backed):
            rewritten[i] = pod
        pods = tuple(rewritten)
    return pods, tuple(made)


def _prefill(snapshot: ClusterSnapshot, *, positions: Optional[PodPositions], pod_keys: Optional[list[str]],
             node_by_name: Optional[dict[str, Node]], node_names: Optional[list[str]],
             pod_namespaces: Optional[Iterable[str]], delta: Optional[SnapshotDelta],
             nominated: Optional[Iterable[str]]) -> None:
    """What ``build``'s caller already knows, filled in as the cached properties would be
    (stored on first use)."""
    pods, nodes = snapshot.pods, snapshot.nodes
    if positions is not None:
        snapshot.__dict__["positions"] = positions
    else:
        snapshot.__dict__["pod_position"] = dict(zip(pod_keys, range(len(pods))))  # type: ignore[arg-type]
    if node_by_name is not None and len(node_by_name) == len(nodes):
        snapshot.__dict__["node_by_name"] = node_by_name
    elif node_names is not None and len(node_names) == len(nodes):
        snapshot.__dict__["node_by_name"] = dict(zip(node_names, nodes))
    if pod_namespaces is not None:
        snapshot.__dict__["namespace_labels"] = _namespace_labels(set(pod_namespaces), snapshot.namespaces)
    if delta is not None:
        snapshot._delta = (delta, weakref.ref(snapshot))
    if nominated is not None:
        position = snapshot.positions
        found = sorted(i for key in nominated if (i := position.get(key)) is not None)
        snapshot.__dict__["nominated_pending"] = tuple(
            p for p in (pods[i] for i in found) if _nominated_pending(p))
