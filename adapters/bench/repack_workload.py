"""``repack``: a running cluster, nothing pending, for the re-packing benchmark."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from .objects import (
    SAFE_TO_EVICT,
    ZONES,
    Factory,
    Owner,
    PodTemplate,
    match_labels,
    required_anti_affinity,
    zone_spread,
)
from .workload_kit import Part, Workload, finish, gc_paused


# --------------------------------------------------------------------------- repack


@gc_paused
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
        cores, node_memory = ("4", "16Gi") if kind == "m5.xlarge" else ("8", "32Gi")
        f.node(name, cpu=cores, memory=node_memory, zone=ZONES[i % 3], instance_type=kind)
        names.append(name)
        free[name] = int(cores) * 1000
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
    catalogue: list[tuple[str, int, str, dict[str, Any]]] = [
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
    return finish(f"repack-{nodes}", "repack", seed, f, None, inspect.getdoc(repack) or "")
