"""Workloads sized for the solver's scale: the two fixed targets (``scale-3k``, ``scale-10k``) and
the real-shaped cluster (``realistic``, sized by ``--scale``, tens of thousands of pods)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from models import DEFAULT_SCHEDULER_NAME

from .objects import ZONES, Factory, PodTemplate, match_labels, tolerate, zone_spread
from .workload_kit import SCALES, Part, Workload, finish, gc_paused, make_nodes


# --------------------------------------------------------------------------- scale targets


def _deployment_mix(f: Factory, ns: str, specs: list[tuple[str, str, str, dict[str, Any]]], replicas: int) -> None:
    for app, cpu, memory, extra in specs:
        template = PodTemplate(app, {"cpu": cpu, "memory": memory}, **extra)
        f.pods(f.replicaset(app, ns), template, [None] * replicas)


@gc_paused
def scale_3k(seed: int = 0) -> Workload:
    """The solver's first scale target: 1,000 nodes (8 CPU, 32Gi) each running two pods, and
    3,000 pending pods from 10 Deployments of different sizes (two pinned to a zone, one
    tolerating a taint nobody has). Everything fits; the point is a valid plan within 20 s."""
    f = Factory(seed)
    ns = "scale"
    nodes = make_nodes(f, "node", 1000, cpu="8", memory="32Gi", instance_type="bench.2xlarge")
    running = [("kube-dns", "100m", "128Mi"), ("metrics", "250m", "512Mi"), ("ingress", "500m", "1Gi"), ("logs", "200m", "256Mi")]
    for i, (app, cpu, memory) in enumerate(running):
        owner = f.replicaset(app, ns)
        hosts = [x for j, x in enumerate(nodes) for k in range(2) if (2 * j + k) % len(running) == i]
        f.pods(owner, PodTemplate(app, {"cpu": cpu, "memory": memory}), hosts)
    specs: list[tuple[str, str, str, dict[str, Any]]] = [
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
    return finish("scale-3k", "target", seed, f, None, inspect.getdoc(scale_3k) or "")


@gc_paused
def scale_10k(seed: int = 0) -> Workload:
    """The solver's second scale target: 5,000 empty nodes (8 CPU, 32Gi) and 10,000 pending pods
    of 10 classes (1,000 each, 100m to 2 CPU). A decision is due within 10 s."""
    f = Factory(seed)
    make_nodes(f, "node", 5000, cpu="8", memory="32Gi", instance_type="bench.2xlarge")
    specs: list[tuple[str, str, str, dict[str, Any]]] = [
        (f"svc-{i}", cpu, memory, {})
        for i, (cpu, memory) in enumerate(
            [("100m", "128Mi"), ("250m", "512Mi"), ("500m", "1Gi"), ("750m", "1536Mi"), ("1", "2Gi"),
             ("1", "4Gi"), ("1500m", "3Gi"), ("2", "4Gi"), ("2", "8Gi"), ("250m", "2Gi")]
        )
    ]
    _deployment_mix(f, "scale", specs, 1000)
    return finish("scale-10k", "target", seed, f, None, inspect.getdoc(scale_10k) or "")


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


@gc_paused
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
    for ds, ds_cpu, ds_memory in (("kube-proxy", "100m", "128Mi"), ("node-exporter", "50m", "64Mi")):
        daemon = placed_by_default(ds, {"cpu": ds_cpu, "memory": ds_memory}, priority=2000001000,
                                   priority_class="system-node-critical")
        f.pods(f.daemonset(ds, "kube-system"), daemon, list(nodes))
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
    return finish("realistic", scale, seed, f, None, inspect.getdoc(realistic) or "")
