"""From a ``ClusterSnapshot`` to what every engine works on: node and pod infos, the cluster
state with bound pods assumed, the window of pending pods in queue order, and its equivalence
classes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

from models.config import SchedulerConfig
from models.objects import Pod, PodGroup
from models.resources import is_tracked_resource
from models.snapshot import POD_GROUP_LABEL, ClusterSnapshot

from .info import NodeInfo, PodInfo
from .state import ClusterState


@dataclass(eq=False)
class PodClass:
    """Pending pods that are interchangeable for every rule: one set of solver variables."""

    id: int
    pods: list[PodInfo]

    @property
    def rep(self) -> PodInfo:
        return self.pods[0]

    @property
    def size(self) -> int:
        return len(self.pods)


@dataclass(eq=False)
class SchedulingContext:
    snapshot: ClusterSnapshot
    config: SchedulerConfig
    nodes: list[NodeInfo]
    state: ClusterState
    window: list[PodInfo]  # pending pods in queue order
    classes: list[PodClass]
    bound: list[PodInfo]
    relevant_labels: frozenset[str]
    pod_groups: dict[str, PodGroup]
    image_nodes: dict[str, tuple[int, int]] = field(default_factory=dict)  # image -> (size, numNodes)
    notes: list[str] = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def pod(self, key: str) -> Optional[PodInfo]:
        return self._by_key.get(key)

    def __post_init__(self) -> None:
        self._by_key = {p.key: p for p in [*self.bound, *self.window]}


def queue_order_key(pod: PodInfo) -> tuple:
    """PrioritySort: higher priority first, then earlier creation (queue timestamp), then name."""
    return (-pod.priority, pod.created, pod.key)


def relevant_label_keys(snapshot: ClusterSnapshot, infos: list[PodInfo]) -> frozenset[str]:
    """Every pod label key some selector in the snapshot can look at."""
    keys: set[str] = {POD_GROUP_LABEL}
    for info in infos:
        for term in (*info.affinity, *info.anti_affinity, *info.preferred_affinity, *info.preferred_anti_affinity):
            keys |= term.selector.keys()
        for c in info.spread:
            keys |= c.selector.keys()
    for pdb in snapshot.pdbs:
        sel = pdb.spec.selector
        if sel is not None:
            keys |= set(sel.match_labels) | {r.key for r in sel.match_expressions}
    return frozenset(keys)


def window_pods(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    all_pending: bool = False,
    window_keys: Optional[list[str]] = None,
) -> list[Pod]:
    """The pending pods one decision places: ours (or all with ``all_pending``), and only
    those named in ``window_keys`` when it is given."""
    pending = snapshot.pending_pods(config.scheduler_name, all_pending=all_pending)
    if window_keys is None:
        return pending
    wanted = set(window_keys)
    return [p for p in pending if p.key in wanted]


# PodInfos of bound pods from the last context built, by pod object: a caller that builds
# contexts again and again from snapshots sharing their (immutable) Pod objects — the live
# scheduler, once per window and once per check — derives each bound pod's info once instead of
# every time. Keyed by id() with the pod kept alongside (so an id is never reused while its entry
# lives) and checked by identity; replaced on each build, so it holds one snapshot's pods at most.
# A bound pod's info is never changed after it is made (only window pods get a class id).
_bound_infos: dict[int, tuple[Pod, dict[str, str], bool, PodInfo]] = {}


def _bound_info(pod: Pod, ns_labels: dict[str, str], sidecar_ports: bool, memo: dict, seen: dict) -> PodInfo:
    hit = memo.get(id(pod))
    if hit is not None and hit[0] is pod and hit[2] == sidecar_ports and hit[1] == ns_labels:
        info = hit[3]
    else:
        info = PodInfo.of(pod, ns_labels, sidecar_ports=sidecar_ports)
    seen[id(pod)] = (pod, ns_labels, sidecar_ports, info)
    return info


def build_context(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    all_pending: bool = False,
    window_keys: Optional[list[str]] = None,
) -> SchedulingContext:
    """Parse once into infos; assume bound pods; order and group the pending window.

    ``window_keys`` restricts the window to those pending pods (the live scheduler's queue).
    The configured limits are the callers' to check first (``solver/limits.py``).
    """
    sidecar_ports = config.kubernetes_version == "1.34"
    ns_labels = snapshot.namespace_labels
    nodes = [NodeInfo.of(i, n) for i, n in enumerate(snapshot.nodes)]

    bound_pods = snapshot.bound_pods()
    pending_pods = window_pods(snapshot, config, all_pending=all_pending, window_keys=window_keys)
    global _bound_infos
    memo = _bound_infos
    seen: dict[int, tuple[Pod, dict[str, str], bool, PodInfo]] = {}
    infos_bound = [_bound_info(p, ns_labels.get(p.metadata.namespace, {}), sidecar_ports, memo, seen) for p in bound_pods]
    _bound_infos = seen
    window = [PodInfo.of(p, ns_labels.get(p.metadata.namespace, {}), sidecar_ports=sidecar_ports) for p in pending_pods]
    window.sort(key=queue_order_key)

    resources: set[str] = set()
    for node in nodes:
        resources.update(r for r in node.allocatable if is_tracked_resource(r))
    for info in (*infos_bound, *window):
        resources.update(info.requests)
    state = ClusterState(nodes, resources)

    notes: list[str] = []
    bound: list[PodInfo] = []
    unknown_nodes: set[str] = set()
    for info in infos_bound:
        idx = state.node_index.get(info.node_name)
        if idx is None:
            unknown_nodes.add(info.node_name)
            continue
        state.add(info, idx)
        bound.append(info)
    if unknown_nodes:
        notes.append(
            f"{len(unknown_nodes)} node(s) named by bound pods are not in the snapshot; their pods are ignored: "
            + ", ".join(sorted(unknown_nodes)[:5])
        )

    relevant = relevant_label_keys(snapshot, [*bound, *window])
    by_signature: dict[tuple, PodClass] = {}
    classes: list[PodClass] = []
    for info in window:
        sig = info.scheduling_signature(relevant)
        cls = by_signature.get(sig)
        if cls is None:
            cls = by_signature[sig] = PodClass(len(classes), [])
            classes.append(cls)
        info.class_id = cls.id
        cls.pods.append(info)

    image_nodes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for node in nodes:
        for name, size in node.images.items():
            entry = image_nodes[name]
            if entry[1] == 0:
                entry[0] = size
            entry[1] += 1

    return SchedulingContext(
        snapshot=snapshot,
        config=config,
        nodes=nodes,
        state=state,
        window=window,
        classes=classes,
        bound=bound,
        relevant_labels=relevant,
        pod_groups=dict(snapshot.pod_group_by_key),
        image_nodes={k: (v[0], v[1]) for k, v in image_nodes.items()},
        notes=notes,
    )
