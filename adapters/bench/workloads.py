"""Deterministic benchmark workloads: clusters and pending pods as Kubernetes API dicts.

Each workload is a function ``(scale, seed) -> Workload`` modelled on a kube-scheduler
``scheduler_perf`` test case or on what batch users run. The objects are plain dicts exactly as
``kubectl get -o json`` prints them, so the same workload can be parsed into a
``ClusterSnapshot`` (``to_snapshot``), written out as a file (``dump``) or preloaded into an API
server. A seed fixes every object; the same seed gives identical objects.

Scales: ``quick`` is a smoke run (every workload through two engines in about a minute on two
cores), ``medium`` is about 1,000 nodes, ``large`` about 5,000 nodes and 10,000+ pods.

Every benchmark workload carries a known placement (a *witness*, ``metadata["witness"]``, with
the evictions it needs). For all but ``gang`` it places every pending pod: "placed == pending"
is reachable, and a one-at-a-time scheduler falling short of it is measurably worse, not merely
different. For ``gang`` it is a good, not necessarily optimal, choice of gangs.
Each generator's docstring says where kube-scheduler's greedy ``scheduleOne`` loses and why a
joint placement does not.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from models import DEFAULT_SCHEDULER_NAME, ClusterSnapshot

from .defaults import REAL_SHAPED_NAMES, SCALE_TARGET_NAMES, WORKLOAD_NAMES
from .kube import (
    SAFE_TO_EVICT,
    ZONES,
    Factory,
    Owner,
    PodTemplate,
    label_in,
    match_labels,
    paused_gc,
    required_anti_affinity,
    required_node_affinity,
    tolerate,
    zone_spread,
)
from .parse import to_snapshot

SCALES = ("quick", "medium", "large")
# Nodes per workload at each scale; quick sizes are per workload (see ``_QUICK``).
_SCALE_NODES = {"medium": 1000, "large": 5000}
_QUICK = {
    "basic": 50,
    "node-affinity": 50,
    "anti-affinity": 48,
    "spread": 48,
    "preemption": 40,
    "gang": 40,
    "topology-gang": 24,
    "fragmentation": 50,
    "gpu-pools": 40,
    "mixed": 100,
}
GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}


@dataclass
class Workload:
    """One generated benchmark input.

    ``objects`` are API dicts (Nodes, Pods, PriorityClasses, PodDisruptionBudgets, PodGroups) in
    creation order. ``metadata`` holds at least: ``scale``, ``seed``, ``nodes`` (count), ``pods``
    (pending count), ``running`` (bound pod count), ``pending`` (keys ``ns/name`` of the pods
    waiting for cpsat-scheduler, in creation order), ``achievable`` (pending pods a known
    placement places, or None) and ``witness`` (that placement, pod key -> node name, or None)
    with ``witness_evictions`` (running pod keys it evicts).
    """

    name: str
    description: str
    objects: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def pending(self) -> list[str]:
        return self.metadata["pending"]

    def snapshot(self) -> ClusterSnapshot:
        return to_snapshot(self.objects)


@dataclass
class _Part:
    """What a workload builder knows about its own pods: a placement of them, and its victims."""

    witness: Optional[dict[str, str]] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)


def _gc_paused(fn: Callable[..., Workload]) -> Callable[..., Workload]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Workload:
        with paused_gc():
            return fn(*args, **kwargs)

    return wrapper


def _key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def _node_count(name: str, scale: str) -> int:
    if scale == "quick":
        return _QUICK[name]
    if scale not in _SCALE_NODES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    return _SCALE_NODES[scale]


def _nodes(f: Factory, prefix: str, count: int, **kwargs: Any) -> list[str]:
    """``count`` nodes named ``<prefix>-0000``..., zones round-robin."""
    width = max(4, len(str(count - 1)))
    names = []
    for i in range(count):
        name = f"{prefix}-{i:0{width}d}"
        f.node(name, zone=ZONES[i % len(ZONES)], **kwargs)
        names.append(name)
    return names


def _assign(pods: list[dict[str, Any]], slots: list[str], witness: dict[str, str]) -> list[str]:
    """Put ``pods`` on the first slots (a slot is a node name, once per pod it can take); return
    the slots left over."""
    if len(pods) > len(slots):
        raise AssertionError("workload construction placed more pods than it made room for")
    for pod, node in zip(pods, slots):
        witness[_key(pod)] = node
    return slots[len(pods):]


def _slots(nodes: list[str], per_node: int) -> list[str]:
    """``per_node`` slots on each node, taken round-robin across the nodes."""
    return [n for _ in range(per_node) for n in nodes]


def _round_robin(nodes: list[str], room: dict[str, int]) -> list[str]:
    """``room[n]`` slots on each node, one per node per round."""
    return [n for r in range(max(room.values(), default=0)) for n in nodes if room[n] > r]


# --------------------------------------------------------------------------- basic


def _basic(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    nodes = _nodes(f, prefix, n, cpu="4", memory="16Gi")
    order = list(nodes)
    f.rng.shuffle(order)
    kinds = [("api", "500m", "1Gi"), ("worker", "1", "2Gi"), ("session-cache", "250m", "2Gi")]
    kind_of = [f.rng.randrange(len(kinds)) for _ in order]
    for k, (app, cpu, memory) in enumerate(kinds):
        template = PodTemplate(app, {"cpu": cpu, "memory": memory})
        f.pods(f.replicaset(app, ns), template, [node for node, j in zip(order, kind_of) if j == k])
    # scheduler_perf's pod-default: 100m CPU, 500Mi.
    web = PodTemplate("web", {"cpu": "100m", "memory": "500Mi"})
    pods = f.pods(f.replicaset("web", ns), web, [None] * (2 * n))
    part = _Part()
    _assign(pods, _slots(nodes, 2), part.witness)
    return part


def basic(scale: str = "quick", seed: int = 0) -> Workload:
    """Uniform nodes (4 CPU, 16Gi, 110 pods, three zones) each running one pod of one of three
    Deployments, and two uniform pending pods per node (scheduler_perf SchedulingBasic).

    Capacity is ample: both engines should place every pod. This workload measures decision
    throughput and latency, not placement quality.
    """
    return _single("basic", scale, seed, _basic)


# --------------------------------------------------------------------------- node affinity


def _node_affinity(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    per_pool = max(1, round(n / 5))
    pools: list[list[str]] = []
    for k in range(5):
        disk = "ssd" if k in (2, 3) else "hdd"
        names = _nodes(f, f"{prefix}-p{k}", per_pool, cpu="4", memory="16Gi", labels={"node-pool": f"pool-{k}", "disktype": disk})
        pools.append(names)

    def template(app: str, **kw: Any) -> PodTemplate:
        return PodTemplate(app, {"cpu": "1", "memory": "2Gi"}, **kw)

    frontend = template("frontend", affinity=required_node_affinity({"key": "node-pool", "operator": "In", "values": ["pool-0", "pool-1"]}))
    search = template("search", affinity=required_node_affinity({"key": "disktype", "operator": "In", "values": ["ssd"]}))
    analytics = template("analytics", affinity=required_node_affinity({"key": "node-pool", "operator": "In", "values": ["pool-1"]}))
    ingest = template("ingest", node_selector={"node-pool": "pool-2"})
    batch = template(
        "batch",
        affinity=required_node_affinity(
            {"key": "disktype", "operator": "NotIn", "values": ["ssd"]},
            {"key": "node-pool", "operator": "NotIn", "values": ["pool-0", "pool-1"]},
        ),
    )
    P = per_pool
    made = {
        t.app: f.pods(f.replicaset(t.app, ns), t, [None] * count)
        for t, count in ((frontend, 6 * P), (search, P), (analytics, 2 * P), (ingest, P), (batch, P))
    }
    part = _Part()
    w = part.witness
    pool1 = _assign(made["analytics"], _slots(pools[1], 4), w)
    if _assign(made["frontend"], _slots(pools[0], 4) + pool1, w):
        raise AssertionError("pools 0 and 1 should hold frontend and analytics exactly")
    _assign(made["ingest"], _slots(pools[2], 4), w)
    _assign(made["search"], _slots(pools[3], 4), w)
    _assign(made["batch"], _slots(pools[4], 4), w)
    return part


def node_affinity(scale: str = "quick", seed: int = 0) -> Workload:
    """Five labelled node pools and pending Deployments with required node affinity to subsets
    of them (scheduler_perf SchedulingNodeAffinity): ``frontend`` may use pools 0 and 1,
    ``analytics`` (created after it) only pool 1, others pool 2, the ssd pools, or pool 4.

    Pools 0 and 1 hold exactly what frontend and analytics need together (1-CPU pods, four per
    node). Greedy spreads the earlier frontend pods evenly over both pools (LeastAllocated: one
    more pod on every node before a second), so pool 1 is three-quarters full when analytics
    arrives and half of analytics is stranded; a joint placement fills pool 0 with frontend and
    places every pod.
    """
    return _single("node-affinity", scale, seed, _node_affinity)


# --------------------------------------------------------------------------- pod anti-affinity


def _anti_affinity(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    ssd_count = max(2, n // 3)
    roles = ["ssd"] * ssd_count + ["hdd"] * (n - ssd_count)
    f.rng.shuffle(roles)
    nodes = []
    width = max(4, len(str(n - 1)))
    for i, role in enumerate(roles):
        name = f"{prefix}-{i:0{width}d}"
        f.node(name, cpu="4", memory="16Gi", zone=ZONES[i % 3], labels={"disktype": role})
        nodes.append(name)
    ssd = [x for x, r in zip(nodes, roles) if r == "ssd"]
    hdd = [x for x, r in zip(nodes, roles) if r == "hdd"]

    # cache and search are memory-heavy: at most one of either per host.
    exclusive = required_anti_affinity(label_in("app", ["cache", "search"]))
    cache = PodTemplate("cache", {"cpu": "1", "memory": "4Gi"}, affinity=exclusive)
    search = PodTemplate(
        "search",
        {"cpu": "1", "memory": "4Gi"},
        affinity={**exclusive, **required_node_affinity({"key": "disktype", "operator": "In", "values": ["ssd"]})},
    )
    web = PodTemplate("web", {"cpu": "500m", "memory": "1Gi"}, affinity=required_anti_affinity(match_labels(app="web")))
    batch = PodTemplate("nightly-batch", {"cpu": "1", "memory": "2Gi"}, restart_policy="Never")

    # Running: a batch job on every hdd node, cache on a quarter of them, web on a tenth of all.
    f.pods(f.job("nightly-batch", ns), batch, list(hdd))
    cache_owner, web_owner = f.replicaset("cache", ns), f.replicaset("web", ns)
    running_cache = hdd[: max(1, len(hdd) // 4)]
    f.pods(cache_owner, cache, list(running_cache))
    web_nodes = list(nodes)
    f.rng.shuffle(web_nodes)
    running_web = web_nodes[: max(1, n // 10)]
    f.pods(web_owner, web, list(running_web))

    free_hdd = hdd[len(running_cache):]
    web_free = web_nodes[len(running_web):]
    web_pending = len(web_free) - max(1, n // 10)
    pending_cache = f.pods(cache_owner, cache, [None] * len(free_hdd))
    pending_web = f.pods(web_owner, web, [None] * web_pending)
    pending_search = f.pods(f.replicaset("search", ns), search, [None] * len(ssd))
    part = _Part()
    _assign(pending_cache, free_hdd, part.witness)
    _assign(pending_web, web_free, part.witness)
    _assign(pending_search, ssd, part.witness)
    return part


def anti_affinity(scale: str = "quick", seed: int = 0) -> Workload:
    """Required pod anti-affinity on ``kubernetes.io/hostname`` (scheduler_perf
    SchedulingPodAntiAffinity), in two shapes:

    - ``web`` pods repel their own app: one per node, some nodes already taken by running web.
    - ``cache`` and ``search`` pods repel both apps: at most one of either per node. A quarter
      of the hdd nodes already run a cache pod; ``search`` must also run on ssd nodes (a third
      of the cluster). Pending cache pods number exactly the free hdd nodes, search pods exactly
      the ssd nodes.

    Cache pods come first. The hdd nodes also run a batch job, so LeastAllocated scores the
    empty ssd nodes higher and greedy puts cache there, one per node; when search arrives the
    ssd nodes are taken and search is stranded (up to a third of the cluster's worth of pods).
    Placed jointly, cache goes to the free hdd nodes, search to ssd, and every pod is placed.
    """
    return _single("anti-affinity", scale, seed, _anti_affinity)


# --------------------------------------------------------------------------- topology spread


def _spread(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    Z = max(4, (n // 3) // 4 * 4)  # nodes per zone, a multiple of 4
    zones: dict[str, list[str]] = {z: [] for z in ZONES}
    width = max(4, len(str(3 * Z - 1)))
    for i in range(3 * Z):
        zone = ZONES[i % 3]
        small = zone == ZONES[2]  # the third zone has half-size nodes
        name = f"{prefix}-{i:0{width}d}"
        f.node(
            name,
            cpu="2" if small else "4",
            memory="8Gi" if small else "16Gi",
            zone=zone,
            instance_type="bench.large" if small else "bench.xlarge",
        )
        zones[zone].append(name)
    a, b = zones[ZONES[0]], zones[ZONES[1]]
    unit = {"cpu": "1", "memory": "3Gi"}

    def spread_template(app: str, **kw: Any) -> PodTemplate:
        return PodTemplate(app, unit, spread=(zone_spread(match_labels(app=app), **kw),))

    checkout, catalog = spread_template("checkout"), spread_template("catalog")
    search = PodTemplate(
        "search",
        unit,
        spread=({**zone_spread(match_labels(app="search")), "matchLabelKeys": ["pod-template-hash"]},),
    )
    filler = PodTemplate("batch-worker", unit)
    checkout_owner, catalog_owner = f.replicaset("checkout", ns), f.replicaset("catalog", ns)
    # Already skewed: checkout Z/2 in zone a and Z/4 in b, catalog the mirror image, none in c.
    f.pods(checkout_owner, checkout, a[: Z // 2] + b[: Z // 4])
    f.pods(catalog_owner, catalog, b[Z // 4 : Z // 4 + Z // 2] + a[Z // 2 : Z // 2 + Z // 4])
    running = set(a[: 3 * Z // 4] + b[: 3 * Z // 4])  # one pod each
    free = {}
    for z in ZONES:
        room = {x: (2 if z == ZONES[2] else 4) - (x in running) for x in zones[z]}
        free[z] = _round_robin(zones[z], room)

    pending_filler = f.pods(f.replicaset("batch-worker", ns), filler, [None] * (4 * Z))
    pending_checkout = f.pods(checkout_owner, checkout, [None] * (3 * Z // 4))
    pending_catalog = f.pods(catalog_owner, catalog, [None] * (3 * Z // 4))
    pending_search = f.pods(f.replicaset("search", ns), search, [None] * (3 * Z))

    part = _Part()
    w = part.witness
    fa, fb, fc = free[ZONES[0]], free[ZONES[1]], free[ZONES[2]]
    # Final counts: checkout and catalog Z/2 per zone, search Z per zone; zone c exactly full.
    fb = _assign(pending_checkout[: Z // 4], fb, w)
    fc = _assign(pending_checkout[Z // 4 :], fc, w)
    fa = _assign(pending_catalog[: Z // 4], fa, w)
    fc = _assign(pending_catalog[Z // 4 :], fc, w)
    fa = _assign(pending_search[:Z], fa, w)
    fb = _assign(pending_search[Z : 2 * Z], fb, w)
    fc = _assign(pending_search[2 * Z :], fc, w)
    rest = _assign(pending_filler, fa + fb, w)
    if rest or fc:
        raise AssertionError("spread construction should fill the cluster exactly")
    return part


def spread(scale: str = "quick", seed: int = 0) -> Workload:
    """Zone topology spread, ``DoNotSchedule`` with maxSkew 1 (scheduler_perf
    TopologySpreading), over three zones where the third has half-size nodes.

    ``checkout`` and ``catalog`` are already skewed (half a zone's worth in one zone, a quarter
    in another, none in the third) and scale up; ``search`` spreads from scratch, with
    ``matchLabelKeys: [pod-template-hash]``; a ``batch-worker`` Deployment without constraints
    arrives first. Everything fits exactly, and only if the small zone is kept for the spread
    pods: with maxSkew 1, each spread pod the small zone cannot take also bars one from each
    of the other zones.

    Greedy places the batch workers first and LeastAllocated sends a share of them to the
    empty small nodes, so the spread Deployments hit their skew limit early. A joint placement
    puts the batch workers in the large zones and places every pod while repairing the skew.
    """
    return _single("spread", scale, seed, _spread)


# --------------------------------------------------------------------------- preemption


def _preemption(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    service_count = max(2, n // 4)
    protected_count = max(1, service_count // 4)
    batch_count = n - service_count - protected_count
    roles = ["service"] * service_count + ["protected"] * protected_count + ["batch"] * batch_count
    f.rng.shuffle(roles)
    width = max(4, len(str(n - 1)))
    nodes = []
    for i in range(n):
        name = f"{prefix}-{i:0{width}d}"
        f.node(name, cpu="4", memory="16Gi", zone=ZONES[i % 3])
        nodes.append(name)
    by_role = {r: [x for x, q in zip(nodes, roles) if q == r] for r in ("service", "protected", "batch")}

    f.priority_class("low-batch", 100, description="Batch work that may be preempted first.")
    f.priority_class("low-service", 1000, description="Internal services that may be preempted.")
    f.priority_class("high-priority", 100000, description="Production traffic.")
    half = {"cpu": "2", "memory": "6Gi"}

    def template(app: str, cls: str, value: int, requests: dict[str, str], **kw: Any) -> PodTemplate:
        return PodTemplate(app, requests, priority=value, priority_class=cls, **kw)

    batch = template("nightly-etl", "low-batch", 100, half, restart_policy="Never")
    checkpoint = template("checkpoint", "low-batch", 100, half)
    payments = template("payments", "high-priority", 100000, half)
    catalog = template("catalog", "low-service", 1000, half)
    # Created a round at a time (one pod on every batch node, then a second), as a Job's pods
    # start: the latest-started victims are then on different nodes.
    batch_pods = f.pods(f.job("nightly-etl", ns), batch, by_role["batch"] * 2)
    f.pods(f.statefulset("checkpoint", ns), checkpoint, [x for x in by_role["protected"] for _ in range(2)])
    f.pdb("checkpoint", ns, match_labels(app="checkpoint"), expected=2 * protected_count, min_available=2 * protected_count)
    f.pods(f.replicaset("payments", ns), payments, list(by_role["service"]))
    f.pdb("payments", ns, match_labels(app="payments"), expected=service_count, max_unavailable=1)
    catalog_pods = f.pods(f.replicaset("catalog", ns), catalog, list(by_role["service"]))

    api = template("api", "high-priority", 100000, half)
    trainer = template("trainer", "high-priority", 100000, {"cpu": "4", "memory": "12Gi"}, restart_policy="Never")
    pending_api = f.pods(f.replicaset("api", ns), api, [None] * service_count)
    pending_trainer = f.pods(f.job("trainer", ns), trainer, [None] * batch_count)

    part = _Part()
    _assign(pending_api, by_role["service"], part.witness)
    _assign(pending_trainer, by_role["batch"], part.witness)
    part.evictions = [_key(p) for p in catalog_pods + batch_pods]
    return part


def preemption(scale: str = "quick", seed: int = 0) -> Workload:
    """A full cluster of lower-priority pods and a wave of high-priority ones (scheduler_perf
    Preemption), with PriorityClasses and a PodDisruptionBudget.

    Every node runs two 2-CPU pods: batch nodes a ``nightly-etl`` Job (priority 100); a few
    nodes a ``checkpoint`` StatefulSet (priority 100) whose PDB allows no disruption; service
    nodes one ``payments`` pod at the wave's own priority (not preemptible) and one ``catalog``
    pod (priority 1000). The wave: 2-CPU ``api`` pods, one per service node, then whole-node
    ``trainer`` pods, one per batch node.

    Greedy's DefaultPreemption picks, for each api pod, the node whose victims have the lowest
    priority — a batch node, never a service node — and among those the one whose victim started
    last, so the api pods land on different batch nodes and each blocks a trainer. The trainers
    left over either go unplaced or break the checkpoint PDB. Jointly, api pods evict catalog on
    the service nodes, trainers the batch jobs: every high-priority pod is placed and no PDB is
    violated.
    """
    return _single("preemption", scale, seed, _preemption)


# --------------------------------------------------------------------------- gangs

# (name, member CPU in millicores, memory, members range, share of gang CPU demand)
_GANG_KINDS = (
    ("train", 3500, "12Gi", (2, 4), 0.5),
    ("sim", 2000, "6Gi", (4, 8), 0.25),
    ("etl", 1000, "3Gi", (8, 16), 0.25),
)
_GANG_OVERCOMMIT = 1.4  # total gang CPU demand / cluster CPU


class _BestFit:
    """Free CPU per node kept in buckets, to place pods best-fit without scanning every node."""

    def __init__(self, nodes: list[str], free: int) -> None:
        self.buckets: dict[int, list[str]] = {free: list(reversed(nodes))}

    def slots(self, size: int) -> int:
        return sum(len(v) * (k // size) for k, v in self.buckets.items())

    def take(self, size: int) -> str:
        fit = min(k for k, v in self.buckets.items() if v and k >= size)
        node = self.buckets[fit].pop()
        self.buckets.setdefault(fit - size, []).append(node)
        return node


def _gang(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    nodes = _nodes(f, prefix, n, cpu="4", memory="16Gi")
    capacity = 4000 * n
    weights = [share / (cpu * (lo + hi) / 2) for _, cpu, _, (lo, hi), share in _GANG_KINDS]
    # Draw gangs until they ask for 1.4x the cluster: (kind, members, minMember, arrival key).
    drawn: list[tuple[tuple, int, int, float]] = []
    demand = 0
    while demand < _GANG_OVERCOMMIT * capacity:
        kind = f.rng.choices(_GANG_KINDS, weights=weights)[0]
        lo, hi = kind[3]
        members = f.rng.randint(lo, hi)
        # A quarter of the gangs are elastic: one member more than the minimum they need.
        min_member = members - 1 if members > 2 and f.rng.random() < 0.25 else members
        # Training jobs were mostly submitted first, the simulations and ETL after them.
        arrival = f.rng.uniform(0.0, 0.6) if kind[0] == "train" else f.rng.uniform(0.4, 1.0)
        drawn.append((kind, members, min_member, arrival))
        demand += kind[1] * members
    drawn.sort(key=lambda g: g[3])

    gangs: list[tuple[int, list[dict[str, Any]], int]] = []  # member CPU, pods, minMember
    for i, (kind, members, min_member, _) in enumerate(drawn):
        name, cpu, memory = kind[0], kind[1], kind[2]
        group = f"{name}-{i:05d}"
        min_resources = None
        if name == "train":
            min_resources = {"cpu": f"{cpu * min_member}m", "memory": f"{12 * min_member}Gi"}
        f.pod_group(group, ns, min_member, timeout_seconds=60, min_resources=min_resources)
        template = PodTemplate(
            name,
            {"cpu": f"{cpu}m", "memory": memory},
            labels={"team": name},
            restart_policy="Never" if name != "train" else "OnFailure",
        )
        gangs.append((cpu, f.pods(f.job(group, ns), template, [None] * members, group=group), min_member))
    # Witness: whole gangs best-fit, smallest pods first — a good count, not necessarily the best.
    part = _Part()
    fit = _BestFit(nodes, 4000)
    for size, pods, min_member in sorted(gangs, key=lambda g: g[0]):
        k = min(len(pods), fit.slots(size))
        if k >= min_member:
            for pod in pods[:k]:
                part.witness[_key(pod)] = fit.take(size)
    return part


def gang(scale: str = "quick", seed: int = 0) -> Workload:
    """Coscheduling PodGroups (``scheduling.x-k8s.io/v1alpha1``, minMember 2–16) of Job pods
    labelled ``scheduling.x-k8s.io/pod-group``, demanding 1.4× the cluster's CPU, so some gangs
    cannot run. Kinds: ``train`` (2–4 members of 3.5 CPU, with minResources), ``sim`` (4–8 of
    2 CPU), ``etl`` (8–16 of 1 CPU); a quarter of the gangs have one member above minMember.

    Training gangs were mostly submitted first. kube-scheduler without coscheduling half-places
    gangs; with it (and in our greedy) gangs are taken first come, first served: the early
    ``train`` gangs take a node per pod, wasting half a CPU on each, and LeastAllocated spreads
    the members of later gangs so that fewer still fit. A joint placement chooses which gangs
    to run — more pods, and whole gangs only. The witness packs gangs smallest pods first: a
    lower bound on the optimum, not the optimum.
    """
    return _single("gang", scale, seed, _gang)


# --------------------------------------------------------------------------- topology-aware gangs

BLOCK = "topology.example.com/block"
RACK = "topology.example.com/rack"
PREFERRED_TOPOLOGY = "cpsat-scheduler.io/preferred-topology"
# Blocks x racks per block x nodes per rack, by node count. Quick is 24 nodes: small enough for
# CP-SAT to prove its placement optimal within the quick limit (40 nodes, 2 x 4 x 5, it found
# the better placement in some runs only, on two cores).
_TOPOLOGY_SHAPES = {24: (2, 3, 4), 1000: (10, 10, 10), 5000: (25, 20, 10)}
# (kind, member CPU in millicores, memory, members range, share of gang CPU demand). Racks are
# five or ten 4-CPU nodes: a ``wide`` member fits only a node with 3 CPUs free, so ``fill``
# members spread across a rack's nodes block it, and rack-sized ``wide`` gangs leave one CPU per
# node that only ``fill`` members use.
_TOPOLOGY_KINDS = (
    ("wide", 3000, "8Gi", (4, 4), 0.45),
    ("pair", 2000, "6Gi", (4, 4), 0.30),
    ("fill", 1000, "2Gi", (4, 4), 0.25),
)
_TOPOLOGY_OVERCOMMIT = 1.3  # total gang CPU demand / cluster CPU
_PREFERRED_SHARE = 0.2  # gangs with no required rack that prefer one block, then one rack


def _topology_shape(n: int) -> tuple[int, int, int]:
    if n in _TOPOLOGY_SHAPES:
        return _TOPOLOGY_SHAPES[n]
    per_rack = 10 if n >= 200 else 5
    racks = max(1, n // per_rack)
    blocks = max(1, racks // 10)
    return blocks, max(1, racks // blocks), per_rack


def _core_pod_group(f: Factory, name: str, ns: str, min_count: int, *, rack: bool, preferred: bool) -> dict[str, Any]:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup (Kubernetes 1.36): a gang of ``min_count``,
    required in one rack or (``preferred``) annotated to prefer one block, then one rack."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if rack:
        spec["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    metadata: dict[str, Any] = {"name": name, "namespace": ns, "uid": f.uid(), "creationTimestamp": f.now(), "generation": 1}
    if preferred:
        metadata["annotations"] = {PREFERRED_TOPOLOGY: f"{BLOCK},{RACK}"}
    obj = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": metadata, "spec": spec}
    f.objects.append(obj)
    return obj


def _topology_gang(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    blocks, racks, per_rack = _topology_shape(n)
    width = max(4, len(str(n - 1)))
    i = 0
    rack_nodes: list[list[str]] = []
    for b in range(blocks):
        for r in range(racks):
            rack_nodes.append([])
            for _ in range(per_rack):
                labels = {BLOCK: f"block-{b:02d}", RACK: f"rack-{b:02d}-{r:02d}"}
                name = f"{prefix}-{i:0{width}d}"
                f.node(name, cpu="4", memory="16Gi", zone=ZONES[b % len(ZONES)], labels=labels)
                rack_nodes[-1].append(name)
                i += 1
    capacity = 4000 * i
    weights = [share / (cpu * (lo + hi) / 2) for _, cpu, _, (lo, hi), share in _TOPOLOGY_KINDS]
    drawn: list[tuple[tuple, int, bool]] = []
    demand = 0
    while demand < _TOPOLOGY_OVERCOMMIT * capacity:
        kind = f.rng.choices(_TOPOLOGY_KINDS, weights=weights)[0]
        lo, hi = kind[3]
        members = min(f.rng.randint(lo, hi), per_rack * (4000 // kind[1]))
        preferred = f.rng.random() < _PREFERRED_SHARE
        drawn.append((kind, members, preferred))
        demand += kind[1] * members
    gangs: list[tuple[int, list[dict[str, Any]], bool]] = []  # member CPU, pods, rack required
    for k, (kind, members, preferred) in enumerate(drawn):
        name, cpu, memory = kind[0], kind[1], kind[2]
        group = f"{name}-{k:05d}"
        _core_pod_group(f, group, ns, members, rack=not preferred, preferred=preferred)
        template = PodTemplate(name, {"cpu": f"{cpu}m", "memory": memory}, labels={"team": name}, restart_policy="Never")
        pods = f.pods(f.job(group, ns), template, [None] * members)
        for pod in pods:
            pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        gangs.append((cpu, pods, not preferred))
    return _Part(witness=_topology_witness(rack_nodes, gangs))


def _topology_witness(racks: list[list[str]], gangs: list[tuple[int, list[dict[str, Any]], bool]]) -> dict[str, str]:
    """Whole gangs, widest members first, each into the first rack whose nodes take every member
    first-fit (a gang without a required rack, failing that, anywhere): a good count, not the best."""
    free = {node: 4000 for rack in racks for node in rack}
    everywhere = [node for rack in racks for node in rack]
    witness: dict[str, str] = {}
    for cpu, pods, rack_only in sorted(gangs, key=lambda g: -g[0]):
        for nodes in [*racks, *([] if rack_only else [everywhere])]:
            slots = [node for node in nodes for _ in range(free[node] // cpu)]
            if len(slots) >= len(pods):
                for pod, node in zip(pods, slots):
                    witness[_key(pod)] = node
                    free[node] -= cpu
                break
    return witness


def topology_gang(scale: str = "quick", seed: int = 0) -> Workload:
    """Gangs as Kubernetes 1.36 declares them (``scheduling.k8s.io/v1alpha2`` PodGroups, pods
    joining by ``spec.schedulingGroup``) on racks inside blocks (node labels
    ``topology.example.com/block`` and ``.../rack``; quick: 2 blocks x 3 racks x 4 nodes of
    4 CPU; medium 10 x 10 x 10). Most gangs require one rack (``schedulingConstraints.topology``); a fifth instead
    carry the ``cpsat-scheduler.io/preferred-topology`` annotation (block, then rack). Kinds:
    ``wide`` (3 CPU a member), ``pair`` (2 CPU), ``fill`` (1 CPU), four members each (so more
    pods placed is more gangs placed); demand is 1.3x the cluster's CPU, kinds mixed in arrival
    order.

    One gang at a time (upstream TAS, our greedy), each gang takes the fullest rack that holds
    it and spreads inside it: ``fill`` members scattered over a rack's nodes leave no node with
    3 CPUs for a later ``wide`` gang, and racks end partly used with room no waiting gang fits.
    Choosing every gang's rack jointly packs ``wide`` and ``fill`` members into the same nodes.
    No witness: the best count is not known.
    """
    return _single("topology-gang", scale, seed, _topology_gang)


# --------------------------------------------------------------------------- fragmentation


def _fragmentation(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    nodes = _nodes(f, prefix, n, cpu="4", memory="16Gi")
    large_nodes, medium_nodes = max(1, round(0.4 * n)), max(1, round(0.3 * n))
    small_nodes = n - large_nodes - medium_nodes
    patterns = ["L"] * large_nodes + ["M"] * medium_nodes + ["S"] * small_nodes
    f.rng.shuffle(patterns)
    # Node patterns, each exactly 4 CPU: L = 3 + 1, M = 1.5 + 1.5 + 1, S = 1 + 1 + 1 + 1.
    small = PodTemplate("web", {"cpu": "1", "memory": "3Gi"})
    medium = PodTemplate("api", {"cpu": "1500m", "memory": "4608Mi"})
    large = PodTemplate("search", {"cpu": "3", "memory": "9Gi"})
    counts = {
        "web": large_nodes + medium_nodes + 4 * small_nodes,
        "api": 2 * medium_nodes,
        "search": large_nodes,
    }
    owners = {t.app: (f.replicaset(t.app, ns), t) for t in (small, medium, large)}
    # Arrival: most small pods first, then the rest of everything interleaved.
    head = round(0.8 * counts["web"])
    arrivals = ["web"] * (counts["web"] - head) + ["api"] * counts["api"] + ["search"] * counts["search"]
    f.rng.shuffle(arrivals)
    made: dict[str, list[dict[str, Any]]] = {app: [] for app in counts}
    for app in ["web"] * head + arrivals:
        owner, template = owners[app]
        made[app].append(f.pod(owner, template, None))
    part = _Part()
    slots = {
        "search": [x for x, p in zip(nodes, patterns) if p == "L"],
        "api": [x for x, p in zip(nodes, patterns) if p == "M" for _ in range(2)],
        "web": [x for x, p in zip(nodes, patterns) if p in "LM"] + [x for x, p in zip(nodes, patterns) if p == "S" for _ in range(4)],
    }
    for app, pods in made.items():
        if _assign(pods, slots[app], part.witness):
            raise AssertionError("fragmentation construction should fill every node exactly")
    return part


def fragmentation(scale: str = "quick", seed: int = 0) -> Workload:
    """Mixed pod sizes on identical 4-CPU nodes that fit exactly by construction: 40% of the
    nodes take one 3-CPU ``search`` pod and one 1-CPU ``web`` pod, 30% two 1.5-CPU ``api`` pods
    and a web pod, the rest four web pods. Memory is never the limit.

    80% of the web pods arrive first, the rest interleaved. LeastAllocated spreads the early
    web pods over every node, so by the time the search pods arrive few nodes still have three
    free CPUs and most large pods are stranded. A joint placement packs every pod (placed ==
    pending is reachable; the witness shows it).
    """
    return _single("fragmentation", scale, seed, _fragmentation)


# --------------------------------------------------------------------------- GPU pools

# How the GPUs of one node are shared out in the witness, with the weight of each pattern.
_GPU8_PATTERNS = (((8,), 35), ((4, 4), 25), ((4, 2, 1, 1), 15), ((2, 2, 2, 2), 10), ((2, 2, 1, 1, 1, 1), 15))
_GPU4_PATTERNS = (((4,), 40), ((2, 2), 20), ((2, 1, 1), 20), ((1, 1, 1, 1), 20))
_CPU_PATTERNS = (((4, 2, 2), 1), ((4, 2), 1), ((2, 2, 2), 1), ((2, 2), 1), ((4,), 1))


def _deal(f: Factory, patterns: tuple, count: int) -> list[tuple[int, ...]]:
    """``count`` patterns in proportion to their weights (largest remainders), shuffled."""
    total = sum(w for _, w in patterns)
    shares = [(count * w // total, -(count * w % total), i) for i, (_, w) in enumerate(patterns)]
    left = count - sum(s for s, _, _ in shares)
    dealt: list[tuple[int, ...]] = []
    for share, _, i in sorted(shares, key=lambda s: (s[1], s[2])):
        extra = 1 if left > 0 else 0
        left -= extra
        dealt += [patterns[i][0]] * (share + extra)
    f.rng.shuffle(dealt)
    return dealt


def _gpu_pools(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    gpu8 = max(1, round(0.2 * n))
    gpu4 = max(1, round(0.2 * n))
    cpu_count = max(1, n - gpu8 - gpu4)
    cpu_nodes = _nodes(f, f"{prefix}-cpu", cpu_count, cpu="8", memory="32Gi", instance_type="bench.2xlarge")
    gpu_labels = {"nvidia.com/gpu.present": "true"}
    big = _nodes(
        f, f"{prefix}-a100", gpu8, cpu="64", memory="512Gi", instance_type="p4d.24xlarge",
        labels={**gpu_labels, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"},
        taints=[GPU_TAINT], extended={GPU: "8"},
    )
    small = _nodes(
        f, f"{prefix}-l4", gpu4, cpu="32", memory="256Gi", instance_type="g6.12xlarge",
        labels={**gpu_labels, "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4"},
        taints=[GPU_TAINT], extended={GPU: "4"},
    )
    # Witness slots: a pattern of pod sizes per GPU node (exactly its GPUs), and per CPU node.
    gpu_slots: dict[int, list[str]] = {1: [], 2: [], 4: [], 8: []}
    for nodes, patterns in ((big, _GPU8_PATTERNS), (small, _GPU4_PATTERNS)):
        for node, pattern in zip(nodes, _deal(f, patterns, len(nodes))):
            for size in pattern:
                gpu_slots[size].append(node)
    cpu_slots: dict[int, list[str]] = {2: [], 4: []}
    for node, pattern in zip(cpu_nodes, _deal(f, _CPU_PATTERNS, len(cpu_nodes))):
        for size in pattern:
            cpu_slots[size].append(node)

    def gpu_template(app: str, gpus: int, **kw: Any) -> PodTemplate:
        return PodTemplate(
            app,
            {"cpu": str(6 * gpus), "memory": f"{48 * gpus}Gi", GPU: str(gpus)},
            limits={GPU: str(gpus)},
            tolerations=(tolerate(GPU),),
            image="nvcr.io/nvidia/pytorch:24.08-py3",
            **kw,
        )

    gpu_templates = {
        1: (f.replicaset("inference", ns), gpu_template("inference", 1)),
        2: (f.job("finetune", ns), gpu_template("finetune", 2, restart_policy="Never")),
        4: (f.job("train-4", ns), gpu_template("train-4", 4, restart_policy="Never")),
        8: (f.job("train-8", ns), gpu_template("train-8", 8, restart_policy="Never", node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})),
    }
    cpu_templates = {
        2: (f.replicaset("etl", ns), PodTemplate("etl", {"cpu": "2", "memory": "8Gi"})),
        4: (f.replicaset("api", ns), PodTemplate("api", {"cpu": "4", "memory": "16Gi"})),
    }
    # Arrival: every 1-GPU inference pod first, then CPU and other GPU pods interleaved.
    later = [("gpu", s) for s in (2, 4, 8) for _ in gpu_slots[s]] + [("cpu", s) for s in (2, 4) for _ in cpu_slots[s]]
    f.rng.shuffle(later)
    part = _Part()
    taken = {("gpu", s): 0 for s in gpu_slots} | {("cpu", s): 0 for s in cpu_slots}
    for pool, size in [("gpu", 1)] * len(gpu_slots[1]) + later:
        owner, template = (gpu_templates if pool == "gpu" else cpu_templates)[size]
        pod = f.pod(owner, template, None)
        slots = (gpu_slots if pool == "gpu" else cpu_slots)[size]
        part.witness[_key(pod)] = slots[taken[(pool, size)]]
        taken[(pool, size)] += 1
    return part


def gpu_pools(scale: str = "quick", seed: int = 0) -> Workload:
    """A CPU pool (60% of the nodes, 8 CPU) and GPU nodes tainted
    ``nvidia.com/gpu=present:NoSchedule``: A100 nodes with 8 ``nvidia.com/gpu`` and L4 nodes with
    4. GPU pods tolerate the taint and ask for 1, 2, 4 or 8 GPUs (6 CPU and 48Gi per GPU;
    8-GPU pods select A100 nodes); CPU pods (2 or 4 CPU) do not tolerate it and stay in the CPU
    pool. Pod counts come from a per-node pattern that fills each GPU node's GPUs exactly.

    The 1-GPU inference pods arrive first. LeastAllocated scores CPU and memory, not GPUs, so
    greedy spreads them one or two per GPU node and the 4- and 8-GPU training pods find no node
    with enough free GPUs. A joint placement packs GPUs like the patterns and places every pod.
    """
    return _single("gpu-pools", scale, seed, _gpu_pools)


# --------------------------------------------------------------------------- mixed

# Share of the cluster's nodes given to each component of the blend.
_MIX = (
    ("basic", 0.20, _basic),
    ("node-affinity", 0.10, _node_affinity),
    ("anti-affinity", 0.15, _anti_affinity),
    ("spread", 0.15, _spread),
    ("preemption", 0.10, _preemption),
    ("gang", 0.10, _gang),
    ("fragmentation", 0.10, _fragmentation),
    ("gpu-pools", 0.10, _gpu_pools),
)


def _mixed(f: Factory, n: int, ns: str, prefix: str) -> _Part:
    part = _Part()
    pending_by_component: list[list[dict[str, Any]]] = []
    for name, share, build in _MIX:
        start = len(f.objects)
        sub = build(f, max(12, round(share * n)), name, name)
        part.witness.update(sub.witness or {})
        part.evictions += sub.evictions
        pending_by_component.append(
            [o for o in f.objects[start:] if o["kind"] == "Pod" and "nodeName" not in o["spec"]]
        )
    # Pending pods of all components arrive interleaved (each component keeps its own order).
    remaining = [list(reversed(p)) for p in pending_by_component]
    f.pending.clear()
    while any(remaining):
        weights = [len(r) for r in remaining]
        pick = f.rng.choices(range(len(remaining)), weights=weights)[0]
        pod = remaining[pick].pop()
        pod["metadata"]["creationTimestamp"] = f.now()
        f.pending.append(_key(pod))
    return part


def mixed(scale: str = "quick", seed: int = 0) -> Workload:
    """All of the above on one cluster: each component gets a share of the nodes and its own
    namespace, and their pending pods arrive interleaved. Nothing keeps a component's pods on
    its own nodes, so the components compete for capacity (the high-priority preemption wave
    goes first and may preempt anyone's lower-priority pods).

    The witness is the union of the components' own placements, each on its own nodes; the
    engines are free to do better.
    """
    return _single("mixed", scale, seed, _mixed)


# --------------------------------------------------------------------------- scale targets


def _deployment_mix(f: Factory, ns: str, specs: list[tuple[str, str, str, dict[str, Any]]], replicas: int) -> None:
    for app, cpu, memory, extra in specs:
        template = PodTemplate(app, {"cpu": cpu, "memory": memory}, **extra)
        f.pods(f.replicaset(app, ns), template, [None] * replicas)


@_gc_paused
def scale_3k(seed: int = 0) -> Workload:
    """The solver's first scale target: 1,000 nodes (8 CPU, 32Gi) each running two pods, and
    3,000 pending pods from 10 Deployments of different sizes (two pinned to a zone, one
    tolerating a taint nobody has). Everything fits; the point is a valid plan within 20 s."""
    f = Factory(seed)
    ns = "scale"
    nodes = _nodes(f, "node", 1000, cpu="8", memory="32Gi", instance_type="bench.2xlarge")
    running = [("kube-dns", "100m", "128Mi"), ("metrics", "250m", "512Mi"), ("ingress", "500m", "1Gi"), ("logs", "200m", "256Mi")]
    for i, (app, cpu, memory) in enumerate(running):
        owner = f.replicaset(app, ns)
        hosts = [x for j, x in enumerate(nodes) for k in range(2) if (2 * j + k) % len(running) == i]
        f.pods(owner, PodTemplate(app, {"cpu": cpu, "memory": memory}), hosts)
    specs = [
        ("frontend", "250m", "512Mi", {}),
        ("checkout", "500m", "1Gi", {}),
        ("cart", "100m", "256Mi", {}),
        ("catalog", "1", "2Gi", {}),
        ("search", "1500m", "4Gi", {}),
        ("recommend", "750m", "3Gi", {}),
        ("payments", "500m", "512Mi", {"node_selector": {"topology.kubernetes.io/zone": ZONES[0]}}),
        ("ledger", "250m", "1Gi", {"node_selector": {"topology.kubernetes.io/zone": ZONES[1]}}),
        ("email", "100m", "128Mi", {"tolerations": (tolerate("dedicated", value="mail"),)}),
        ("reports", "2", "4Gi", {}),
    ]
    _deployment_mix(f, ns, specs, 300)
    return _finish("scale-3k", "target", seed, f, _Part(witness=None), inspect.getdoc(scale_3k) or "")


@_gc_paused
def scale_10k(seed: int = 0) -> Workload:
    """The solver's second scale target: 5,000 empty nodes (8 CPU, 32Gi) and 10,000 pending pods
    of 10 classes (1,000 each, 100m to 2 CPU). A decision is due within 10 s."""
    f = Factory(seed)
    _nodes(f, "node", 5000, cpu="8", memory="32Gi", instance_type="bench.2xlarge")
    specs = [
        (f"svc-{i}", cpu, memory, {})
        for i, (cpu, memory) in enumerate(
            [("100m", "128Mi"), ("250m", "512Mi"), ("500m", "1Gi"), ("750m", "1536Mi"), ("1", "2Gi"),
             ("1", "4Gi"), ("1500m", "3Gi"), ("2", "4Gi"), ("2", "8Gi"), ("250m", "2Gi")]
        )
    ]
    _deployment_mix(f, "scale", specs, 1000)
    return _finish("scale-10k", "target", seed, f, _Part(witness=None), inspect.getdoc(scale_10k) or "")


# --------------------------------------------------------------------------- repack


@_gc_paused
def repack(nodes: int = 100, seed: int = 0) -> Workload:
    """A running cluster to re-pack: ``nodes`` nodes (60% 4-CPU, 40% 8-CPU instance types) filled
    to 15–55% of their CPU, so a good plan frees many of them. Every node runs three DaemonSet
    pods (kube-proxy, node-exporter, fluent-bit). Workload pods belong to ReplicaSets, two
    StatefulSets (with PDBs), a Job, a Deployment marked
    ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, a Deployment with an emptyDir
    volume, a Deployment with hostname anti-affinity, one spread over zones, and a few bare pods.
    Nothing is pending; every pod was placed by the default scheduler."""
    # Templates of pods the default scheduler placed.
    placed_by_default = functools.partial(PodTemplate, scheduler_name="default-scheduler")
    f = Factory(seed)
    ns = "shop"
    small_count = round(0.6 * nodes)
    kinds = ["m5.xlarge"] * small_count + ["m5.2xlarge"] * (nodes - small_count)
    f.rng.shuffle(kinds)
    width = max(4, len(str(nodes - 1)))
    names: list[str] = []
    free: dict[str, int] = {}
    for i, kind in enumerate(kinds):
        name = f"node-{i:0{width}d}"
        cpu, memory = ("4", "16Gi") if kind == "m5.xlarge" else ("8", "32Gi")
        f.node(name, cpu=cpu, memory=memory, zone=ZONES[i % 3], instance_type=kind)
        names.append(name)
        free[name] = int(cpu) * 1000
    zone_of = {x: ZONES[i % 3] for i, x in enumerate(names)}

    # DaemonSets: one pod on every node.
    for ds, cpu, memory in (("kube-proxy", 100, "128Mi"), ("node-exporter", 50, "64Mi"), ("fluent-bit", 100, "200Mi")):
        template = placed_by_default(ds, {"cpu": f"{cpu}m", "memory": memory}, priority=2000001000, priority_class="system-node-critical")
        f.pods(f.daemonset(ds, "kube-system"), template, list(names))
        for x in names:
            free[x] -= cpu

    capacity = {x: (4000 if k == "m5.xlarge" else 8000) for x, k in zip(names, kinds)}
    target = {x: int(capacity[x] * f.rng.uniform(0.15, 0.55)) for x in names}
    used = {x: capacity[x] - free[x] for x in names}

    def room(x: str, cpu: int) -> bool:
        return used[x] + cpu <= max(target[x], 250 + cpu) and free[x] >= cpu

    def put(x: str, cpu: int) -> None:
        used[x] += cpu
        free[x] -= cpu

    # Constrained apps first: anti-affinity one per node, zone spread balanced, StatefulSets.
    order = list(names)
    f.rng.shuffle(order)
    ha = placed_by_default("ha-api", {"cpu": "500m", "memory": "1Gi"}, affinity=required_anti_affinity(match_labels(app="ha-api")))
    ha_nodes = [x for x in order if room(x, 500)][: max(2, nodes // 10)]
    for x in ha_nodes:
        put(x, 500)
    f.pods(f.replicaset("ha-api", ns), ha, ha_nodes)
    f.pdb("ha-api", ns, match_labels(app="ha-api"), expected=len(ha_nodes), max_unavailable=1)

    zoned = placed_by_default("checkout", {"cpu": "250m", "memory": "512Mi"}, spread=(zone_spread(match_labels(app="checkout")),))
    per_zone = max(1, nodes // 20)
    zone_nodes = []
    for z in ZONES:
        zone_nodes += [x for x in order if zone_of[x] == z and room(x, 250)][:per_zone]
    for x in zone_nodes:
        put(x, 250)
    f.pods(f.replicaset("checkout", ns), zoned, zone_nodes)

    for sts, cpu, memory in (("redis", 500, "2Gi"), ("kafka", 1000, "4Gi")):
        count = max(3, nodes // 25)
        hosts = [x for x in reversed(order) if room(x, cpu)][:count]
        for x in hosts:
            put(x, cpu)
        f.pods(f.statefulset(sts, ns), placed_by_default(sts, {"cpu": f"{cpu}m", "memory": memory}), hosts)
        f.pdb(sts, ns, match_labels(app=sts), expected=len(hosts), max_unavailable=1)

    # Then fill every node up to its target with ordinary workloads.
    catalogue = [
        ("frontend", 250, "512Mi", {}),
        ("cart", 250, "1Gi", {}),
        ("catalog", 500, "1Gi", {}),
        ("search", 1000, "2Gi", {}),
        ("recommend", 500, "2Gi", {}),
        ("ledger", 500, "1Gi", {"annotations": {SAFE_TO_EVICT: "false"}}),
        ("image-cache", 250, "1Gi", {"volumes": ({"name": "scratch", "emptyDir": {}},)}),
        ("report", 500, "1Gi", {"restart_policy": "Never"}),
    ]
    placements: dict[str, list[str]] = {app: [] for app, *_ in catalogue}
    for x in order:
        for _ in range(64):
            app, cpu, _memory, _extra = f.rng.choice(catalogue)
            if not room(x, cpu):
                break
            put(x, cpu)
            placements[app].append(x)
    for app, cpu, memory, extra in catalogue:
        if not placements[app]:
            continue
        template = placed_by_default(app, {"cpu": f"{cpu}m", "memory": memory}, **extra)
        owner = f.job(app, ns) if app == "report" else f.replicaset(app, ns)
        f.pods(owner, template, placements[app])
        if app in ("frontend", "catalog"):
            f.pdb(app, ns, match_labels(app=app), expected=len(placements[app]), min_available="50%")

    # A few bare pods someone started by hand.
    bare = placed_by_default("debug", {"cpu": "100m", "memory": "128Mi"})
    for x in order[: max(1, nodes // 50)]:
        f.pod(Owner("", "", ns, ""), bare, x)
    return _finish(f"repack-{nodes}", "repack", seed, f, _Part(witness=None), inspect.getdoc(repack) or "")


# --------------------------------------------------------------------------- real-shaped


# Nodes, running pods per node and pending pods of the real-shaped cluster at each scale.
_REALISTIC = {"quick": (100, 40, 1000), "medium": (1000, 40, 10000), "large": (5000, 30, 10000)}
_REALISTIC_APPS = 20
# Request shapes (CPU millicores, memory MiB): running pods are small; pending pods take any of
# 4 x 4 shapes, so 20 apps make up to 320 classes (with the spread apps, what a dump of a busy
# cluster holds: a few hundred distinct pod specs among thousands of pods).
_RUNNING_SHAPES = ((50, 64), (100, 128), (100, 256), (200, 256), (250, 512), (300, 384), (500, 768))
_PENDING_CPU = (100, 250, 500, 1000)
_PENDING_MEMORY = (256, 512, 1024, 2048)


@_gc_paused
def realistic(scale: str = "quick", seed: int = 0) -> Workload:
    """A real-shaped cluster (issue 24): 1,000 nodes (medium; quick 100, large 5,000) in 3 zones,
    three quarters 16-CPU and a quarter 32-CPU, running 40 pods each (30 at large: 150,000) --
    two DaemonSet pods and the rest from 20 apps with random small requests -- and 10,000
    pending pods (quick 1,000) of the same 20 apps with random requests from 16 shapes, about
    315 classes; the pods of 2 apps, a tenth of the queue, spread over zones (maxSkew 1,
    DoNotSchedule). Everything pending fits."""
    if scale not in _REALISTIC:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    count, per_node, pending = _REALISTIC[scale]
    placed_by_default = functools.partial(PodTemplate, scheduler_name="default-scheduler")
    f = Factory(seed)
    width = max(4, len(str(count - 1)))
    nodes: list[str] = []
    for i in range(count):
        name = f"node-{i:0{width}d}"
        big = i % 4 == 3
        f.node(name, cpu="32" if big else "16", memory="128Gi" if big else "64Gi", zone=ZONES[i % 3],
               instance_type="m5.8xlarge" if big else "m5.4xlarge")
        nodes.append(name)
    for ds, cpu, memory in (("kube-proxy", "100m", "128Mi"), ("node-exporter", "50m", "64Mi")):
        template = placed_by_default(ds, {"cpu": cpu, "memory": memory}, priority=2000001000,
                                     priority_class="system-node-critical")
        f.pods(f.daemonset(ds, "kube-system"), template, list(nodes))
    apps = [f"app-{i:02d}" for i in range(_REALISTIC_APPS)]
    spread_apps = set(apps[:2])
    owners = {app: f.replicaset(app, "prod") for app in apps}

    templates: dict[tuple[str, int, int, bool], PodTemplate] = {}

    def template(app: str, cpu: int, memory: int, running: bool) -> PodTemplate:
        """One template per shape, so that pods of one shape share it (and the factory's spec)."""
        key = (app, cpu, memory, running)
        if key not in templates:
            spread = (zone_spread(match_labels(app=app)),) if app in spread_apps else ()
            templates[key] = PodTemplate(app, {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}, spread=spread,
                                         scheduler_name="default-scheduler" if running else DEFAULT_SCHEDULER_NAME)
        return templates[key]

    for x in nodes:
        for _ in range(per_node - 2):
            app = f.rng.choice(apps)
            cpu, memory = f.rng.choice(_RUNNING_SHAPES)
            f.pod(owners[app], template(app, cpu, memory, True), x)
    # Pending pods, in random order: the spread apps take a tenth of the queue, the 18 others the rest.
    plain = apps[2:]
    for k in range(pending):
        app = f.rng.choice(apps[:2]) if k % 10 == 0 else f.rng.choice(plain)
        f.pod(owners[app], template(app, f.rng.choice(_PENDING_CPU), f.rng.choice(_PENDING_MEMORY), False), None)
    return _finish("realistic", scale, seed, f, _Part(witness=None), inspect.getdoc(realistic) or "")


# --------------------------------------------------------------------------- registry


@_gc_paused
def _single(name: str, scale: str, seed: int, build: Callable[[Factory, int, str, str], _Part]) -> Workload:
    n = _node_count(name, scale)
    f = Factory(seed)
    part = build(f, n, name, name)
    doc = inspect.getdoc(WORKLOADS[name]) or ""
    return _finish(name, scale, seed, f, part, doc)


def _finish(name: str, scale: str, seed: int, f: Factory, part: _Part, description: str) -> Workload:
    nodes = sum(1 for o in f.objects if o["kind"] == "Node")
    pending = list(f.pending)
    witness = part.witness
    metadata: dict[str, Any] = {
        "scale": scale,
        "seed": seed,
        "nodes": nodes,
        "pods": len(pending),
        "running": f.running,
        "pending": pending,
        "achievable": len(witness) if witness is not None else None,
        "witness": witness,
        "witness_evictions": list(part.evictions),
    }
    return Workload(name=name, description=description, objects=f.objects, metadata=metadata)


WORKLOADS: dict[str, Callable[..., Workload]] = {
    "basic": basic,
    "node-affinity": node_affinity,
    "anti-affinity": anti_affinity,
    "spread": spread,
    "preemption": preemption,
    "gang": gang,
    "topology-gang": topology_gang,
    "fragmentation": fragmentation,
    "gpu-pools": gpu_pools,
    "mixed": mixed,
}
SCALE_TARGETS: dict[str, Callable[..., Workload]] = {"scale-3k": scale_3k, "scale-10k": scale_10k}
# Real-shaped clusters, sized by --scale, outside the default suite (a medium one is 50,000 pods).
def _dra(scale: str = "quick", seed: int = 0) -> Workload:
    """GPUs as DRA devices in NVLink domains (``dra_workload.dra``)."""
    from .dra_workload import dra

    return dra(scale, seed)


REAL_SHAPED: dict[str, Callable[..., Workload]] = {"realistic": realistic, "dra": _dra}
# The command line lists the names from defaults.py without loading this module.
assert tuple(WORKLOADS) == WORKLOAD_NAMES and tuple(SCALE_TARGETS) == SCALE_TARGET_NAMES, "update defaults.py"
assert tuple(REAL_SHAPED) == REAL_SHAPED_NAMES, "update defaults.py"


def generate(name: str, scale: str = "quick", seed: int = 0) -> Workload:
    """The named workload (one of ``WORKLOADS`` or ``SCALE_TARGETS``; targets ignore ``scale``)."""
    if name in WORKLOADS:
        return WORKLOADS[name](scale, seed)
    if name in SCALE_TARGETS:
        return SCALE_TARGETS[name](seed)
    if name in REAL_SHAPED:
        return REAL_SHAPED[name](scale, seed)
    known = ", ".join([*WORKLOADS, *SCALE_TARGETS, *REAL_SHAPED])
    raise ValueError(f"unknown workload {name!r}; expected one of {known}")


def suite(scale: str = "quick", seed: int = 0, names: Optional[list[str]] = None) -> list[Workload]:
    """Every benchmark workload (or ``names``) at ``scale``."""
    return [generate(name, scale, seed) for name in (names or list(WORKLOADS))]


def _main(argv: Optional[list[str]] = None) -> None:
    """``python -m adapters.bench.workloads NAME [--scale S] [--seed N] FILE``: write a workload as
    a kubectl-style List (JSON, or YAML for .yaml), e.g. a real-shaped dump for ``schedule``."""
    import argparse

    from .parse import as_list, dump

    parser = argparse.ArgumentParser(prog="python -m adapters.bench.workloads", description=_main.__doc__)
    parser.add_argument("name", choices=[*WORKLOADS, *SCALE_TARGETS, *REAL_SHAPED])
    parser.add_argument("file")
    parser.add_argument("--scale", choices=SCALES, default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compact", action="store_true", help="JSON without indentation (as the API server sends it)")
    args = parser.parse_args(argv)
    workload = generate(args.name, args.scale, args.seed)
    if args.compact:
        import json

        with open(args.file, "w", encoding="utf-8") as fh:
            json.dump(as_list(workload.objects), fh, separators=(",", ":"))
    else:
        dump(workload, args.file)
    meta = workload.metadata
    print(f"{args.file}: {meta['nodes']} nodes, {meta['running']} running pods, {meta['pods']} pending pods")


if __name__ == "__main__":
    _main()
