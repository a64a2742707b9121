"""Workloads of one kube-scheduler rule each, modelled on ``scheduler_perf`` cases: ``basic``
(resources only), ``node-affinity``, ``anti-affinity``, ``spread`` and ``preemption``. Each
docstring says where greedy ``scheduleOne`` loses and why a joint placement does not."""

from __future__ import annotations

from typing import Any

from .objects import (
    ZONES,
    Factory,
    PodTemplate,
    label_in,
    match_labels,
    required_anti_affinity,
    required_node_affinity,
    zone_spread,
)
from .workload_kit import Part, Workload, assign, make_nodes, pod_key, round_robin, single, slots_each


# --------------------------------------------------------------------------- basic


def _basic(f: Factory, n: int, ns: str, prefix: str) -> Part:
    nodes = make_nodes(f, prefix, n, cpu="4", memory="16Gi")
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
    part = Part()
    assign(pods, slots_each(nodes, 2), part.witness)
    return part


def basic(scale: str = "quick", seed: int = 0) -> Workload:
    """Uniform nodes (4 CPU, 16Gi, 110 pods, three zones) each running one pod of one of three
    Deployments, and two uniform pending pods per node (scheduler_perf SchedulingBasic).

    Capacity is ample: both engines should place every pod. This workload measures decision
    throughput and latency, not placement quality.
    """
    return single("basic", scale, seed, _basic, basic)


# --------------------------------------------------------------------------- node affinity


def _node_affinity(f: Factory, n: int, ns: str, prefix: str) -> Part:
    per_pool = max(1, round(n / 5))
    pools: list[list[str]] = []
    for k in range(5):
        disk = "ssd" if k in (2, 3) else "hdd"
        names = make_nodes(f, f"{prefix}-p{k}", per_pool, cpu="4", memory="16Gi", labels={"node-pool": f"pool-{k}", "disktype": disk})
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
    part = Part()
    w = part.witness
    pool1 = assign(made["analytics"], slots_each(pools[1], 4), w)
    if assign(made["frontend"], slots_each(pools[0], 4) + pool1, w):
        raise AssertionError("pools 0 and 1 should hold frontend and analytics exactly")
    assign(made["ingest"], slots_each(pools[2], 4), w)
    assign(made["search"], slots_each(pools[3], 4), w)
    assign(made["batch"], slots_each(pools[4], 4), w)
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
    return single("node-affinity", scale, seed, _node_affinity, node_affinity)


# --------------------------------------------------------------------------- pod anti-affinity


def _anti_affinity(f: Factory, n: int, ns: str, prefix: str) -> Part:
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
    part = Part()
    assign(pending_cache, free_hdd, part.witness)
    assign(pending_web, web_free, part.witness)
    assign(pending_search, ssd, part.witness)
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
    return single("anti-affinity", scale, seed, _anti_affinity, anti_affinity)


# --------------------------------------------------------------------------- topology spread


def _spread(f: Factory, n: int, ns: str, prefix: str) -> Part:
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
        free[z] = round_robin(zones[z], room)

    pending_filler = f.pods(f.replicaset("batch-worker", ns), filler, [None] * (4 * Z))
    pending_checkout = f.pods(checkout_owner, checkout, [None] * (3 * Z // 4))
    pending_catalog = f.pods(catalog_owner, catalog, [None] * (3 * Z // 4))
    pending_search = f.pods(f.replicaset("search", ns), search, [None] * (3 * Z))

    part = Part()
    w = part.witness
    fa, fb, fc = free[ZONES[0]], free[ZONES[1]], free[ZONES[2]]
    # Final counts: checkout and catalog Z/2 per zone, search Z per zone; zone c exactly full.
    fb = assign(pending_checkout[: Z // 4], fb, w)
    fc = assign(pending_checkout[Z // 4 :], fc, w)
    fa = assign(pending_catalog[: Z // 4], fa, w)
    fc = assign(pending_catalog[Z // 4 :], fc, w)
    fa = assign(pending_search[:Z], fa, w)
    fb = assign(pending_search[Z : 2 * Z], fb, w)
    fc = assign(pending_search[2 * Z :], fc, w)
    rest = assign(pending_filler, fa + fb, w)
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
    return single("spread", scale, seed, _spread, spread)


# --------------------------------------------------------------------------- preemption


def _preemption(f: Factory, n: int, ns: str, prefix: str) -> Part:
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

    part = Part()
    assign(pending_api, by_role["service"], part.witness)
    assign(pending_trainer, by_role["batch"], part.witness)
    part.evictions = [pod_key(p) for p in catalog_pods + batch_pods]
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
    return single("preemption", scale, seed, _preemption, preemption)


# The builders, for ``mixed`` (a share of the nodes each).
BUILDERS = {"basic": _basic, "node-affinity": _node_affinity, "anti-affinity": _anti_affinity, "spread": _spread,
            "preemption": _preemption}
