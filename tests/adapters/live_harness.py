"""Shared pieces of the live scheduler's tests: object builders, a cluster, a scheduler.

Every test runs the real scheduler against the in-memory API server over HTTP through the
official client; the test itself reads and writes the cluster through the same server.
Durations are shortened (backoffs, lease, window wait) so that tests take fractions of a
second, and every wait is bounded.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Iterator, Optional

from kubernetes import client

from adapters.apiserver import FakeApiServer
from adapters.apiserver.resources import GANG_APIS, GANG_APIS_EXTRA
from adapters.live import LiveOptions, Scheduler
from adapters.live.api_client import KubeApi, configured_client
from adapters.live.leader import LeaseSettings
from adapters.live.queue import QueueSettings
from adapters.live.simulate import final_state_violations
from models import SchedulerConfig

NS = "default"
SCHEDULER = "cpsat-scheduler"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


# --- builders --------------------------------------------------------------------------------

def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110", zone: str = "a",
         taints: Optional[list[dict[str, str]]] = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                   "capacity": {"cpu": cpu, "memory": memory, "pods": pods}}}
    if taints:
        obj["spec"]["taints"] = taints
    return obj


def pod(name: str, *, cpu: str = "100m", memory: str = "64Mi", scheduler: str = SCHEDULER, ns: str = NS,
        priority_class: Optional[str] = None, labels: Optional[dict[str, str]] = None,
        node_name: Optional[str] = None, running: bool = False, gang: Optional[str] = None,
        anti_affinity: Optional[dict[str, str]] = None, scheduling_group: Optional[str] = None,
        workload_ref: Optional[tuple[str, str]] = None, volcano_group: Optional[str] = None) -> dict[str, Any]:
    """A pod; `gang` joins a scheduler-plugins PodGroup (label), `scheduling_group` a v1alpha2
    PodGroup (spec.schedulingGroup), `workload_ref` (workload, pod group) a Workload's gang and
    `volcano_group` a Volcano PodGroup (annotation)."""
    labels = dict(labels or {})
    if gang:
        labels[GROUP_LABEL] = gang
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_name:
        spec["nodeName"] = node_name
    if anti_affinity:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": anti_affinity}, "topologyKey": "kubernetes.io/hostname"}]}}
    if scheduling_group:
        spec["schedulingGroup"] = {"podGroupName": scheduling_group}
    if workload_ref:
        spec["workloadRef"] = {"name": workload_ref[0], "podGroup": workload_ref[1]}
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec}
    if volcano_group:
        obj["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": volcano_group}
    if running:
        obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return obj


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def pdb(name: str, *, min_available: int, **match: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": match}}}


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member}}


def core_pod_group(name: str, min_count: int, *, topology_key: Optional[str] = None) -> dict[str, Any]:
    """A Kubernetes 1.36 `scheduling.k8s.io/v1alpha2` PodGroup with a gang policy."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def workload(name: str, groups: dict[str, int]) -> dict[str, Any]:
    """A Kubernetes 1.35 `scheduling.k8s.io/v1alpha1` Workload: pod group name -> gang minCount."""
    return {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"podGroups": [{"name": g, "policy": {"gang": {"minCount": n}}} for g, n in groups.items()]}}


def volcano_pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member}}


# --- waiting ---------------------------------------------------------------------------------

def first_time_claims(namespace: str) -> list[dict[str, Any]]:
    """Two WaitForFirstConsumer claims a pod mounts for the first time: ``scratch``, which its
    class provisions (PreBind sets the claim's selected node), and ``spool``, which a local volume
    serves (PreBind sets the volume's claimRef) — with their StorageClasses and the volume."""
    def claim(name: str, storage_class: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                         "resources": {"requests": {"storage": "1Gi"}}}}

    def storage_class(name: str, provisioner: str) -> dict[str, Any]:
        return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}

    disk = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "disk-1"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local"}}
    return [storage_class("fast", "disk.csi.example.com"), storage_class("local", "kubernetes.io/no-provisioner"),
            disk, claim("scratch", "fast"), claim("spool", "local")]


def wait_for(condition: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01) -> Any:
    """Poll until `condition()` is truthy (returned) or `timeout` passes (its last value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def live_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate()
                  if t.name.startswith(("cpsat-live", "fake-apiserver")) and t.is_alive())


# --- options ---------------------------------------------------------------------------------

def fast_options(**overrides: Any) -> LiveOptions:
    """Production behaviour with test-sized durations."""
    values: dict[str, Any] = dict(
        engine="greedy", window_size=100, window_wait=0.02, leader_elect=False,
        lease=LeaseSettings(namespace=NS, duration=2.0, renew_deadline=1.0, retry_period=0.1),
        queue=QueueSettings(initial_backoff=0.05, max_backoff=0.2, max_unschedulable=30.0),
        retry_backoffs=(0.01, 0.02), watch_backoffs=(0.02, 0.05), preemption_timeout=10.0,
        uncertain_bind_ttl=2.0, housekeeping=0.02, bind_concurrency=4)
    values.update(overrides)
    return LiveOptions(**values)


def fast_config(**overrides: Any) -> SchedulerConfig:
    overrides.setdefault("time_limit_seconds", 2.0)
    overrides.setdefault("workers", 2)
    return SchedulerConfig().with_overrides(**overrides)


# --- a cluster and its schedulers ------------------------------------------------------------

class Cluster:
    """A started API server, a client for the test's own actions, and a record of every bind."""

    def __init__(self, objects: Iterable[dict[str, Any]] = (), **server_args: Any) -> None:
        server_args.setdefault("kubelet_start_seconds", 0.01)
        server_args.setdefault("kubelet_grace_seconds", 0.05)
        self.server = FakeApiServer(objects, **server_args).start()
        self._api_client = client.ApiClient(self.server.client_configuration())
        self.core = client.CoreV1Api(self._api_client)
        self.binds: list[tuple[str, str]] = []  # every (pod, node) a pod was ever bound to, in order
        self.server.store.add_listener(self._record)
        self.schedulers: list[Scheduler] = []
        self._apis: list[KubeApi] = []

    def _record(self, key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key != "pods" or event != "MODIFIED" or prev is None:
            return
        before, after = (prev.get("spec") or {}).get("nodeName"), (obj.get("spec") or {}).get("nodeName")
        if after and before != after:
            meta = obj["metadata"]
            self.binds.append((f"{meta['namespace']}/{meta['name']}", after))

    def scheduler(self, config: Optional[SchedulerConfig] = None, options: Optional[LiveOptions] = None,
                  *, start: bool = True, **callbacks: Any) -> Scheduler:
        api = KubeApi(configured_client(self.server.client_configuration()))
        self._apis.append(api)
        sched = Scheduler(api, config or fast_config(), options or fast_options(), **callbacks)
        self.schedulers.append(sched)
        if start:
            sched.start()
            assert sched.wait_synced(5.0)
        return sched

    def create(self, *objects: dict[str, Any]) -> None:
        """Create objects through the API, as a user would (admission included)."""
        for obj in objects:
            kind = obj["kind"]
            if kind == "Pod" and "workloadRef" in obj["spec"]:
                self._create_other(obj)  # a 1.35 field the typed client (1.36's) no longer knows
            elif kind == "Pod":
                self.core.create_namespaced_pod(obj["metadata"].get("namespace", NS), obj)
            elif kind == "Node":
                self.core.create_node(obj)
            elif kind == "Namespace":
                self.core.create_namespace(obj)
            else:
                self._create_other(obj)

    def _create_other(self, obj: dict[str, Any]) -> None:
        import json

        from adapters.apiserver.api import Request

        api_version, kind = obj["apiVersion"], obj["kind"]
        if kind == "Pod":
            path = f"/api/v1/namespaces/{obj['metadata'].get('namespace', NS)}/pods"
            self.server.api.handle(Request("POST", path, body=json.dumps(obj).encode()))
            return
        plural = {"PodGroup": "podgroups", "PodDisruptionBudget": "poddisruptionbudgets",
                  "PriorityClass": "priorityclasses", "Workload": "workloads",
                  "CompositePodGroup": "compositepodgroups"}[kind]
        base = f"/apis/{api_version}"
        path = f"{base}/namespaces/{obj['metadata'].get('namespace', NS)}/{plural}" if kind != "PriorityClass" \
            else f"{base}/{plural}"
        self.server.api.handle(Request("POST", path, body=json.dumps(obj).encode()))

    def pod(self, name: str, ns: str = NS) -> Optional[dict[str, Any]]:
        return self.server.store.get("pods", ns, name)

    def node_of(self, name: str, ns: str = NS) -> Optional[str]:
        obj = self.pod(name, ns)
        return (obj.get("spec") or {}).get("nodeName") if obj else None

    def bound(self) -> dict[str, str]:
        out = {}
        for obj in self.server.store.list("pods"):
            node_name = (obj.get("spec") or {}).get("nodeName")
            if node_name:
                out[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = node_name
        return out

    def events(self, reason: Optional[str] = None) -> list[dict[str, Any]]:
        return [e for e in self.server.store.list("events") if reason is None or e.get("reason") == reason]

    def violations(self, config: Optional[SchedulerConfig] = None) -> list[str]:
        """Replay every bind the schedulers made on the final state through the validator."""
        objects = [o for key in ("nodes", "pods", "poddisruptionbudgets", "priorityclasses", "podgroups",
                                 *(r.key for r in GANG_APIS.values()),
                                 *(r.key for extra in GANG_APIS_EXTRA.values() for r in extra),
                                 "persistentvolumeclaims", "persistentvolumes",
                                 "storageclasses", "csinodes", "deviceclasses", "resourceslices", "resourceclaims",
                                 "resourceclaimtemplates", "namespaces") for o in self.server.store.list(key)]
        bound_by_us = {k: n for k, n in self.binds}
        return final_state_violations(objects, bound_by_us, config or fast_config())

    def double_binds(self) -> list[str]:
        """Pods bound more than once (to any node): must never happen."""
        seen: dict[str, int] = {}
        for key, _ in self.binds:
            seen[key] = seen.get(key, 0) + 1
        return sorted(k for k, n in seen.items() if n > 1)

    def close(self) -> None:
        for sched in self.schedulers:
            sched.stop()
        for api in self._apis:
            api.close()
        self._api_client.close()
        self.server.stop()


def cluster_factory(default: Optional[list[dict[str, Any]]] = None) -> Iterator[Callable[..., "Cluster"]]:
    """The body of a test module's ``make_cluster`` fixture (``yield from cluster_factory()``):
    makes clusters of the given objects (``default`` when none are given), closes them all after
    the test, and checks that no scheduler thread outlives them."""
    clusters: list[Cluster] = []

    def make(objects: Optional[list[dict[str, Any]]] = None, **kwargs: Any) -> Cluster:
        cluster = Cluster(objects if objects is not None else list(default or []), **kwargs)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
    assert wait_for(lambda: not live_threads(), timeout=5.0), live_threads()
