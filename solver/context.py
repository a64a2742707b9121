"""From a ``ClusterSnapshot`` to what every engine works on: node and pod infos, the cluster
state with bound pods assumed, the window of pending pods in queue order, and its equivalence
classes.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

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
    # The pods the decision was restricted to (``build_context``'s ``window_keys``), None: all.
    window_keys: Optional[frozenset[str]] = None

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
    if window_keys is None:
        return snapshot.pending_pods(config.scheduler_name, all_pending=all_pending)
    return snapshot.pending_among(window_keys, config.scheduler_name, all_pending=all_pending)


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


@dataclass(eq=False)
class _Assumed:
    """The bound pods of one snapshot assumed on its nodes: the costly part of a context (every
    bound pod added to a fresh state), kept for the next context."""

    snapshot: ClusterSnapshot  # held, so its id() is not reused while this lives
    sidecar_ports: bool
    ns_labels: dict[str, dict[str, str]]
    resources: frozenset[str]
    nodes: list[NodeInfo]
    state: ClusterState  # never handed out: each context gets a copy
    bound: list[PodInfo]
    unknown_nodes: frozenset[str]
    placed: dict[int, PodInfo]  # id(info) -> info, for every pod in ``state``
    vectors: dict[int, np.ndarray]  # id(info) -> its request vector in ``state``


# The last snapshot's assumed bound pods. The live scheduler builds a context for each window's
# snapshot, and a second for the validator's replay of a greedy plan. The second takes a copy of
# the first's state (a few ms) instead of adding every bound pod again; the next window's
# snapshot, which shares the Node objects and the unchanged pods' infos (``_bound_infos``), is
# brought up to date by removing the pods gone and adding the new ones (a window's binds)
# instead of being rebuilt. With 3,000 bound pods that was ~45 ms of a 10-pod window's ~65 ms.
# Anything else changed (a node, namespace labels, a new resource name, much of the cluster)
# builds afresh. tests/solver/test_context_memo.py holds both to reading the same.
_assumed: Optional[_Assumed] = None
_assumed_lock = threading.Lock()  # contexts may be built from several threads (bench, live)
# Above this share of the bound pods changed, a fresh build is as cheap as an update.
REBUILD_SHARE = 4


def _assume_bound(snapshot: ClusterSnapshot, sidecar_ports: bool, window: list[PodInfo], last: Optional[_Assumed]) -> _Assumed:
    """A state with every bound pod of ``snapshot`` on its node, over the resources of the nodes,
    the bound pods and the ``window``: ``last`` brought up to date where it can be."""
    global _bound_infos
    ns_labels = snapshot.namespace_labels
    memo = _bound_infos
    seen: dict[int, tuple[Pod, dict[str, str], bool, PodInfo]] = {}
    infos_bound = [
        _bound_info(p, ns_labels.get(p.metadata.namespace, {}), sidecar_ports, memo, seen) for p in snapshot.bound_pods()
    ]
    _bound_infos = seen

    same_nodes = (
        last is not None
        and last.sidecar_ports == sidecar_ports
        and len(last.nodes) == len(snapshot.nodes)
        and all(a is b for a, b in zip(last.snapshot.nodes, snapshot.nodes))
        and last.ns_labels == ns_labels
    )
    if last is not None and same_nodes:
        resources = set(last.resources)
        for info in (*infos_bound, *window):
            resources.update(info.requests)
        if resources == last.resources:
            updated = _update(last, snapshot, infos_bound)
            if updated is not None:
                return updated

    nodes = [NodeInfo.of(i, n) for i, n in enumerate(snapshot.nodes)]
    resources = {r for node in nodes for r in node.allocatable if is_tracked_resource(r)}
    for info in (*infos_bound, *window):
        resources.update(info.requests)
    state = ClusterState(nodes, resources)
    bound: list[PodInfo] = []
    unknown_nodes: set[str] = set()
    for info in infos_bound:
        idx = state.node_index.get(info.node_name)
        if idx is None:
            unknown_nodes.add(info.node_name)
            continue
        state.add(info, idx)
        bound.append(info)
    return _Assumed(
        snapshot, sidecar_ports, ns_labels, frozenset(resources), nodes, state, bound, frozenset(unknown_nodes),
        placed={id(info): info for info in bound}, vectors={id(info): state.vector(info) for info in bound},
    )


def _update(last: _Assumed, snapshot: ClusterSnapshot, infos_bound: list[PodInfo]) -> Optional[_Assumed]:
    """``last`` with the pods gone since removed and the new ones added, or None when so much
    changed that a fresh build costs no more. ``last`` is given up either way."""
    state, node_index = last.state, last.state.node_index
    bound = [info for info in infos_bound if info.node_name in node_index]
    unknown = frozenset(info.node_name for info in infos_bound if info.node_name not in node_index)
    now = {id(info): info for info in bound}
    gone = [info for k, info in last.placed.items() if k not in now]
    new = [info for k, info in now.items() if k not in last.placed]
    if (len(gone) + len(new)) * REBUILD_SHARE > max(len(bound), 1) and len(gone) + len(new) > 64:
        return None
    # Request vectors are cached by pod key, in a dict shared with every copy handed out: a pod
    # gone and one new under the same key (recreated, resized) must not meet there, and window
    # pods of earlier snapshots, cached there by those copies, must not linger. So the state
    # gets its own dict: the gone pods' vectors while they are removed, then the kept pods'.
    state._vectors = {info.key: last.vectors[id(info)] for info in gone}
    for info in gone:
        state.remove(info)
    vectors = {k: v for k, v in last.vectors.items() if k in now}
    state._vectors = {now[k].key: v for k, v in vectors.items()}
    for info in new:
        state.add(info, node_index[info.node_name])
        vectors[id(info)] = state.vector(info)
    # Pods on a node in the snapshot's order, as a fresh build has them (preemption breaks ties
    # between equally important victims by it): new pods were added last.
    position = {info.key: i for i, info in enumerate(bound)}
    for n, on in enumerate(state.pods_on):
        keys = list(on)
        if any(position[a] > position[b] for a, b in zip(keys, keys[1:])):
            state.pods_on[n] = {k: on[k] for k in sorted(keys, key=position.__getitem__)}
    return _Assumed(
        snapshot, last.sidecar_ports, last.ns_labels, last.resources, last.nodes, state, bound, unknown,
        placed=now, vectors=vectors,
    )


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
    global _assumed
    sidecar_ports = config.kubernetes_version == "1.34"
    ns_labels = snapshot.namespace_labels
    pending_pods = window_pods(snapshot, config, all_pending=all_pending, window_keys=window_keys)
    window = [PodInfo.of(p, ns_labels.get(p.metadata.namespace, {}), sidecar_ports=sidecar_ports) for p in pending_pods]
    window.sort(key=queue_order_key)

    with _assumed_lock:
        assumed = _assumed
        same = assumed is not None and assumed.snapshot is snapshot and assumed.sidecar_ports == sidecar_ports
        if assumed is None or not same or not all(r in assumed.resources for info in window for r in info.requests):
            _assumed = None  # given up before it is changed: a failure below leaves no half-updated state
            assumed = _assume_bound(snapshot, sidecar_ports, window, assumed)
            _assumed = assumed
        nodes, bound, unknown_nodes = assumed.nodes, list(assumed.bound), assumed.unknown_nodes
        state = assumed.state.copy()

    notes: list[str] = []
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
        window_keys=frozenset(window_keys) if window_keys is not None else None,
    )
