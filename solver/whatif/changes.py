"""The changes ``what-if`` applies to a snapshot, each a small frozen value with ``reach`` and
``apply``.

Every name a change gives is read in the snapshot as it was, before any change: one that names
a node, pod, PodDisruptionBudget, pod group or namespace the snapshot does not have is an
``InputError`` naming it (exit 2), never a change silently skipped, and a node LIKE is copied as
it was, so ``--remove-node X --add-nodes 2:X`` replaces X whichever comes first. Two changes
that cannot both hold (one changes what another deletes, or two give one object different
values) are refused too (``conflicts``). The others are then applied one after the other, each
to the result of the last; their order changes nothing.

What a change does to the pods it displaces (drain, remove-node) follows what the cluster's
controllers would do: a pod with a controlling owner other than a DaemonSet comes back pending
(its controller makes a replacement; here the same pod, unbound, decided by this scheduler); a
DaemonSet's pod stays with its node (``kubectl drain --ignore-daemonsets``) or goes with it; a
pod without a controller is gone (``kubectl drain --force``). Budgets are not consulted: the
question is what the cluster looks like afterwards, not whether the eviction API would allow it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

from models.errors import InputError
from models.objects import Node, Pod, PodDisruptionBudget, copy_with
from models.snapshot import ClusterSnapshot, pod_group_key

from .conflicts import Reach, refuse_conflicts
from .node_shape import kind_taints
from .node_slices import copied_slices, node_slices

HOSTNAME_LABEL = "kubernetes.io/hostname"


def rebuilt(snapshot: ClusterSnapshot, **fields: Any) -> ClusterSnapshot:
    """``snapshot`` with some of its lists replaced, built (checked, resolved) again."""
    current: dict[str, Any] = dict(
        nodes=snapshot.nodes, pods=snapshot.pods, pdbs=snapshot.pdbs, priority_classes=snapshot.priority_classes,
        pod_groups=snapshot.pod_groups, namespaces=snapshot.namespaces, pvs=snapshot.pvs, pvcs=snapshot.pvcs,
        device_classes=snapshot.device_classes, resource_slices=snapshot.resource_slices,
        resource_claims=snapshot.resource_claims, resource_claim_templates=snapshot.resource_claim_templates,
        storage_classes=snapshot.storage_classes, csi_nodes=snapshot.csi_nodes,
        claims_from_templates=snapshot.claims_from_templates,
    )
    current.update(fields)
    return ClusterSnapshot.build(**current)


def _node(snapshot: ClusterSnapshot, name: str, flag: str) -> Node:
    node = snapshot.node_by_name.get(name)
    if node is None:
        raise InputError(f"nodes/{name}", flag, "no such node in the snapshot")
    return node


def _pdb(snapshot: ClusterSnapshot, key: str, flag: str) -> PodDisruptionBudget:
    found = next((b for b in snapshot.pdbs if b.key == key), None)
    if found is None:
        raise InputError(f"poddisruptionbudgets/{key}", flag, "no such PodDisruptionBudget in the snapshot")
    return found


def _owner_kind(pod: Pod) -> Optional[str]:
    owner = next((o for o in pod.metadata.owner_references if o.controller), None)
    return owner.kind if owner is not None else None


def unbound(pod: Pod, scheduler_name: str) -> Pod:
    """``pod`` as its controller's replacement would be: pending, ours, no nomination."""
    spec = copy_with(pod.spec, {"node_name": "", "scheduler_name": scheduler_name})
    status = copy_with(pod.status, {"phase": "Pending", "nominated_node_name": "", "conditions": []})
    return copy_with(pod, {"spec": spec, "status": status})


Fate = Literal["stays", "pending", "gone"]


def _fate(pod: Pod, *, keep_daemons: bool) -> Fate:
    """What becomes of a pod of a node that loses its workloads (see the module's docstring)."""
    kind = _owner_kind(pod)
    if kind == "DaemonSet":
        return "stays" if keep_daemons else "gone"
    return "pending" if kind is not None and not pod.is_terminating else "gone"


def _displaced(pods: tuple[Pod, ...], node: str, scheduler_name: str, *, keep_daemons: bool) -> list[Pod]:
    """The pods after ``node`` loses its workloads."""
    out: list[Pod] = []
    for pod in pods:
        if pod.spec.node_name != node or pod.is_terminal:
            out.append(pod)
            continue
        fate = _fate(pod, keep_daemons=keep_daemons)
        if fate == "stays":
            out.append(pod)
        elif fate == "pending":
            out.append(unbound(pod, scheduler_name))
    return out


def _gone(pods: tuple[Pod, ...], node: str, *, keep_daemons: bool) -> frozenset[str]:
    """The pods ``node`` losing its workloads deletes, as ``pods/NS/NAME``."""
    return frozenset(f"pods/{p.key}" for p in pods if p.spec.node_name == node and not p.is_terminal
                     and _fate(p, keep_daemons=keep_daemons) == "gone")


@dataclass(frozen=True)
class Drain:
    """``--drain NODE``: cordon the node and send its workloads elsewhere."""

    node: str
    flag = "--drain"

    def given(self) -> str:
        return f"{self.flag} {self.node}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        _node(before, self.node, self.flag)
        # Nothing it needs kept: a ``--remove-node`` of the same node drains it too, then it is gone
        # (accepted before the conflicts were checked, and both hold).
        return Reach(deletes=_gone(before.pods, self.node, keep_daemons=True), sets={f"nodes/{self.node}": "cordoned"})

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        node = snapshot.node_by_name.get(self.node)
        if node is None:
            return snapshot  # removed by a --remove-node, which displaced its workloads already
        cordoned = copy_with(node, {"spec": copy_with(node.spec, {"unschedulable": True})})
        nodes = tuple(cordoned if n is node else n for n in snapshot.nodes)
        pods = _displaced(snapshot.pods, self.node, scheduler_name, keep_daemons=True)
        return rebuilt(snapshot, nodes=nodes, pods=pods)

    def describe(self) -> str:
        return f"drain node {self.node}"


@dataclass(frozen=True)
class RemoveNode:
    """``--remove-node NODE``: the node is gone, and its DaemonSet pods with it."""

    node: str
    flag = "--remove-node"

    def given(self) -> str:
        return f"{self.flag} {self.node}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        _node(before, self.node, self.flag)
        return Reach(deletes=frozenset({f"nodes/{self.node}"}) | _gone(before.pods, self.node, keep_daemons=False))

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        if self.node not in snapshot.node_by_name:
            return snapshot  # removed by the same flag given twice
        nodes = tuple(n for n in snapshot.nodes if n.metadata.name != self.node)
        pods = _displaced(snapshot.pods, self.node, scheduler_name, keep_daemons=False)
        return rebuilt(snapshot, nodes=nodes, pods=pods)

    def describe(self) -> str:
        return f"remove node {self.node}"


@dataclass(frozen=True)
class AddNodes:
    """``--add-nodes N:LIKE``: N new nodes shaped like node LIKE (labels, taints, allocatable, its
    own DRA devices: ``node_slices``), or like the Node given in a file (``shape``), named
    ``<like>-whatif-<i>``. New nodes are in no state yet: not cordoned, and without the taints
    that say a node is cordoned, not ready, unreachable, ... (``node_shape``)."""

    count: int
    like: str
    shape: Optional[Node] = None
    flag = "--add-nodes"

    def given(self) -> str:
        return f"{self.flag} {self.count}:{self.like}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        if self.shape is None:
            _node(before, self.like, self.flag)
        return Reach()  # LIKE is only read, as it was: removing or draining it too is no conflict

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        model = self.shape if self.shape is not None else before.node_by_name[self.like]
        base = model.metadata.name
        taken = set(snapshot.node_by_name) | set(before.node_by_name)  # no name of a node removed either
        added: list[Node] = []
        i = 0
        while len(added) < self.count:
            i += 1
            name = f"{base}-whatif-{i}"
            if name in taken:
                continue
            labels = dict(model.metadata.labels)
            if HOSTNAME_LABEL in labels:
                labels[HOSTNAME_LABEL] = name
            metadata = copy_with(model.metadata, {"name": name, "labels": labels, "uid": ""})
            spec = copy_with(model.spec, {"unschedulable": False, "taints": kind_taints(model.spec.taints)})
            added.append(copy_with(model, {"metadata": metadata, "spec": spec}))
        # A node copied from one of the cluster's gets a copy of that node's own devices.
        own = node_slices(before, self.like) if self.shape is None else ()
        if not own:
            return rebuilt(snapshot, nodes=snapshot.nodes + tuple(added))
        slices = tuple(s for node in added for s in copied_slices(own, node.metadata.name))
        return rebuilt(snapshot, nodes=snapshot.nodes + tuple(added), resource_slices=snapshot.resource_slices + slices)

    def describe(self) -> str:
        return f"add {self.count} node(s) like {self.like}"


@dataclass(frozen=True)
class DeletePdb:
    """``--delete-pdb NS/NAME``."""

    pdb: str
    flag = "--delete-pdb"

    def given(self) -> str:
        return f"{self.flag} {self.pdb}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        _pdb(before, self.pdb, self.flag)
        return Reach(deletes=frozenset({f"poddisruptionbudgets/{self.pdb}"}))

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        return rebuilt(snapshot, pdbs=tuple(b for b in snapshot.pdbs if b.key != self.pdb))

    def describe(self) -> str:
        return f"delete PodDisruptionBudget {self.pdb}"


@dataclass(frozen=True)
class RelaxPdb:
    """``--relax-pdb NS/NAME=MAX_UNAVAILABLE``: the budget's spec becomes ``maxUnavailable``
    (an integer or a percentage), its allowance computed again from the pods."""

    pdb: str
    max_unavailable: Union[int, str]
    flag = "--relax-pdb"

    def given(self) -> str:
        return f"{self.flag} {self.pdb}={self.max_unavailable}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        _pdb(before, self.pdb, self.flag)
        ref = f"poddisruptionbudgets/{self.pdb}"
        return Reach(needs=ref, sets={ref: self.max_unavailable})

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        old = _pdb(snapshot, self.pdb, self.flag)
        relaxed = PodDisruptionBudget.model_validate({
            "metadata": old.metadata.model_dump(by_alias=True, exclude_none=True),
            "spec": {"selector": old.spec.selector.model_dump(by_alias=True, exclude_none=True)
                     if old.spec.selector is not None else None,
                     "maxUnavailable": self.max_unavailable,
                     # kept: it is not what the flag relaxes (AlwaysAllow lets a pod that is not
                     # Ready go unspent, and a looser budget must not take that away)
                     "unhealthyPodEvictionPolicy": old.spec.unhealthy_pod_eviction_policy},
        })
        return rebuilt(snapshot, pdbs=tuple(relaxed if b is old else b for b in snapshot.pdbs))

    def describe(self) -> str:
        return f"relax PodDisruptionBudget {self.pdb} to maxUnavailable {self.max_unavailable}"


@dataclass(frozen=True)
class SetPriority:
    """``--priority POD_OR_GROUP=VALUE``: a pod (``NS/NAME``) or every pod of a gang
    (``podgroup/NS/NAME``, or ``NS/NAME`` naming no pod but a gang) gets priority VALUE."""

    target: str
    value: int
    flag = "--priority"

    def given(self) -> str:
        return f"{self.flag} {self.target}={self.value}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        named, keys = self._pods(before)
        if not keys:
            raise InputError(self.target, self.flag, "no such pod or pod group in the snapshot")
        return Reach(needs=named, sets={f"pods/{k}": self.value for k in keys})

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        _, keys = self._pods(snapshot)  # a gang's members another change deleted are not among them
        pods = tuple(
            copy_with(p, {"spec": copy_with(p.spec, {"priority": self.value})}) if p.key in keys else p
            for p in snapshot.pods
        )
        return rebuilt(snapshot, pods=pods)

    def _pods(self, snapshot: ClusterSnapshot) -> tuple[str, set[str]]:
        """The object the target names (``pods/NS/NAME`` or ``podgroups/NS/NAME``) and its pods."""
        target = self.target
        group = target.removeprefix("podgroup/").removeprefix("workload/")
        if group == target and snapshot.pod(target) is not None:
            return f"pods/{target}", {target}
        return f"podgroups/{group}", {p.key for p in snapshot.pods if pod_group_key(p) == group}

    def describe(self) -> str:
        return f"priority of {self.target} set to {self.value}"


@dataclass(frozen=True)
class RemovePod:
    """``--remove-pod NS/NAME``: the pod is deleted (running or pending)."""

    pod: str
    flag = "--remove-pod"

    def given(self) -> str:
        return f"{self.flag} {self.pod}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        if before.pod(self.pod) is None:
            raise InputError(f"pods/{self.pod}", self.flag, "no such pod in the snapshot")
        return Reach(deletes=frozenset({f"pods/{self.pod}"}))

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        return rebuilt(snapshot, pods=tuple(p for p in snapshot.pods if p.key != self.pod))

    def describe(self) -> str:
        return f"remove pod {self.pod}"


@dataclass(frozen=True)
class RemoveNamespace:
    """``--remove-namespace NS``: the namespace's pods, budgets and pod groups are deleted."""

    namespace: str
    flag = "--remove-namespace"

    def given(self) -> str:
        return f"{self.flag} {self.namespace}"

    def reach(self, before: ClusterSnapshot) -> Reach:
        ns = self.namespace
        pods = [p for p in before.pods if p.metadata.namespace == ns]
        if not pods and not any(n.metadata.name == ns for n in before.namespaces):
            raise InputError(f"namespaces/{ns}", self.flag, "no such namespace (and no pod in it) in the snapshot")
        gangs = {f"podgroups/{g}" for g in map(pod_group_key, pods) if g is not None}
        gangs |= {f"podgroups/{g.key}" for g in before.pod_groups if g.metadata.namespace == ns}
        return Reach(deletes=frozenset({f"pods/{p.key}" for p in pods} | gangs | {
            f"poddisruptionbudgets/{b.key}" for b in before.pdbs if b.metadata.namespace == ns}))

    def apply(self, snapshot: ClusterSnapshot, before: ClusterSnapshot, scheduler_name: str) -> ClusterSnapshot:
        ns = self.namespace
        return rebuilt(
            snapshot,
            pods=tuple(p for p in snapshot.pods if p.metadata.namespace != ns),
            pdbs=tuple(b for b in snapshot.pdbs if b.metadata.namespace != ns),
            pod_groups=tuple(g for g in snapshot.pod_groups if g.metadata.namespace != ns),
        )

    def describe(self) -> str:
        return f"remove namespace {self.namespace}'s workloads"


Change = Union[Drain, RemoveNode, AddNodes, DeletePdb, RelaxPdb, SetPriority, RemovePod, RemoveNamespace]


def apply_all(snapshot: ClusterSnapshot, changes: list[Change], scheduler_name: str) -> ClusterSnapshot:
    """``snapshot`` with every change applied. All are checked against ``snapshot`` first (each
    name exists there; no two cannot both hold), then applied one after the other, each reading
    ``snapshot`` as it was where it copies a node."""
    refuse_conflicts([(change.given(), change.reach(snapshot)) for change in changes])
    changed = snapshot
    for change in changes:
        changed = change.apply(changed, snapshot, scheduler_name)
    return changed
