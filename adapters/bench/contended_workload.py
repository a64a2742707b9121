"""``contended``: a cluster shaped like a real one, busy, with more pending demand than room.

Issue 34: the other workloads have a handful of pod shapes and room for everything pending, so
greedy's plan is often already the best one and the costs of preemption never show. A production
dump has node pools of several shapes (one of them tainted GPUs), zone and rack labels, nodes
70-90% full of pods of hundreds of apps, and a queue of hundreds of Deployments, each with its
own requests and its own rules, in several priority classes, asking for more than is free: that
is where kube-scheduler preempts, and where a joint plan can do better than one pod at a time.

Sizes, by ``--scale``: quick 300 nodes / ~9,000 running / 3,000 pending; medium 1,000 / ~30,000 /
10,000; large 5,000 / ~150,000 / 30,000. ``cluster(...)`` makes any size (the tests use a small
one). No known placement is given: the queue does not fit.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Optional

from models import DEFAULT_SCHEDULER_NAME

from .objects import (
    HOSTNAME, INSTANCE_TYPE, ZONES, Factory, PodTemplate, match_labels, required_anti_affinity,
    required_node_affinity, tolerate, zone_spread,
)
from .workload_kit import SCALES, Workload, finish, gc_paused

# (nodes, running pods per node on average, pending pods, pending Deployments, running-only apps,
# PodGroups) at each scale.
_SIZES = {
    "quick": (300, 30, 3000, 200, 100, 3),
    "medium": (1000, 30, 10000, 600, 250, 6),
    "large": (5000, 30, 30000, 1500, 600, 12),
}
NAMESPACE = "prod"
GPU = "nvidia.com/gpu"
RACK = "topology.bench.io/rack"
POOL = "bench.io/node-pool"
NODES_PER_RACK = 16
# The GPU pool's taint: only pods tolerating it land there (the usual cloud setup).
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = tolerate(GPU)


@dataclass(frozen=True)
class _Pool:
    name: str
    instance_type: str
    cpu: int  # cores
    memory: int  # GiB
    gpus: int
    share: float  # of the nodes


# The node pools; the GPU pool last (its nodes are tainted).
POOLS = (
    _Pool("general", "m5.4xlarge", 16, 64, 0, 0.40),
    _Pool("compute", "c5.9xlarge", 36, 72, 0, 0.20),
    _Pool("memory", "r5.4xlarge", 16, 128, 0, 0.15),
    _Pool("large", "m5.8xlarge", 32, 128, 0, 0.15),
    _Pool("gpu", "p3.8xlarge", 32, 244, 4, 0.10),
)
CPU_TYPES = tuple(p.instance_type for p in POOLS if not p.gpus)

# The four priority classes (name, value) and how many apps fall in each (weights).
PRIORITY_CLASSES = (("batch-low", 100), ("standard", 1000), ("production", 10000), ("business-critical", 100000))
_PRIORITY_WEIGHTS = (30, 40, 22, 8)
# Daemons on every node, at system-node-critical.
_DAEMONS = (("kube-proxy", "100m", "128Mi"), ("node-exporter", "50m", "64Mi"))
SYSTEM_NODE_CRITICAL = 2000001000

# Share of the pending pods (not Deployments) with each rule, as issue 34 states them.
SPREAD_SHARE = 0.20  # zone topology spread, DoNotSchedule
ANTI_SHARE = 0.10  # required anti-affinity on the hostname, against the Deployment's own pods
AFFINITY_SHARE = 0.15  # required node affinity to one instance type
GPU_SHARE = 0.03  # GPU pods (tolerating the taint)
_ANTI_MAX = 24  # pending pods of one anti-affinity Deployment at most
# CPU request bases (millicores) and weights; memory per CPU (MiB per core) and weights. Each app
# draws its own base and jitters it, so no two Deployments share a request shape.
_CPU = (100, 250, 500, 750, 1000, 1500, 2000, 3000)
_CPU_WEIGHTS = (16, 24, 22, 14, 10, 7, 4, 3)
_MEM_PER_CPU = (1024, 2048, 4096, 8192)
_MEM_WEIGHTS = (20, 35, 33, 12)


@dataclass
class _App:
    name: str
    cpu: int  # millicores
    memory: int  # MiB
    gpus: int
    priority: tuple[str, int]
    spread: bool = False
    anti: bool = False
    instance_type: str = ""  # required node affinity to it ("" none)
    pending: int = 0
    owner: Any = None
    _templates: Optional[dict[bool, PodTemplate]] = None

    def template(self, running: bool) -> PodTemplate:
        """The Deployment's pod template (running pods were placed by the default scheduler)."""
        if self._templates is None:
            self._templates = {}
        hit = self._templates.get(running)
        if hit is None:
            selector = match_labels(app=self.name)
            affinity: dict[str, Any] = {}
            if self.instance_type:
                affinity.update(required_node_affinity({"key": INSTANCE_TYPE, "operator": "In", "values": [self.instance_type]}))
            if self.anti:
                affinity.update(required_anti_affinity(selector, HOSTNAME))
            requests = {"cpu": f"{self.cpu}m", "memory": f"{self.memory}Mi"}
            if self.gpus:
                requests[GPU] = str(self.gpus)
            hit = self._templates[running] = PodTemplate(
                self.name, requests, limits={GPU: str(self.gpus)} if self.gpus else None,
                priority=self.priority[1], priority_class=self.priority[0], affinity=affinity or None,
                tolerations=(GPU_TOLERATION,) if self.gpus else (),
                spread=(zone_spread(selector),) if self.spread else (),
                scheduler_name="default-scheduler" if running else DEFAULT_SCHEDULER_NAME,
            )
        return hit


def _shape(f: Factory, memory_pool: bool) -> tuple[int, int]:
    """One app's own requests: a base drawn by weight, jittered by up to ±20% (10m, 16Mi steps)."""
    rng = f.rng
    cpu = rng.choices(_CPU, _CPU_WEIGHTS)[0]
    per_cpu = rng.choices(_MEM_PER_CPU, _MEM_WEIGHTS)[0] if not memory_pool else 8192
    memory = max(64, cpu * per_cpu // 1000)
    cpu = max(50, round(cpu * rng.uniform(0.8, 1.2) / 10) * 10)
    memory = max(64, round(memory * rng.uniform(0.8, 1.2) / 16) * 16)
    return cpu, memory


def _sizes(f: Factory, deployments: int, total: int) -> list[int]:
    """Pending pods per Deployment, skewed as real ones are (a few large, many small), ``total``
    in all, each at least 1."""
    weights = [f.rng.paretovariate(1.6) for _ in range(deployments)]
    scale = (total - deployments) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    for i in range(total - sum(sizes)):  # the rounding's remainder, one each to the first ones
        sizes[i % deployments] += 1
    return sizes


def _mark(f: Factory, apps: list[_App], share: float, total: int, attr: str, value: Any,
          fits: Any = lambda app: True) -> None:
    """Give ``attr = value`` (None: a random CPU instance type each) to Deployments in random order
    until they hold ``share`` of the ``total`` pending pods (those ``fits`` refuses skipped)."""
    order = list(apps)
    f.rng.shuffle(order)
    marked = 0
    for app in order:
        if marked >= share * total:
            break
        if fits(app) and marked + app.pending <= share * total * 1.05:
            setattr(app, attr, value if value is not None else f.rng.choice(CPU_TYPES))
            marked += app.pending


@gc_paused
def contended(scale: str = "quick", seed: int = 0) -> Workload:
    """A busy real-shaped cluster with more pending demand than room (issue 34): 300 nodes at quick
    (medium 1,000, large 5,000) in 3 zones and racks of 16, five node pools (general, compute,
    memory, large, and a GPU pool tainted nvidia.com/gpu), filled to 70-90% by ~30 running pods
    per node of hundreds of apps in four priority classes; 3,000 pending pods (medium 10,000,
    large 30,000) from 200 Deployments (600, 1,500), each its own request shape, 20% of the pods
    with zone spread, 10% hostname anti-affinity, 15% node affinity to an instance type, GPU pods
    tolerating the taint, and a few PodGroups. Demand exceeds the free room, so the high classes
    preempt."""
    if scale not in _SIZES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    nodes, per_node, pending, deployments, others, gangs = _SIZES[scale]
    f = cluster(nodes, per_node, pending, deployments, others, gangs, seed)
    return finish("contended", scale, seed, f, None, inspect.getdoc(contended) or "")


def cluster(nodes: int, per_node: int, pending: int, deployments: int, others: int, gangs: int, seed: int) -> Factory:
    """The objects of a contended cluster of any size (``contended`` names the three benchmarked)."""
    f = Factory(seed)
    for name, value in PRIORITY_CLASSES:
        f.priority_class(name, value, description=f"bench priority {name}")
    names, pool_of = _nodes(f, nodes)
    apps = _apps(f, deployments + others, deployments, pending - _gang_pods(gangs))
    _running(f, names, pool_of, apps, per_node)
    _pending(f, apps, gangs)
    return f


def _nodes(f: Factory, count: int) -> tuple[list[str], dict[str, _Pool]]:
    width = max(4, len(str(count - 1)))
    pools: list[_Pool] = []
    for pool in POOLS:
        pools += [pool] * round(pool.share * count)
    pools = (pools + [POOLS[0]] * count)[:count]
    f.rng.shuffle(pools)
    names: list[str] = []
    pool_of: dict[str, _Pool] = {}
    for i, pool in enumerate(pools):
        name = f"node-{i:0{width}d}"
        zone = ZONES[i % len(ZONES)]
        rack = f"{zone}-rack-{i // (len(ZONES) * NODES_PER_RACK):03d}"
        f.node(name, cpu=str(pool.cpu), memory=f"{pool.memory}Gi", zone=zone, instance_type=pool.instance_type,
               labels={RACK: rack, POOL: pool.name}, taints=[GPU_TAINT] if pool.gpus else None,
               extended={GPU: str(pool.gpus)} if pool.gpus else None)
        names.append(name)
        pool_of[name] = pool
    return names, pool_of


def _apps(f: Factory, count: int, deployments: int, pending: int) -> list[_App]:
    """Every app: the first ``deployments`` have pending pods (``pending`` in all), the rest run only."""
    apps = []
    width = len(str(count - 1))
    gpu_apps = max(2, round(count * 0.04))
    shapes: set[tuple[int, int, int]] = set()
    for i in range(count):
        gpus = 0
        if i % (count // gpu_apps) == 0:
            gpus = f.rng.choice((1, 1, 2))
        memory_pool = not gpus and f.rng.random() < 0.1
        cpu, memory = _shape(f, memory_pool)
        if gpus:
            cpu, memory = gpus * f.rng.choice((4000, 6000)), gpus * f.rng.choice((24576, 49152))
        while (cpu, memory, gpus) in shapes:  # each app its own requests
            memory += 16
        shapes.add((cpu, memory, gpus))
        priority = f.rng.choices(PRIORITY_CLASSES, _PRIORITY_WEIGHTS)[0]
        apps.append(_App(f"app-{i:0{width}d}", cpu, memory, gpus, priority))
    f.rng.shuffle(apps)
    pending_apps = apps[:deployments]
    for app, size in zip(pending_apps, _sizes(f, deployments, pending)):
        app.pending = size
    cpu_apps = [a for a in pending_apps if not a.gpus]
    _mark(f, cpu_apps, SPREAD_SHARE, pending, "spread", True)
    _mark(f, cpu_apps, ANTI_SHARE, pending, "anti", True, lambda a: a.pending <= _ANTI_MAX)
    _mark(f, cpu_apps, AFFINITY_SHARE, pending, "instance_type", None)
    for app in apps:
        app.owner = f.replicaset(app.name, NAMESPACE)
    return apps


def _running(f: Factory, names: list[str], pool_of: dict[str, _Pool], apps: list[_App], per_node: int) -> None:
    """Daemons on every node; then each node filled up to a random 70-90% of its CPU and memory
    (GPU nodes: of their GPUs) by pods of the apps that may run there, until no app fits below
    that (or twice ``per_node`` pods)."""
    for ds, cpu, memory in _DAEMONS:
        template = PodTemplate(ds, {"cpu": cpu, "memory": memory}, priority=SYSTEM_NODE_CRITICAL,
                               priority_class="system-node-critical", scheduler_name="default-scheduler")
        f.pods(f.daemonset(ds, "kube-system"), template, list(names))
    by_type: dict[str, list[_App]] = {}
    for pool in POOLS:
        by_type[pool.instance_type] = [
            a for a in apps
            if bool(a.gpus) == bool(pool.gpus) and a.instance_type in ("", pool.instance_type)
        ]
    daemon_cpu = sum(int(c.rstrip("m")) for _, c, _ in _DAEMONS)
    daemon_mem = sum(int(m.rstrip("Mi")) for _, _, m in _DAEMONS)
    cap = per_node * 2 - len(_DAEMONS)  # pods of apps on one node at most
    for name in names:
        pool = pool_of[name]
        fill = f.rng.uniform(0.70, 0.90)
        room_cpu = int(pool.cpu * 1000 * fill) - daemon_cpu
        room_mem = int(pool.memory * 1024 * fill) - daemon_mem
        room_gpu = int(pool.gpus * fill + 0.5) if pool.gpus else 0
        candidates = by_type[pool.instance_type]
        here: set[str] = set()
        count = 0
        weights = _cumulative(candidates)
        while candidates and count < cap:
            app = f.rng.choices(candidates, cum_weights=weights)[0]
            if (app.cpu > room_cpu or app.memory > room_mem or app.gpus > room_gpu
                    or (app.anti and app.name in here)):
                # Near the target: only the apps that still fit (fewer each time).
                candidates = [a for a in candidates if a.cpu <= room_cpu and a.memory <= room_mem
                              and a.gpus <= room_gpu and not (a.anti and a.name in here)]
                weights = _cumulative(candidates)
                continue
            f.pod(app.owner, app.template(True), name)
            room_cpu -= app.cpu
            room_mem -= app.memory
            room_gpu -= app.gpus
            here.add(app.name)
            count += 1


def _cumulative(apps: list[_App]) -> list[float]:
    """Cumulative weights for drawing running pods: small pods are the many (weight 1/CPU^0.25)."""
    out, total = [], 0.0
    for app in apps:
        total += app.cpu ** -0.25
        out.append(total)
    return out


def _gang_pods(gangs: int) -> int:
    return sum(_gang_size(k) for k in range(gangs))


def _gang_size(k: int) -> int:
    return (4, 8, 12, 16)[k % 4]


def _pending(f: Factory, apps: list[_App], gangs: int) -> None:
    """The queue: every Deployment's pending pods, interleaved at random (a rollout here, a
    scale-up there), and a few training jobs as PodGroups (half of them on GPUs)."""
    entries: list[Optional[_App]] = [a for a in apps for _ in range(a.pending)]
    entries += [None] * gangs
    f.rng.shuffle(entries)
    gang = 0
    for app in entries:
        if app is not None:
            f.pod(app.owner, app.template(False), None)
            continue
        size = _gang_size(gang)
        name = f"train-{gang:02d}"
        f.pod_group(name, NAMESPACE, size)
        gpus = gang % 2 == 0
        requests = {"cpu": "4", "memory": "32Gi", GPU: "1"} if gpus else {"cpu": "2", "memory": "8Gi"}
        template = PodTemplate(name, requests, limits={GPU: "1"} if gpus else None, priority=PRIORITY_CLASSES[1][1],
                               priority_class=PRIORITY_CLASSES[1][0], tolerations=(GPU_TOLERATION,) if gpus else ())
        f.pods(f.job(name, NAMESPACE), template, [None] * size, group=name)
        gang += 1

