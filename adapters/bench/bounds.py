"""Bounds that put a placement next to the limit, not only next to another engine.

- ``max_placeable_bound``: no engine can place more pending pods than this. It relaxes the
  problem — each equivalence group of pending pods alone on its statically feasible nodes, and
  the whole window under one resource at a time — so it can be loose but never wrong.
- ``min_nodes_bound``: no placement hosts a set of pods on fewer nodes than this.

Functions of the models (with ``solver.interrupt``'s checks, so that Ctrl-C stops them). Static
feasibility uses small local checks (node name, cordon, taints, nodeSelector, required node
affinity) built on the models' own matchers; they follow kube-scheduler's filters but are not
the solver's predicate modules.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from models import ClusterSnapshot, Node, Pod, PodAffinityTerm, Taint, pod_group_key, pod_requests
from solver import interrupt

PODS = "pods"
HOSTNAME = "kubernetes.io/hostname"
# kube-scheduler's NodeUnschedulable filter: a cordoned node admits pods tolerating this taint.
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


# --------------------------------------------------------------------------- static feasibility


def statically_feasible(pod: Pod, node: Node) -> bool:
    """Whether ``pod`` may ever run on ``node`` whatever else runs there: NodeName,
    NodeUnschedulable, TaintToleration (NoSchedule, NoExecute) and NodeAffinity (nodeSelector,
    required node affinity)."""
    spec = pod.spec
    if spec.node_name and spec.node_name != node.name:
        return False
    taints = list(node.spec.taints)
    if node.spec.unschedulable:
        taints.append(UNSCHEDULABLE_TAINT)
    for taint in taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in spec.tolerations):
            return False
    labels = node.metadata.labels
    for key, value in spec.node_selector.items():
        if labels.get(key) != value:
            return False
    node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    return required is None or required.matches(node.name, labels)


def _static_key(pod: Pod) -> str:
    spec = pod.spec
    node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    return json.dumps(
        [
            spec.node_name,
            sorted(spec.node_selector.items()),
            required.model_dump(mode="json") if required is not None else None,
            [t.model_dump(mode="json") for t in spec.tolerations],
        ],
        sort_keys=True,
    )


# --------------------------------------------------------------------------- groups of pending pods


def _is_daemonset_pod(pod: Pod) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.metadata.owner_references)


def _equivalence_groups(pods: Iterable[Pod]) -> list[list[Pod]]:
    """Pods with equal spec (node name aside), labels, namespace and gang, in first-seen order."""
    spec_keys: dict[int, str] = {}
    groups: dict[tuple, list[Pod]] = {}
    for pod in pods:
        spec_key = spec_keys.get(id(pod.spec))
        if spec_key is None:
            spec_key = spec_keys[id(pod.spec)] = pod.spec.model_dump_json(exclude={"node_name"})
        key = (pod.metadata.namespace, tuple(sorted(pod.metadata.labels.items())), spec_key)
        groups.setdefault(key, []).append(pod)
    return list(groups.values())


def priority(pod: Pod) -> int:
    return pod.spec.priority or 0


def can_preempt(pod: Pod) -> bool:
    return pod.spec.preemption_policy != "Never"


def _required_anti_affinity(pod: Pod) -> list[PodAffinityTerm]:
    affinity = pod.spec.affinity
    if affinity is None or affinity.pod_anti_affinity is None:
        return []
    return list(affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution)


def _simple_scope(term: PodAffinityTerm, namespace: str) -> Optional[set[str]]:
    """Namespaces a term selects from, when that is plain (no namespaceSelector, no
    match/mismatchLabelKeys); None when this module does not reason about the term."""
    if term.namespace_selector is not None or term.match_label_keys or term.mismatch_label_keys:
        return None
    if term.label_selector is None:
        return None
    return set(term.namespaces) or {namespace}


# --------------------------------------------------------------------------- max placeable


@dataclass
class GroupBound:
    pod: str  # key of the group's first pod
    size: int  # pending pods in the group
    bound: int  # at most this many of them can be placed


@dataclass
class PlaceableBound:
    """``total`` is the bound; the rest says which relaxation gave what."""

    total: int
    pending: int
    sum_of_groups: int
    per_resource: dict[str, int] = field(default_factory=dict)
    groups: list[GroupBound] = field(default_factory=list)


class _Cluster:
    """Nodes as arrays: allocatable per resource, and what bound pods use at each priority."""

    def __init__(self, snapshot: ClusterSnapshot, resources: Sequence[str]) -> None:
        self.nodes = list(snapshot.nodes)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.resources = list(resources)
        n = len(self.nodes)
        self.alloc = np.zeros((len(self.resources), n), dtype=np.int64)
        for j, node in enumerate(self.nodes):
            allocatable = node.allocatable
            for i, r in enumerate(self.resources):
                self.alloc[i, j] = allocatable.get(r, 0)
        self.bound = [p for p in snapshot.bound_pods() if p.spec.node_name in self.index]
        self._usage = self.usage_of(self.bound)
        self._free: dict[Optional[int], np.ndarray] = {}
        self._static: dict[str, np.ndarray] = {}
        self._unevictable: dict[Optional[int], list[Pod]] = {}

    def free(self, preemptor_priority: Optional[int]) -> np.ndarray:
        """Room left by bound pods a pod of this priority cannot preempt (None: no preemption)."""
        cached = self._free.get(preemptor_priority)
        if cached is None:
            used = np.zeros_like(self.alloc)
            for level, use in self._usage.items():
                if preemptor_priority is None or level >= preemptor_priority:
                    used += use
            cached = self._free[preemptor_priority] = np.maximum(self.alloc - used, 0)
        return cached

    def unevictable(self, top: Optional[int]) -> list[Pod]:
        """Bound pods no window pod can evict: at or above ``top``, the window's highest
        preempting priority (all of them when none may preempt)."""
        kept = self._unevictable.get(top)
        if kept is None:
            kept = self._unevictable[top] = [p for p in self.bound if top is None or priority(p) >= top]
        return kept

    def usage(self) -> dict[int, np.ndarray]:
        """Per priority of bound pods: what they use, resource x node."""
        return self._usage

    def usage_of(self, pods: Iterable[Pod]) -> dict[int, np.ndarray]:
        """Per priority of ``pods`` (bound ones): what they use, resource x node."""
        out: dict[int, np.ndarray] = {}
        for pod in interrupt.checked(pods):
            use = out.setdefault(priority(pod), np.zeros_like(self.alloc))
            j = self.index[pod.spec.node_name]
            requests = pod_requests(pod)
            for i, r in enumerate(self.resources):
                use[i, j] += 1 if r == PODS else requests.get(r, 0)
        return out

    def pools(self) -> list[np.ndarray]:
        """The nodes as pools, each the nodes every static mask asked so far treats alike."""
        if not self._static:
            return [np.arange(len(self.nodes))]
        masks = np.array(list(self._static.values()), dtype=bool)
        _, pool_of = np.unique(masks.T, axis=0, return_inverse=True)
        pool_of = pool_of.reshape(-1)
        return [np.flatnonzero(pool_of == k) for k in range(int(pool_of.max()) + 1)]

    def static_mask(self, pod: Pod) -> np.ndarray:
        key = _static_key(pod)
        mask = self._static.get(key)
        if mask is None:
            mask = self._static[key] = np.array([statically_feasible(pod, n) for n in self.nodes], dtype=bool)
        return mask


def _per_node_capacity(cluster: _Cluster, pod: Pod, top: Optional[int]) -> np.ndarray:
    """How many pods like ``pod`` each node could take, alone, resource by resource, in the room
    of bound pods no window pod can evict (``top``: the window's highest preempting priority).
    Not only the pod's own preemption counts: room a higher pod's victims leave is anyone's."""
    free = cluster.free(top)
    requests = pod_requests(pod)
    counts = np.where(cluster.static_mask(pod), np.iinfo(np.int64).max, 0)
    for i, r in enumerate(cluster.resources):
        need = 1 if r == PODS else requests.get(r, 0)
        if need > 0:
            counts = np.minimum(counts, free[i] // need)
    for r, need in requests.items():  # a resource no node offers
        if need > 0 and r not in cluster.resources:
            return np.zeros_like(counts)
    return counts


def _apply_anti_affinity(cluster: _Cluster, pod: Pod, counts: np.ndarray, top: Optional[int]) -> int:
    """The group's total after its required anti-affinity terms: no node in a domain holding a
    matching pod no window pod can evict (below ``top``, any preemptor may), and at most one pod
    per domain when the term matches the group's own pods."""
    total = int(counts.sum())
    ns, labels = pod.metadata.namespace, pod.metadata.labels
    for term in _required_anti_affinity(pod):
        scope, selector = _simple_scope(term, ns), term.label_selector
        if scope is None or selector is None:
            continue
        key = term.topology_key
        domain = [n.metadata.labels.get(key) for n in cluster.nodes]
        blocked = set()
        for other in cluster.unevictable(top):  # a pod preemption could remove blocks nothing
            if other.metadata.namespace not in scope or not selector.matches(other.metadata.labels):
                continue
            value = domain[cluster.index[other.spec.node_name]]
            if value is not None:
                blocked.add(value)
        allowed = np.array([d is None or d not in blocked for d in domain], dtype=bool)
        counts = np.where(allowed, counts, 0)
        if ns in scope and selector.matches(labels):
            keyless = sum(int(c) for c, d in zip(counts, domain) if d is None)
            domains = {d for c, d in zip(counts, domain) if d is not None and c > 0}
            total = min(total, keyless + len(domains))
        total = min(total, int(counts.sum()))
    return total


@dataclass
class GroupCaps:
    """The window's pending pods as equivalence groups, each bounded alone: ``counts[g][n]`` pods
    of group ``g`` node ``n`` could take by its resources alone (0 where it may never run), and
    ``caps[g]`` the group's total after its own anti-affinity, its size and its gang's minMember."""

    cluster: _Cluster
    groups: list[list[Pod]]
    counts: list[np.ndarray]
    caps: list[int]
    reach: np.ndarray  # nodes some group could use


def group_caps(snapshot: ClusterSnapshot, pods: list[Pod]) -> GroupCaps:
    """``pods`` as equivalence groups, each bounded alone (``GroupCaps``)."""
    resources = sorted({r for p in pods for r, v in pod_requests(p).items() if v > 0} | {PODS})
    cluster = _Cluster(snapshot, resources)
    groups = _equivalence_groups(pods)
    top = highest_preemptor(pods)
    caps: list[int] = []
    counts: list[np.ndarray] = []
    reach = np.zeros(len(cluster.nodes), dtype=bool)
    for group in interrupt.checked(groups, every=1):  # Ctrl-C: a group's checks can take a second
        alone = _per_node_capacity(cluster, group[0], top)
        reach |= alone > 0
        counts.append(alone)
        caps.append(min(len(group), _apply_anti_affinity(cluster, group[0], alone, top)))

    # Gangs: a group places nothing unless its members can reach minMember together.
    bound_members = gang_members_bound(cluster.bound)
    gang_cap: dict[str, int] = defaultdict(int)
    for group, cap in zip(groups, caps):
        gk = pod_group_key(group[0])
        if gk:
            gang_cap[gk] += cap
    for g, group in enumerate(groups):
        gk = pod_group_key(group[0])
        pg = snapshot.pod_group_by_key.get(gk) if gk else None
        if gk and pg is not None and gang_cap[gk] < pg.spec.min_member - bound_members[gk]:
            caps[g] = 0
    return GroupCaps(cluster, groups, counts, caps, reach)


def highest_preemptor(pods: Iterable[Pod]) -> Optional[int]:
    """The highest priority among pods that may preempt (None: none may): bound pods below it
    are the ones some window pod could evict."""
    preemptors = [priority(p) for p in pods if can_preempt(p)]
    return max(preemptors) if preemptors else None


def gang_members_bound(bound: Iterable[Pod]) -> dict[str, int]:
    """Members of each gang already running."""
    members: dict[str, int] = defaultdict(int)
    for pod in bound:
        gk = pod_group_key(pod)
        if gk:
            members[gk] += 1
    return members


def placeable_bound(snapshot: ClusterSnapshot, pending: Optional[Iterable[Pod]] = None,
                    grouped: Optional[GroupCaps] = None) -> PlaceableBound:
    """Upper bound on how many of ``pending`` (default: the snapshot's pending pods) can be placed,
    with the relaxations that gave it. See ``max_placeable_bound``. ``grouped``: ``group_caps`` of
    the same snapshot and pods, when the caller has them already."""
    pods = list(snapshot.pending_pods() if pending is None else pending)
    if not pods or not snapshot.nodes:
        return PlaceableBound(total=0, pending=len(pods), sum_of_groups=0)
    found = grouped if grouped is not None else group_caps(snapshot, pods)
    cluster, groups, caps, reach = found.cluster, found.groups, found.caps, found.reach

    # One resource at a time over the whole window: smallest requests first fill the room.
    room = cluster.free(highest_preemptor(pods))
    per_resource: dict[str, int] = {}
    for i, r in enumerate(cluster.resources):
        left = int(room[i][reach].sum())
        count = 0
        items = sorted(((1 if r == PODS else pod_requests(group[0]).get(r, 0)), cap) for group, cap in zip(groups, caps))
        for need, cap in items:
            take = cap if need == 0 else min(cap, left // need)
            count += take
            left -= take * need
        per_resource[r] = count
    sum_of_groups = sum(caps)
    return PlaceableBound(
        total=min([sum_of_groups, *per_resource.values()]),
        pending=len(pods),
        sum_of_groups=sum_of_groups,
        per_resource=per_resource,
        groups=[GroupBound(group[0].key, len(group), cap) for group, cap in zip(groups, caps)],
    )


def max_placeable_bound(snapshot: ClusterSnapshot, pending: Optional[Iterable[Pod]] = None,
                        grouped: Optional[GroupCaps] = None) -> int:
    """No engine places more of ``pending`` than this.

    Each equivalence group of pending pods (same spec, labels, namespace) is bounded alone: the
    pods each statically feasible node could take if only its resources counted (room left by
    bound pods no window pod can preempt, resource by resource: a victim's room is anyone's once
    it is gone, not only its preemptor's), less domains ruled out or capped to
    one by the group's required anti-affinity, capped by the group's size; a gang's groups count
    for nothing when together they cannot reach minMember. The sum is then capped again by each
    resource over the whole window, smallest requests first. Topology spread, ports, inter-group
    anti-affinity and the order of preemption are ignored: the bound can be loose, never low.
    """
    return placeable_bound(snapshot, pending, grouped).total


# --------------------------------------------------------------------------- min nodes


def min_nodes_bound(snapshot: ClusterSnapshot, pods: Optional[Iterable[Pod]] = None) -> int:
    """No placement hosts ``pods`` (default: bound and pending) on fewer of the snapshot's nodes.

    Per resource (``pods`` included), the fewest nodes whose capacity adds up to the total
    request, taking the largest nodes first — at least ``ceil(total / largest node)``; the
    maximum over resources, and over the sizes of groups that keep one pod per host by required
    anti-affinity. DaemonSet pods already bound are not counted as load; what they use is taken
    off their node's capacity instead, since they run on every node that stays. 0 for no pods.
    """
    chosen = list(pods) if pods is not None else snapshot.bound_pods() + snapshot.pending_pods()
    index = {n.name: i for i, n in enumerate(snapshot.nodes)}
    daemon = [p for p in chosen if _is_daemonset_pod(p) and p.spec.node_name in index]
    load = [p for p in chosen if not (_is_daemonset_pod(p) and p.spec.node_name in index)]
    if not load or not snapshot.nodes:
        return 0
    totals: dict[str, int] = defaultdict(int)
    for pod in interrupt.checked(load):
        for r, v in pod_requests(pod).items():
            totals[r] += v
        totals[PODS] += 1
    overhead: dict[str, np.ndarray] = {r: np.zeros(len(index), dtype=np.int64) for r in totals}
    for pod in daemon:
        j = index[pod.spec.node_name]
        requests = pod_requests(pod)
        for r in totals:
            overhead[r][j] += 1 if r == PODS else requests.get(r, 0)
    need = 1
    for r, total in totals.items():
        if total <= 0:
            continue
        caps = np.array([n.allocatable.get(r, 0) for n in snapshot.nodes], dtype=np.int64) - overhead[r]
        caps = np.sort(np.maximum(caps, 0))[::-1]
        reached = np.searchsorted(np.cumsum(caps), total)  # first prefix with sum >= total
        need = max(need, int(min(reached + 1, np.count_nonzero(caps)) if caps.any() else 1))
    # One pod per host: a group whose own required anti-affinity on the hostname matches itself.
    for group in _equivalence_groups(p for p in load if _required_anti_affinity(p)):
        pod = group[0]
        for term in _required_anti_affinity(pod):
            scope, selector = _simple_scope(term, pod.metadata.namespace), term.label_selector
            if (scope and selector is not None and term.topology_key == HOSTNAME and pod.metadata.namespace in scope
                    and selector.matches(pod.metadata.labels)):
                need = max(need, len(group))
    return need
