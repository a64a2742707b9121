"""The synthetic Nodes and Pods of the live benchmark, as API objects (plain dicts).

Shared by the live bench (`adapters/bench/live_target.py`, which creates them on a server) and
the live loop's own cost probe (`adapters/live/window_cost.py`, which feeds them to a cache):
a piece of its own, so that neither package imports the other for it (`adapters/bench` uses
`adapters/live`, never the other way: an import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import time
from typing import Any, Optional

ZONES = ("zone-a", "zone-b", "zone-c")
# Pod shapes of the generated workload (cpu, memory): small services, as scheduler_perf's
# default pod (100m, 500Mi) and two larger ones; dealt round-robin.
SHAPES = (("100m", "256Mi"), ("250m", "512Mi"), ("500m", "1Gi"))
NODE_RESOURCES = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
# The label and taint that mark (and reserve) the fake nodes of one run on a real cluster.
RUN_LABEL = "cpsat-scheduler.bench/run"
# Taints a node lifecycle controller puts on nodes whose (absent) kubelet stops reporting.
NODE_DOWN_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def node_object(name: str, i: int, *, run: Optional[str] = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "topology.kubernetes.io/zone": ZONES[i % len(ZONES)]}
    spec: dict[str, Any] = {}
    if run:
        labels[RUN_LABEL] = run
        spec["taints"] = [{"key": RUN_LABEL, "value": run, "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": node_status()}


def node_status() -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"allocatable": NODE_RESOURCES, "capacity": NODE_RESOURCES,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node of cpsat-scheduler's live bench",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}


def pod_object(name: str, i: int, namespace: str, scheduler: str, *, run: Optional[str] = None) -> dict[str, Any]:
    cpu, memory = SHAPES[i % len(SHAPES)]
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if run:
        spec["nodeSelector"] = {RUN_LABEL: run}
        spec["tolerations"] = [{"key": RUN_LABEL, "operator": "Equal", "value": run, "effect": "NoSchedule"},
                               *({"key": key, "operator": "Exists"} for key in NODE_DOWN_TAINTS)]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": f"svc-{i % len(SHAPES)}"}},
            "spec": spec}
