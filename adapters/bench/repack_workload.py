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
    cluster = _RepackCluster(Factory(seed), nodes)
    cluster.daemonsets()
    cluster.constrained_apps()
    cluster.fill()
    cluster.bare_pods()
    return finish(f"repack-{nodes}", "repack", seed, cluster.f, None, inspect.getdoc(repack) or "")


# Templates of pods the default scheduler placed.
_placed_by_default = functools.partial(PodTemplate, scheduler_name="default-scheduler")
_NS = "shop"
# Ordinary workloads every node is filled with up to its target: (app, CPU milli, memory, extra).
_CATALOGUE: list[tuple[str, int, str, dict[str, Any]]] = [
    ("frontend", 250, "512Mi", {}),
    ("cart", 250, "1Gi", {}),
    ("catalog", 500, "1Gi", {}),
    ("search", 1000, "2Gi", {}),
    ("recommend", 500, "2Gi", {}),
    ("ledger", 500, "1Gi", {"annotations": {SAFE_TO_EVICT: "false"}}),
    ("image-cache", 250, "1Gi", {"volumes": ({"name": "scratch", "emptyDir": {}},)}),
    ("report", 500, "1Gi", {"restart_policy": "Never"}),
]


class _RepackCluster:
    """``repack``'s cluster, built step by step (the steps draw from the factory's random
    generator in this order: node kinds, targets, node order, then the fill)."""

    def __init__(self, f: Factory, nodes: int) -> None:
        self.f, self.nodes = f, nodes
        small_count = round(0.6 * nodes)
        kinds = ["m5.xlarge"] * small_count + ["m5.2xlarge"] * (nodes - small_count)
        f.rng.shuffle(kinds)
        width = max(4, len(str(nodes - 1)))
        self.names: list[str] = []
        self.free: dict[str, int] = {}
        for i, kind in enumerate(kinds):
            name = f"node-{i:0{width}d}"
            cores, node_memory = ("4", "16Gi") if kind == "m5.xlarge" else ("8", "32Gi")
            f.node(name, cpu=cores, memory=node_memory, zone=ZONES[i % 3], instance_type=kind)
            self.names.append(name)
            self.free[name] = int(cores) * 1000
        self.zone_of = {x: ZONES[i % 3] for i, x in enumerate(self.names)}
        self.kinds = kinds

    def daemonsets(self) -> None:
        """One pod of each DaemonSet on every node; then each node's target use (15–55%)."""
        f, names = self.f, self.names
        for ds, cpu, memory in (("kube-proxy", 100, "128Mi"), ("node-exporter", 50, "64Mi"), ("fluent-bit", 100, "200Mi")):
            template = _placed_by_default(ds, {"cpu": f"{cpu}m", "memory": memory}, priority=2000001000,
                                          priority_class="system-node-critical")
            f.pods(f.daemonset(ds, "kube-system"), template, list(names))
            for x in names:
                self.free[x] -= cpu
        capacity = {x: (4000 if k == "m5.xlarge" else 8000) for x, k in zip(names, self.kinds)}
        self.target = {x: int(capacity[x] * f.rng.uniform(0.15, 0.55)) for x in names}
        self.used = {x: capacity[x] - self.free[x] for x in names}

    def room(self, x: str, cpu: int) -> bool:
        return self.used[x] + cpu <= max(self.target[x], 250 + cpu) and self.free[x] >= cpu

    def put(self, x: str, cpu: int) -> None:
        self.used[x] += cpu
        self.free[x] -= cpu

    def constrained_apps(self) -> None:
        """The constrained apps first: anti-affinity one per node, zone spread balanced,
        StatefulSets with their budgets."""
        f, nodes, room, put = self.f, self.nodes, self.room, self.put
        order = self.order = list(self.names)
        f.rng.shuffle(order)
        ha = _placed_by_default("ha-api", {"cpu": "500m", "memory": "1Gi"},
                                affinity=required_anti_affinity(match_labels(app="ha-api")))
        ha_nodes = [x for x in order if room(x, 500)][: max(2, nodes // 10)]
        for x in ha_nodes:
            put(x, 500)
        f.pods(f.replicaset("ha-api", _NS), ha, ha_nodes)
        f.pdb("ha-api", _NS, match_labels(app="ha-api"), expected=len(ha_nodes), max_unavailable=1)

        zoned = _placed_by_default("checkout", {"cpu": "250m", "memory": "512Mi"},
                                   spread=(zone_spread(match_labels(app="checkout")),))
        per_zone = max(1, nodes // 20)
        zone_nodes = []
        for z in ZONES:
            zone_nodes += [x for x in order if self.zone_of[x] == z and room(x, 250)][:per_zone]
        for x in zone_nodes:
            put(x, 250)
        f.pods(f.replicaset("checkout", _NS), zoned, zone_nodes)

        for sts, cpu, memory in (("redis", 500, "2Gi"), ("kafka", 1000, "4Gi")):
            count = max(3, nodes // 25)
            hosts = [x for x in reversed(order) if room(x, cpu)][:count]
            for x in hosts:
                put(x, cpu)
            f.pods(f.statefulset(sts, _NS), _placed_by_default(sts, {"cpu": f"{cpu}m", "memory": memory}), hosts)
            f.pdb(sts, _NS, match_labels(app=sts), expected=len(hosts), max_unavailable=1)

    def fill(self) -> None:
        """Every node filled up to its target with ordinary workloads (``_CATALOGUE``)."""
        f = self.f
        placements: dict[str, list[str]] = {app: [] for app, *_ in _CATALOGUE}
        for x in self.order:
            for _ in range(64):
                app, cpu, _memory, _extra = f.rng.choice(_CATALOGUE)
                if not self.room(x, cpu):
                    break
                self.put(x, cpu)
                placements[app].append(x)
        for app, cpu, memory, extra in _CATALOGUE:
            if not placements[app]:
                continue
            template = _placed_by_default(app, {"cpu": f"{cpu}m", "memory": memory}, **extra)
            owner = f.job(app, _NS) if app == "report" else f.replicaset(app, _NS)
            f.pods(owner, template, placements[app])
            if app in ("frontend", "catalog"):
                f.pdb(app, _NS, match_labels(app=app), expected=len(placements[app]), min_available="50%")

    def bare_pods(self) -> None:
        """A few bare pods someone started by hand."""
        bare = _placed_by_default("debug", {"cpu": "100m", "memory": "128Mi"})
        for x in self.order[: max(1, self.nodes // 50)]:
            self.f.pod(Owner("", "", _NS, ""), bare, x)
