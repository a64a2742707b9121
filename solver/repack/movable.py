"""Which running pods a re-packing plan may move, and why the others stay.

The rules are cluster-autoscaler's scale-down drain rules, so that a node this plan frees is one
cluster-autoscaler could also remove:

* mirror (static) pods — annotation ``kubernetes.io/config.mirror``, or owned by the Node — are
  the kubelet's, not the API's: never moved, and they do not keep a node busy;
* DaemonSet pods run on every node and leave with it: never moved, and a node running only
  DaemonSet pods counts as empty (cluster-autoscaler ignores them when it decides a node is
  empty; we do the same);
* terminating pods are already leaving: not moved, and they do not keep a node busy either;
* ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` keeps a pod, and its node, in place;
* a pod more than one PodDisruptionBudget covers stays: the Eviction API refuses to evict it
  (``This pod has more than one PodDisruptionBudget``), whatever its annotations say;
* ``safe-to-evict: "true"`` makes any other pod movable, whatever the two rules below say;
* a pod without a controller (a bare pod) is moved only with ``repack.moveBarePods``: evicting
  it deletes it for good;
* a pod with local storage — a hostPath volume, or an emptyDir not backed by memory, unless the
  volume is listed in ``cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes`` — is moved
  only with ``repack.moveLocalStorage``: its data would be lost;
* a kube-system pod no PodDisruptionBudget covers stays (``repack.moveSystemPods`` moves it), as
  cluster-autoscaler's ``--skip-nodes-with-system-pods`` keeps its node;
* a pod with persistent volumes moves only where they can follow (``volumes``), and stays when
  the snapshot does not say where that is.

Every pod that stays gets one reason constant, so a report can say why its node cannot be freed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from models.config import RepackConfig
from models.objects import NodeSelector, Pod
from models.snapshot import ClusterSnapshot

from .. import interrupt
from ..disruption import pdbs_covering
from .volumes import REASON_VOLUME_UNKNOWN, volume_placement

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"

# The kubelet runs it from a manifest on the node (a mirror of a static pod).
REASON_MIRROR = "mirror (static) pod"
# Owned by a DaemonSet: one per node, it goes away with the node.
REASON_DAEMONSET = "DaemonSet pod"
# Already being deleted: it leaves on its own.
REASON_TERMINATING = "terminating"
# Covered by two budgets or more: the Eviction API answers 500 and evicts nothing.
REASON_MANY_PDBS = "covered by more than one PodDisruptionBudget (the Eviction API refuses to evict it)"
# Annotated safe-to-evict: "false".
REASON_NOT_SAFE_TO_EVICT = 'annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"'
# No controller would recreate it (enable with repack.moveBarePods).
REASON_BARE = "no controller would recreate it (repack.moveBarePods is off)"
# Its local volume's data would be lost (enable with repack.moveLocalStorage).
REASON_LOCAL_STORAGE = "uses local storage (repack.moveLocalStorage is off)"
# A cluster add-on with no budget saying how many may be down (enable with repack.moveSystemPods).
REASON_SYSTEM_NO_PDB = "kube-system pod without a PodDisruptionBudget (repack.moveSystemPods is off)"
SYSTEM_NAMESPACE = "kube-system"
# A pending pod the plan keeps a place for (``pending``): it is to run there after the plan.
REASON_HELD = "pending: its place is kept for it (the backlog must still fit after the plan)"


@dataclass(frozen=True, slots=True)
class Movability:
    """Whether a running pod may move; if not, why, and whether it keeps its node busy."""

    movable: bool
    reason: Optional[str] = None
    pins: bool = False  # an unmovable pod that keeps its node from being freed
    detail: str = ""  # what the reason refers to (the local volumes' names)
    nodes: Optional[NodeSelector] = None  # a movable pod's volumes admit only these nodes

    def describe(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else (self.reason or "movable")

    @property
    def workload(self) -> bool:
        """Counts toward a node being in use (movable pods and pinning pods do)."""
        return self.movable or self.pins


MOVABLE = Movability(True)


def _stays(reason: str, *, pins: bool, detail: str = "") -> Movability:
    return Movability(False, reason, pins, detail)


def held_for_backlog() -> Movability:
    """The verdict of a pending pod placed, for the plan, where the backlog is to run."""
    return _stays(REASON_HELD, pins=True)


def controller_kind(pod: Pod) -> Optional[str]:
    """Kind of the owner reference marked ``controller: true``, if any."""
    for ref in pod.metadata.owner_references:
        if ref.controller:
            return ref.kind
    return None


def is_mirror(pod: Pod) -> bool:
    if MIRROR_ANNOTATION in pod.metadata.annotations:
        return True
    return any(ref.kind == "Node" for ref in pod.metadata.owner_references)


def local_volumes(pod: Pod) -> list[str]:
    """Names of volumes that keep data on the node: hostPath, or emptyDir not in memory, less
    those the pod lists as safe to lose."""
    listed = pod.metadata.annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "")
    safe = {v.strip() for v in listed.split(",") if v.strip()}
    found = []
    for volume in pod.spec.volumes:
        name = str(volume.get("name", ""))
        if name in safe:
            continue
        if volume.get("hostPath") is not None:
            found.append(name)
            continue
        empty_dir = volume.get("emptyDir")
        if "emptyDir" in volume and (not isinstance(empty_dir, dict) or empty_dir.get("medium") != "Memory"):
            found.append(name)
    return found


def classify(pod: Pod, config: RepackConfig, *, covered_by_pdb: bool = False, volumes=None,
             pdb_count: int = 0) -> Movability:
    """The verdict for one running pod (the order of the checks decides which reason wins).
    ``covered_by_pdb``: some PodDisruptionBudget selects the pod (``pdb_count``: how many do);
    ``volumes``: where its
    persistent volumes admit it (``volumes.volume_placement``; None: it has none)."""
    if is_mirror(pod):
        return _stays(REASON_MIRROR, pins=False)
    if controller_kind(pod) == "DaemonSet":
        return _stays(REASON_DAEMONSET, pins=False)
    if pod.is_terminating:
        return _stays(REASON_TERMINATING, pins=False)
    annotation = pod.metadata.annotations.get(SAFE_TO_EVICT)
    if annotation == "false":
        return _stays(REASON_NOT_SAFE_TO_EVICT, pins=True)
    if pdb_count > 1:
        return _stays(REASON_MANY_PDBS, pins=True)
    if annotation == "true":
        return MOVABLE
    if controller_kind(pod) is None and not config.move_bare_pods:
        return _stays(REASON_BARE, pins=True)
    if not config.move_local_storage:
        local = local_volumes(pod)
        if local:
            return _stays(REASON_LOCAL_STORAGE, pins=True, detail="volumes " + ", ".join(local))
    if pod.metadata.namespace == SYSTEM_NAMESPACE and not covered_by_pdb and not config.move_system_pods \
            and annotation != "true":
        return _stays(REASON_SYSTEM_NO_PDB, pins=True)
    if volumes is not None:
        if volumes.unknown:
            return _stays(REASON_VOLUME_UNKNOWN, pins=True, detail=volumes.unknown)
        if volumes.nodes is not None:
            return Movability(True, nodes=volumes.nodes)
    return MOVABLE


def verdict(pod: Pod, snapshot: ClusterSnapshot, config: RepackConfig) -> Movability:
    """``classify`` with what it needs to know from the snapshot (budgets, volumes)."""
    budgets = len(pdbs_covering(pod, snapshot.pdbs))
    return classify(pod, config, covered_by_pdb=budgets > 0, pdb_count=budgets,
                    volumes=volume_placement(pod, snapshot))


def classify_all(pods, snapshot: ClusterSnapshot, config: RepackConfig) -> dict[str, Movability]:
    """Verdict per pod key, for the running (bound, non-terminal) pods given."""
    return {pod.key: verdict(pod, snapshot, config) for pod in interrupt.checked(pods)}  # 2 s at 5,000 nodes
