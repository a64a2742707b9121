"""The provisioning problem, read off the engine: which pending pods need a place, which nodes
(existing, or of which shape) each pod class may go to, and how much room each has.

Eligibility is kube-scheduler's filter cycle (``filtering.Cycle``) for each class's first pod,
run on the cluster as the best plan leaves it plus one empty node of each shape (with the
shape's devices): every filter (taints, selectors, node affinity, ports, inter-pod affinity
against running pods, spread for one pod, resources against what is free, volumes — a
WaitForFirstConsumer claim whose StorageClass reaches the new node — and device claims) decides
where a class may go, alone; a class whose required pod affinity only pending pods meet may go
to a shape's nodes beside them (``support``). What couples pods of the window beyond resources —
a gang's one domain, pods that may not share a node (anti-affinity on hostname, host ports) or a
zone or rack (anti-affinity on that key), the devices of each kind a node has (``devices``) — is
the model's (``model``); the rest is checked by the validator and by deciding the provisioned
cluster with the same engine (``provision``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from models.config import SchedulerConfig
from models.plan import Plan
from models.resources import pod_requests
from models.snapshot import ClusterSnapshot, holds_node

from ..context import build_context
from ..filtering import Cycle, StaticFilters
from ..info import PodInfo, queue_order_key
from ..plugins import registry
from .devices import DEVICE, class_devices, free_devices
from .shapes import HOSTNAME, Shape, with_new_nodes
from .support import Filtered, Support
from .support import find as find_support

PODS = "pods"


@dataclass
class PodClass:
    id: int
    keys: list[str]
    requests: dict[str, int]
    one_per_node: bool  # a required anti-affinity on hostname that matches its own pods, or a rule's (host ports)
    gang: Optional[str]
    existing: list[int] = field(default_factory=list)  # indexes of existing nodes it may go to
    shapes: list[int] = field(default_factory=list)  # indexes of shapes it may go to
    # DRA devices one pod takes per bin ("node", i) / ("shape", s), by ``devices.DEVICE`` kind
    # name (empty: none, or not counted exactly — see ``devices``)
    devices: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)


@dataclass
class Problem:
    base: ClusterSnapshot  # the cluster as the plan leaves it, the pods to place pending
    shapes: list[Shape]
    classes: list[PodClass]
    existing: list[str]  # node names
    free: list[dict[str, int]]  # room left on each existing node (``pods``: pod slots)
    resources: list[str]
    gang_keys: dict[str, str]  # gang -> its required topology key
    existing_labels: list[dict[str, str]]
    nowhere: dict[str, str]  # pods no node of any shape could take, alone -> the filter's reason
    shape_devices: list[dict[str, int]] = field(default_factory=list)  # devices of a node of each shape, by kind
    # pairs of classes no node may hold together: a rule keeps them apart (``Plugin.apart``: their
    # host ports collide), or a required anti-affinity on hostname of one matches the other's pods
    apart: set[tuple[int, int]] = field(default_factory=set)
    # classes (a <= b) whose pods may not share a domain of these other topology keys (a required
    # anti-affinity of one matching the other; a == b: at most one pod of the class per domain)
    apart_in: dict[tuple[int, int], set[str]] = field(default_factory=dict)
    # classes that go to some bins only beside pods of other pending classes, or of their own
    # first pod (required pod affinity no running pod meets there: ``support``)
    support: dict[int, Support] = field(default_factory=dict)

    def room(self, where: tuple[str, int]) -> dict[str, int]:
        """A bin's room: an existing node's free room and devices, or a new node of a shape's."""
        if where[0] == "node":
            return self.free[where[1]]
        shape = self.shapes[where[1]]
        out = {r: shape.allocatable.get(r, 0) for r in self.resources}
        out.update(self.shape_devices[where[1]])
        return out


def build_problem(base: ClusterSnapshot, plan: Plan, shapes: list[Shape], config: SchedulerConfig, *,
                  all_pending: bool = False) -> Problem:
    """``base``: the snapshot with ``plan``'s placements bound (``explain.plan_applied``)."""
    keys = [u.pod for u in plan.unschedulable]
    snapshot = with_new_nodes(base, [(s, f"{s.name}-probe") for s in shapes])
    ctx = build_context(snapshot, config, all_pending=all_pending, window_keys=keys)
    static = StaticFilters(ctx.nodes, ctx.window)
    n_existing = len(base.nodes)
    classes: list[PodClass] = []
    nowhere: dict[str, str] = {}
    runs = []
    for cls in ctx.classes:
        cycle = Cycle(cls.rep, ctx.state, static, version=config.kubernetes_version)
        runs.append(Filtered(cls.id, cls.rep, cycle, [i for i, st in enumerate(cycle.statuses()) if st.ok]))
    # Where a class goes only beside pods of other pending classes (its required pod affinity).
    first = {cls.id: min(queue_order_key(p) for p in cls.pods) for cls in ctx.classes}
    found = find_support(runs, ctx.state, list(range(n_existing, n_existing + len(shapes))), first)
    ids: dict[int, int] = {}  # the context's class id -> the problem's
    for cls, run in zip(ctx.classes, runs):
        rep = cls.rep
        where = sorted(set(run.ok) | set(run.by))
        if not where:
            for p in cls.pods:
                nowhere[p.key] = run.cycle.fit_error()
            continue
        rows = class_devices(ctx, rep, where) if rep.pod.spec.resource_claims else None
        devices = {_bin(i, n_existing): row for i, row in (rows or {}).items() if row}
        ids[cls.id] = len(classes)
        classes.append(PodClass(
            id=len(classes), keys=[p.key for p in cls.pods], requests=dict(pod_requests(rep.pod)),
            one_per_node=_one_per_node(rep), gang=rep.group,
            existing=[i for i in where if i < n_existing], shapes=[i - n_existing for i in where if i >= n_existing],
            devices=devices))
    support = {ids[c]: Support(s.keys, {_bin(n, n_existing): tuple(ids[b] for b in by if b in ids)
                                        for (_, n), by in s.by.items()}, s.seed, s.level,
                                {_bin(n, n_existing): keys for (_, n), keys in s.need.items()})
               for c, s in found.items() if c in ids}
    resources = sorted({r for c in classes for r in c.requests} | {PODS})
    reps = {c.id: ctx.pod(c.keys[0]) for c in classes}
    # Only pairs where one side has anti-affinity or a rule keeping it apart can be kept apart.
    marked = {c.id for c in classes if (r := reps[c.id]) is not None and (r.anti_affinity or registry.apart(r))}
    pairs = [(a.id, b.id) for a in classes for b in classes if a.id <= b.id and (a.id in marked or b.id in marked)]
    apart = {(a, b) for a, b in pairs if a < b and _apart(reps[a], reps[b])}
    apart_in = {(a, b): wider for a, b in pairs if (wider := _apart_in(reps[a], reps[b]))}
    free = _free(base, resources)
    for i, room in enumerate(free):
        room.update(free_devices(ctx, i))
    return Problem(base, shapes, classes, [n.metadata.name for n in base.nodes], free,
                   resources, {k: g.spec.topology_key for k, g in ctx.pod_groups.items() if g.spec.topology_key},
                   [dict(n.metadata.labels) for n in base.nodes], nowhere,
                   [free_devices(ctx, n_existing + s) for s in range(len(shapes))], apart, apart_in, support)


def _bin(node: int, n_existing: int) -> tuple[str, int]:
    """A node index of the probed cluster as a bin: an existing node, or a shape's probe."""
    return ("node", node) if node < n_existing else ("shape", node - n_existing)


def _repelled_in(pod: PodInfo, other: PodInfo) -> set[str]:
    """The topology keys of ``pod``'s required anti-affinity terms that match ``other``."""
    return {t.topology_key for t in pod.anti_affinity if t.matches(other.namespace, other.labels, other.ns_labels)}


def _repels(pod: PodInfo, other: PodInfo) -> bool:
    """A required anti-affinity term of ``pod`` on hostname matches ``other``."""
    return HOSTNAME in _repelled_in(pod, other)


def _apart_in(a: Optional[PodInfo], b: Optional[PodInfo]) -> set[str]:
    if a is None or b is None:
        return set()
    return (_repelled_in(a, b) | _repelled_in(b, a)) - {HOSTNAME}


def _kept_apart(pod: PodInfo, other: PodInfo) -> bool:
    """Some rule never lets ``pod`` and ``other`` share a node (``registry.apart``: host ports)."""
    rule = registry.apart(pod)
    return rule is not None and rule(other)


def _one_per_node(pod: PodInfo) -> bool:
    return _repels(pod, pod) or _kept_apart(pod, pod)


def _apart(a: Optional[PodInfo], b: Optional[PodInfo]) -> bool:
    """Pods of classes ``a`` and ``b`` cannot share a node (a rule's, or anti-affinity either way)."""
    if a is None or b is None:
        return False
    return _kept_apart(a, b) or _repels(a, b) or _repels(b, a)


def _free(base: ClusterSnapshot, resources: list[str]) -> list[dict[str, int]]:
    used: dict[str, dict[str, int]] = {}
    for pod in base.pods:
        if holds_node(pod):
            room = used.setdefault(pod.spec.node_name, {})
            for name, value in pod_requests(pod).items():
                room[name] = room.get(name, 0) + value
            room[PODS] = room.get(PODS, 0) + 1
    out = []
    for node in base.nodes:
        taken = used.get(node.metadata.name, {})
        out.append({r: max(0, node.allocatable.get(r, 0) - taken.get(r, 0)) for r in resources})
    return out


def demand(cls: PodClass, resource: str) -> int:
    return 1 if resource == PODS else cls.requests.get(resource, 0)


def need(cls: PodClass, resource: str, where: tuple[str, int]) -> int:
    """What one pod of ``cls`` takes of ``resource`` in bin ``where`` (devices differ per bin)."""
    if resource.startswith(DEVICE):
        return cls.devices.get(where, {}).get(resource, 0)
    return demand(cls, resource)
