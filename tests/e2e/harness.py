"""What the e2e tests need around a real control plane: the parts of a cluster nobody runs
here (a kubelet's Ready nodes and finished deletions, the disruption controller's budget
status), the live scheduler as a separate process with its own identity, and a record of every
change to the test's pods as the API server's watch reports it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import _gates, ensure_default_service_account, free_port

REPO = Path(__file__).resolve().parents[2]
SCHEDULER = "cpsat-scheduler"


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


class PodRecorder(threading.Thread):
    """Watches one namespace's pods: records each event as (type, name, node, nominated node,
    condition types, terminating), and, as a kubelet would once its containers stopped, finishes
    the deletion of every terminating pod (grace period 0)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        super().__init__(daemon=True, name=f"pods-{namespace}")
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.events: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._watch = watch.Watch()
        self._lock = threading.Lock()

    def run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self.core.list_namespaced_pod(self.namespace).metadata.resource_version
                for event in self._watch.stream(self.core.list_namespaced_pod, self.namespace,
                                                resource_version=version, timeout_seconds=5,
                                                _request_timeout=10):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    self._record(event["type"], pod)
                    if self._stop.is_set():
                        return
            except ApiException as exc:
                if exc.status == 410:
                    version = ""
                else:
                    time.sleep(0.2)
            except Exception:   # a dropped stream: watch again from where we were
                time.sleep(0.2)

    def _record(self, kind: str, pod: Any) -> None:
        conditions = {c.type: (c.status, c.reason or "") for c in (pod.status.conditions or [])}
        entry = {"type": kind, "name": pod.metadata.name, "node": pod.spec.node_name,
                 "nominated": pod.status.nominated_node_name, "conditions": conditions,
                 "terminating": pod.metadata.deletion_timestamp is not None}
        with self._lock:
            self.events.append(entry)
        if kind != "DELETED" and entry["terminating"]:
            try:
                self.core.delete_namespaced_pod(pod.metadata.name, self.namespace, grace_period_seconds=0)
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def stop(self) -> None:
        self._stop.set()
        self._watch.stop()

    def history(self, name: Optional[str] = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if name is None or e["name"] == name]

    def index(self, name: str, predicate: Callable[[dict[str, Any]], bool]) -> int:
        """Position in the whole record of the first event of `name` that matches (-1: none)."""
        with self._lock:
            return next((i for i, e in enumerate(self.events) if e["name"] == name and predicate(e)), -1)


class LiveScheduler:
    """`cpsat-scheduler run` as its own process (its own process group), with the kubeconfig of
    the cpsat-scheduler service account, so every call it makes meets the real authorizer."""

    def __init__(self, plane: ControlPlane, log: Path, *extra: str, lease_duration: float = 4.0) -> None:
        self.log = log
        # port 0: the process takes a free port itself and logs it (a port picked here and bound
        # by the process seconds later could be taken by then: the machine is shared)
        self.metrics_port = 0
        self._log_start = log.stat().st_size if log.exists() else 0   # the log is appended to
        command = [sys.executable, "-m", "adapters", "run", f"--kubeconfig={plane.scheduler_kubeconfig}",
                   "--lease-namespace=cpsat-scheduler", f"--lease-duration={lease_duration}",
                   f"--renew-deadline={lease_duration * 0.75}", "--retry-period=0.5",
                   "--metrics-addr=127.0.0.1:0", "--window-wait=100", "--time-limit=5",
                   "--verbose", *extra]
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self) -> bool:
        """/readyz answers 200: the caches are synced (and, with leader election, it leads)."""
        if not self.metrics_port:
            found = re.search(r"/metrics on 127\.0\.0\.1:(\d+)", self.log.read_bytes()[self._log_start:].decode(errors="replace"))
            if not found:
                return False
            self.metrics_port = int(found.group(1))
        try:
            with socket.create_connection(("127.0.0.1", self.metrics_port), timeout=1) as sock:
                sock.sendall(b"GET /readyz HTTP/1.0\r\nHost: x\r\n\r\n")
                return sock.recv(64).split(b" ")[1] == b"200"
        except (OSError, IndexError):
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash: no hand-over of the Lease."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                # a pod's default termination grace: its shutdown may finish binds and then take
                # up to 15 s (DRAIN_SECONDS) to send its queued events; a SIGKILL before loses them
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class Cluster:
    """One test's view of the control plane: a namespace of its own, nodes with its own prefix,
    the admin's typed clients, a pod recorder, and the schedulers it started. `close` deletes
    its pods and nodes and stops its schedulers, whatever the test did."""

    def __init__(self, plane: ControlPlane, workdir: Path) -> None:
        self.plane = plane
        self.workdir = workdir
        self.api = config.new_client_from_config(str(plane.admin_kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.coordination = client.CoordinationV1Api(self.api)
        self.ns = f"e2e-{uuid.uuid4().hex[:8]}"
        self.prefix = self.ns
        self.core.create_namespace({"metadata": {"name": self.ns}})
        ensure_default_service_account(self.core, self.ns)
        self.nodes: list[str] = []
        self.priority_classes: list[str] = []
        self.schedulers: list[LiveScheduler] = []
        self.pods = PodRecorder(self.api, self.ns)
        self.pods.start()

    # --- the parts nobody runs here ------------------------------------------------------
    def node(self, name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
             labels: Optional[dict[str, str]] = None) -> str:
        """A Node, made Ready with its capacity as a kubelet would report it, and without the
        node.kubernetes.io/not-ready taint the API server's admission puts on every new node (the
        node lifecycle controller lifts it once the node is Ready). Returns its name (prefixed
        with the test's namespace, so tests never share nodes)."""
        full = f"{self.prefix}-{name}"
        all_labels = {"kubernetes.io/hostname": full, "kubernetes.io/os": "linux", **(labels or {})}
        self.core.create_node({"metadata": {"name": full, "labels": all_labels}})
        self.nodes.append(full)
        resources = {"cpu": cpu, "memory": memory, "pods": pods}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.core.patch_node_status(full, {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
        taints = self.core.read_node(full).spec.taints or []
        kept = [t for t in taints if t.key != "node.kubernetes.io/not-ready"]
        if len(kept) != len(taints):
            self.core.patch_node(full, {"spec": {"taints": [self.api.sanitize_for_serialization(t) for t in kept]
                                                 or None}})
        return full

    def running(self, name: str) -> None:
        """A bound pod's status as its kubelet would report it: Running and Ready."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.core.patch_namespaced_pod_status(name, self.ns, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}})

    def budget_status(self, name: str, allowed: int, healthy: int, desired: int, expected: int) -> None:
        """A PodDisruptionBudget's status as the disruption controller would write it; the
        Eviction API refuses evictions of a budget whose status is older than its spec."""
        current = self.policy.read_namespaced_pod_disruption_budget(name, self.ns)
        self.policy.patch_namespaced_pod_disruption_budget_status(name, self.ns, {"status": {
            "observedGeneration": current.metadata.generation, "disruptionsAllowed": allowed,
            "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected}})

    # --- objects -------------------------------------------------------------------------
    def pod(self, name: str, *, cpu: str = "100m", memory: str = "64Mi", priority_class: Optional[str] = None,
            node: Optional[str] = None, labels: Optional[dict[str, str]] = None,
            group: Optional[str] = None, scheduler: str = SCHEDULER) -> dict[str, Any]:
        spec: dict[str, Any] = {"schedulerName": scheduler, "terminationGracePeriodSeconds": 30,
                                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
        if priority_class:
            spec["priorityClassName"] = self.priority_class_name(priority_class)
        if node:
            spec["nodeName"] = node
        if group:
            spec["schedulingGroup"] = {"podGroupName": group}
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.ns, "labels": labels or {}}, "spec": spec}
        self.core.create_namespaced_pod(self.ns, obj)
        return obj

    def priority_class_name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def priority_class(self, short: str, value: int) -> None:
        name = self.priority_class_name(short)
        self.scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        self.priority_classes.append(name)

    @property
    def gang_version(self) -> str:
        """The scheduling.k8s.io version this control plane's PodGroups are written in (1.37:
        v1beta1, 1.36: v1alpha2)."""
        return self.plane.features.gang_api.rpartition("/")[2]

    @property
    def scheduled_condition(self) -> str:
        """What kube-scheduler (and so cpsat-scheduler) calls a placed PodGroup's condition here."""
        return self.plane.features.initially_scheduled

    def workload(self, name: str, template: str, min_count: int) -> None:
        """A Workload of one pod group template with a gang policy (1.36 and 1.37 alike)."""
        self.custom.create_namespaced_custom_object("scheduling.k8s.io", self.gang_version, self.ns, "workloads", {
            "apiVersion": f"scheduling.k8s.io/{self.gang_version}", "kind": "Workload", "metadata": {"name": name},
            "spec": {"podGroupTemplates": [{"name": template, "schedulingPolicy": {"gang": {"minCount": min_count}}}]}})

    def pod_group(self, name: str, min_count: int, *, topology_key: Optional[str] = None,
                  template: Optional[tuple[str, str]] = None, extra: Optional[dict[str, Any]] = None) -> None:
        """A PodGroup with a gang policy in the plane's version; `template`: (workload, template)
        it is made from, referred to as that version does; `extra`: more spec fields
        (1.37: disruptionMode, priority, ...)."""
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}, **(extra or {})}
        if topology_key:
            spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
        if template and self.gang_version == "v1alpha2":
            spec["podGroupTemplateRef"] = {"workload": {"workloadName": template[0],
                                                        "podGroupTemplateName": template[1]}}
        elif template:
            spec["workloadRef"] = {"workloadName": template[0], "templateName": template[1]}
        self.custom.create_namespaced_custom_object("scheduling.k8s.io", self.gang_version, self.ns, "podgroups", {
            "apiVersion": f"scheduling.k8s.io/{self.gang_version}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.ns}, "spec": spec})

    def group_conditions(self, name: str) -> dict[str, dict[str, Any]]:
        found = self.custom.get_namespaced_custom_object("scheduling.k8s.io", self.gang_version, self.ns,
                                                         "podgroups", name)
        return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}

    # --- reading -------------------------------------------------------------------------
    def bound(self) -> dict[str, str]:
        return {p.metadata.name: p.spec.node_name for p in self.core.list_namespaced_pod(self.ns).items
                if p.spec.node_name}

    def node_of(self, name: str) -> Optional[str]:
        try:
            return self.core.read_namespaced_pod(name, self.ns).spec.node_name  # type: ignore[no-any-return]
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def exists(self, name: str) -> bool:
        try:
            self.core.read_namespaced_pod(name, self.ns)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise

    def events(self, reason: str) -> list[Any]:
        return [e for e in self.core.list_namespaced_event(self.ns).items if e.reason == reason]

    def overcommitted(self) -> list[str]:
        """Nodes whose bound pods request more CPU or memory than the node allocates."""
        from models.quantity import parse_quantity   # the project's own quantity parser

        pods = self.core.list_namespaced_pod(self.ns).items
        bad = []
        for node in self.nodes:
            alloc = self.core.read_node(node).status.allocatable
            for res in ("cpu", "memory"):
                used = sum(parse_quantity(c.resources.requests.get(res, "0"))
                           for p in pods if p.spec.node_name == node for c in p.spec.containers)
                if used > parse_quantity(alloc[res]):
                    bad.append(f"{node}:{res}")
        return bad

    # --- schedulers ----------------------------------------------------------------------
    def scheduler(self, *extra: str, name: str = "scheduler", lease_duration: float = 4.0,
                  wait_ready: bool = True) -> LiveScheduler:
        sched = LiveScheduler(self.plane, self.workdir / f"{name}.log", *extra, lease_duration=lease_duration)
        self.schedulers.append(sched)
        # a new process on the loaded 2-core machine takes 10-20 s to import and take the lease
        if wait_ready and not wait_for(sched.ready, timeout=120):
            raise AssertionError(f"the live scheduler never became ready; log: {sched.log}\n{sched.text()[-3000:]}")
        return sched

    def close(self) -> None:
        for sched in self.schedulers:
            sched.stop()
        self.pods.stop()
        for pod in self.core.list_namespaced_pod(self.ns).items:
            try:
                self.core.delete_namespaced_pod(pod.metadata.name, self.ns, grace_period_seconds=0)
            except ApiException:
                pass
        for node in self.nodes:
            try:
                self.core.delete_node(node)
            except ApiException:
                pass
        for name in self.priority_classes:
            try:
                self.scheduling.delete_priority_class(name)
            except ApiException:
                pass
        self.api.close()


def kube_scheduler_profile(plane: ControlPlane, profile: str, workdir: Path, log: Any,
                           verbosity: int = 1, gates: Optional[dict[str, bool]] = None,
                           **settings_: Any) -> subprocess.Popen[bytes]:
    """The real kube-scheduler with one profile named ``profile`` (pods whose schedulerName names
    it), as system:kube-scheduler, leader election off, logging to ``log`` (a binary file).
    ``gates``: feature gates set beside the plane's (``WatchListClient``, ...).
    ``settings_``: more fields of its KubeSchedulerConfiguration (percentageOfNodesToScore, ...)."""
    assert plane.built is not None
    import yaml

    settings = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(plane.kube_scheduler_kubeconfig)},
                "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": profile}], **settings_}
    path = workdir / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(settings))
    return subprocess.Popen([str(plane.built.path("kube-scheduler")), f"--config={path}",
                             f"--authentication-kubeconfig={plane.kube_scheduler_kubeconfig}",
                             f"--authorization-kubeconfig={plane.kube_scheduler_kubeconfig}",
                             "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                             f"--feature-gates={_gates(plane.features.feature_gates | (gates or {}))}", f"--v={verbosity}"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def settle(read: Callable[[], Any], done: Callable[[Any], bool], *, quiet: float = 3.0,
           limit: float = 180.0) -> tuple[Any, float]:
    """Poll ``read`` until what it returns is ``done`` and has not changed for ``quiet`` seconds
    (a scheduler has settled), or ``limit`` seconds pass: (the last reading, when it last changed)."""
    last, since = read(), time.monotonic()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
        elif done(now) and time.monotonic() - since >= quiet:
            break
    return last, since


def stop_process(proc: Optional[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then SIGKILL after 15 s: a scheduler a test started, whatever state it is in."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def dump(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)
