"""Cluster events into queue moves: which change may help which waiting pod.

kube-scheduler's queueing hints decide, per event, whether an unschedulable pod is worth
another try. Trying after every event wastes solver time on pods that still cannot fit;
trying after none leaves pods waiting for the five-minute flush. The rules here are the
coarse, safe version of those hints:

- a pending pod of ours appears or changes its spec or labels: it is (re)queued;
- a node appears, or changes what scheduling reads (labels, taints, unschedulable,
  allocatable, images): every unschedulable pod may fit now;
- a bound pod is deleted: its room (and its anti-affinity) is gone, so every unschedulable
  pod may fit now; victims awaited by a preemptor may all be gone;
- a pod gets bound or changes labels: pods waiting for a required pod affinity may be
  satisfied now (nothing else becomes *more* feasible when a pod arrives);
- a gang member or its PodGroup appears (any shape: scheduler-plugins', Kubernetes' v1alpha2 or
  Volcano's), or the Workload its pods name: the gang's (the Workload's gangs') waiting members
  try again; a CompositePodGroup appears, changes or goes: the waiting members of every gang of
  its tree try again (its tree may be whole, or valid, at last);
- a PersistentVolumeClaim, PersistentVolume, StorageClass or CSINode appears, changes or goes:
  pods that mount claims try again (a claim bound or created, a volume freed, a limit raised);
- a DeviceClass, ResourceSlice or ResourceClaim appears, changes or goes: pods with
  ResourceClaims try again (a claim made from its template, a device published or freed);
- a PodDisruptionBudget is deleted, changes its spec, or allows more disruptions than before:
  pods that may preempt try again. The live scheduler plans with hard budgets (the Eviction
  API refuses what a budget forbids), so a budget is what kept such a pod's victims in place,
  and without this move it would wait for the five-minute flush. A new or tighter budget
  helps no pod. So do a budget becoming healthy enough to let its pods that are not Ready go,
  and a running pod of such a budget losing its readiness (the Eviction API lets it go unspent).
- a Namespace appears, changes its labels or goes: the pods waiting in it (a bound pod's
  required anti-affinity may select it by its labels no more, or now) and the pods whose own
  required inter-pod terms have a namespaceSelector try again (it may match, or stop matching,
  the namespaces of other pods). Nothing else that filters reads a namespace's labels.

Status-only updates (our own FailedScheduling condition, the kubelet's phase changes) move
nothing, or every status patch would wake every waiting pod.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

from models import Namespace, Node, Pod, PodDisruptionBudget, PodGroup, pod_group_key
from models.workloads import KEY_SEPARATOR, Workload
from solver.disruption import covers, spares_unready, unready_running

from .cache import ClusterCache, node_relevant
from .queue import QueuedPod, SchedulingQueue


def _waits_for_affinity(qp: QueuedPod) -> bool:
    affinity = qp.pod.spec.affinity
    return bool(affinity and affinity.pod_affinity
                and affinity.pod_affinity.required_during_scheduling_ignored_during_execution)


def _selects_namespaces(qp: QueuedPod) -> bool:
    """Whether a required inter-pod (anti-)affinity term of the pod has a namespaceSelector:
    the pods it matches depend on namespace labels (preferred terms only score: they never made
    a pod unschedulable)."""
    affinity = qp.pod.spec.affinity
    return affinity is not None and any(
        term.namespace_selector is not None
        for rules in (affinity.pod_affinity, affinity.pod_anti_affinity) if rules is not None
        for term in rules.required_during_scheduling_ignored_during_execution)


def _namespace_labels(namespace: Optional[Namespace]) -> Optional[dict[str, str]]:
    return namespace.metadata.labels if namespace is not None else None


def _mounts_claims(qp: QueuedPod) -> bool:
    return any(isinstance(v.get("persistentVolumeClaim"), dict) or isinstance(v.get("ephemeral"), dict)
               for v in qp.pod.spec.volumes)


def _may_preempt(qp: QueuedPod) -> bool:
    """Whether the pod may evict others (its priority class may still say Never: then the move
    costs one wasted attempt, never a missed one)."""
    return qp.pod.spec.preemption_policy != "Never"


def _budget_loosened(old: Optional[PodDisruptionBudget], new: Optional[PodDisruptionBudget]) -> bool:
    """Whether a budget change can let a victim go that it held before: its allowance rose, or
    it is now healthy enough to let its pods that are not Ready go (``spares_unready``, read
    as the Eviction API reads it)."""
    if old is None:
        return False  # a new budget only protects more pods
    if new is None or old.spec != new.spec:
        return True
    if spares_unready(new) and not spares_unready(old):
        return True
    before, after = old.status.disruptions_allowed, new.status.disruptions_allowed
    if before is None or after is None:
        return before != after  # computed from the pods instead, or the other way round
    return after > before


def _turned_unready(old: Pod, new: Pod) -> bool:
    """A running pod bound to a node lost its readiness: a budget may now let it go unspent."""
    return bool(new.spec.node_name) and unready_running(new) and not unready_running(old)


def _placement_inputs(pod: Pod) -> tuple:
    """What about a pending pod its placement depends on (of its status, only the claims the
    resourceclaim controller made for it)."""
    return (pod.spec, pod.metadata.labels, pod.status.resource_claim_statuses)


def _has_resource_claims(qp: QueuedPod) -> bool:
    return bool(qp.pod.spec.resource_claims)


class QueueFeeder:
    """The cache's listener: keeps the queue in step with the pods, nodes and budgets it sees."""

    def __init__(self, queue: SchedulingQueue, *, scheduler_name: str,
                 cache: Callable[[], Optional[ClusterCache]], victim_gone: Callable[[str], None],
                 pod_gone: Callable[[str], None]) -> None:
        self.queue = queue
        self.scheduler_name = scheduler_name
        self._cache = cache
        self._victim_gone = victim_gone
        self._pod_gone = pod_gone
        # The budgets that let a running pod that is not Ready go unspent, by key: a pod of theirs
        # losing its readiness may be the victim a waiting preemptor needs.
        self._sparing: dict[str, PodDisruptionBudget] = {}
        self._settling = threading.Lock()
        self._namespaces: set[str] = set()  # changed since the last ``settle``

    def _waiting(self, pod: Pod) -> bool:
        """Ours, without a node, not being deleted, not already decided (assumed)."""
        if pod.spec.scheduler_name != self.scheduler_name or pod.spec.node_name or pod.is_terminating \
                or pod.is_terminal:
            return False
        cache = self._cache()
        return cache is None or not cache.is_assumed(pod.key)

    def pod_added(self, pod: Pod) -> None:
        if self._waiting(pod):
            self.queue.add(pod)
            gang = pod_group_key(pod)
            if gang:
                self.queue.activate_gang(gang)
        elif pod.spec.node_name:
            self.queue.move_all(_waits_for_affinity)

    def pod_updated(self, old: Pod, new: Pod) -> None:
        if self._waiting(new):
            if self.queue.where(new.key) is None:
                self.queue.add(new)
            else:
                self.queue.update(new, relevant=_placement_inputs(old) != _placement_inputs(new))
            return
        if new.spec.scheduler_name == self.scheduler_name and (new.spec.node_name or new.is_terminating):
            self.queue.delete(new.key)
            self._pod_gone(new.key)
        if new.spec.node_name and (not old.spec.node_name or old.metadata.labels != new.metadata.labels):
            self.queue.move_all(_waits_for_affinity)
        if self._sparing and _turned_unready(old, new) and any(covers(b, new) for b in self._sparing.values()):
            self.queue.move_all(_may_preempt)

    def pod_deleted(self, pod: Pod) -> None:
        self.queue.delete(pod.key)
        self._pod_gone(pod.key)
        if pod.spec.node_name:
            self.queue.move_all()
        # Victims are bound pods, but a unit waiting for a pod that went before it was bound must
        # not wait out the preemption timeout for it either: its room is free all the same.
        self._victim_gone(pod.key)

    def node_changed(self, old: Optional[Node], new: Optional[Node]) -> None:
        if new is None:
            return  # a node leaving helps no pending pod
        if old is None or node_relevant(old) != node_relevant(new):
            self.queue.move_all()

    def pod_group_changed(self, group: PodGroup) -> None:
        self.queue.activate_gang(group.key)

    def workload_changed(self, workload: Workload) -> None:
        # Its gangs are keyed namespace/workload:podGroup[:replicaKey] (`models.workloads`).
        prefix = f"{workload.key}{KEY_SEPARATOR}"
        self.queue.move_all(lambda qp: qp.gang is not None and qp.gang.startswith(prefix))

    def group_tree_changed(self, gangs: frozenset[str]) -> None:
        self.queue.move_all(lambda qp: qp.gang in gangs)

    def pdb_changed(self, old: Optional[PodDisruptionBudget], new: Optional[PodDisruptionBudget]) -> None:
        key = (new or old).key  # type: ignore[union-attr]
        if new is not None and spares_unready(new):
            self._sparing[key] = new
        else:
            self._sparing.pop(key, None)
        if _budget_loosened(old, new):
            self.queue.move_all(_may_preempt)

    def namespace_changed(self, old: Optional[Namespace], new: Optional[Namespace]) -> None:
        """A Namespace appeared, changed its labels or went: pods in it (other pods' terms may
        select it, or no longer) and pods whose own terms select namespaces by label may fit now.
        The move waits for ``settle``: a tool relabelling every namespace sends one event each,
        and a pass over the waiting pods per event, under the cache's lock, took seconds."""
        if _namespace_labels(old) == _namespace_labels(new):
            return
        name = (new or old).metadata.name  # type: ignore[union-attr]
        with self._settling:
            self._namespaces.add(name)

    def settle(self) -> None:
        """The moves gathered since the last call (``namespace_changed``), in one pass over the
        waiting pods; the scheduler's housekeeping calls it (every half second by default)."""
        with self._settling:
            names, self._namespaces = self._namespaces, set()
        if names:
            self.queue.move_all(lambda qp: qp.pod.metadata.namespace in names or _selects_namespaces(qp))

    def volumes_changed(self, kind: str) -> None:
        """A claim, volume, storage class or CSINode appeared, changed or went: pods that mount
        claims may fit now (a claim created or bound, a volume freed, a limit raised)."""
        self.queue.move_all(_mounts_claims)

    def devices_changed(self, kind: str) -> None:
        """A DeviceClass, ResourceSlice or ResourceClaim appeared, changed or went: pods with
        claims may fit now (a claim made or deallocated, a device published)."""
        self.queue.move_all(_has_resource_claims)
