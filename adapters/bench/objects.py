"""Kubernetes objects as plain dicts, in the API's own camelCase JSON, for generated workloads.

The benchmark's workloads are lists of the dicts ``kubectl get -o json`` prints: the same lists
are parsed into a ``ClusterSnapshot``, preloaded into an API server for live runs, and written
out as files. This module is the one place that knows how those dicts look — names with a
ReplicaSet's ``pod-template-hash``, owner references, admission defaults (priority, default
tolerations), the status of a running pod — so the workload generators only say *what* runs
*where*.

Everything is driven by one ``random.Random`` and a logical clock, so a seed fixes every name,
uid and timestamp. Controllers (ReplicaSets, Jobs, StatefulSets, DaemonSets) are referenced by
their pods' ``ownerReferences`` but not emitted: a snapshot never needs them, and a live API
server without a controller manager leaves their pods alone.
"""

from __future__ import annotations

import marshal
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from collections.abc import Sequence
from typing import Any, Optional

from adapters.gc_control import paused_gc as paused_gc  # re-exported: the generators pause it too
from adapters.interrupts import checkpoint
from models import DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL

# Characters Kubernetes uses for generated name suffixes and template hashes (no vowels).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Every object's creationTimestamp is this instant plus one second per object created before it.
EPOCH = datetime(2025, 3, 3, 8, 0, 0, tzinfo=timezone.utc)
REGION = "bench-1"
ZONES = ("bench-1a", "bench-1b", "bench-1c")
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
KUBELET_VERSION = "v1.33.1"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# Priority admission gives a pod without a class priority 0 and this policy.
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"
# DefaultTolerationSeconds admission adds these to every pod that lacks them.
ADMISSION_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)
# What DaemonSet pods tolerate (the DaemonSet controller adds these).
DAEMONSET_TOLERATIONS = (
    {"operator": "Exists"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


@dataclass(frozen=True)
class PodTemplate:
    """The scheduling-relevant part of a pod template; every pod made from it is identical there.

    ``requests`` and ``limits`` are quantity strings as a manifest states them (``"500m"``,
    ``"2Gi"``). ``affinity``, ``tolerations``, ``spread`` and ``volumes`` are API dicts.
    """

    app: str
    requests: dict[str, str]
    limits: Optional[dict[str, str]] = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    priority: int = 0
    priority_class: str = ""
    preemption_policy: str = DEFAULT_PREEMPTION_POLICY
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: Optional[dict[str, Any]] = None
    tolerations: tuple[dict[str, Any], ...] = ()
    spread: tuple[dict[str, Any], ...] = ()
    volumes: tuple[dict[str, Any], ...] = ()
    host_port: int = 0
    image: str = PAUSE_IMAGE
    restart_policy: str = "Always"
    scheduler_name: str = DEFAULT_SCHEDULER_NAME

    def pod_labels(self) -> dict[str, str]:
        return {"app": self.app, **self.labels}

    def qos_class(self) -> str:
        if self.limits and all(self.limits.get(r) == self.requests.get(r) for r in ("cpu", "memory")):
            return "Guaranteed"
        return "Burstable" if self.requests or self.limits else "BestEffort"

    def spec(self) -> dict[str, Any]:
        resources: dict[str, Any] = {"requests": dict(self.requests)}
        if self.limits:
            resources["limits"] = dict(self.limits)
        container: dict[str, Any] = {
            "name": self.app,
            "image": self.image,
            "imagePullPolicy": "IfNotPresent",
            "resources": resources,
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
        if self.host_port:
            container["ports"] = [{"containerPort": self.host_port, "hostPort": self.host_port, "protocol": "TCP"}]
        if self.volumes:
            container["volumeMounts"] = [{"name": v["name"], "mountPath": f"/data/{v['name']}"} for v in self.volumes]
        spec: dict[str, Any] = {
            "containers": [container],
            "restartPolicy": self.restart_policy,
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "schedulerName": self.scheduler_name,
            "enableServiceLinks": True,
            "priority": self.priority,
            "preemptionPolicy": self.preemption_policy,
        }
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.affinity:
            spec["affinity"] = self.affinity
        tolerations = list(self.tolerations)
        keys = {t.get("key") for t in tolerations}
        tolerations += [t for t in ADMISSION_TOLERATIONS if t["key"] not in keys]
        spec["tolerations"] = tolerations
        if self.spread:
            spec["topologySpreadConstraints"] = list(self.spread)
        if self.volumes:
            spec["volumes"] = list(self.volumes)
        return spec


@dataclass(frozen=True)
class Owner:
    """A controller whose pods we emit (the controller object itself is not emitted)."""

    kind: str  # ReplicaSet, Job, StatefulSet, DaemonSet, or "" for bare pods
    name: str
    namespace: str
    uid: str
    template_hash: str = ""

    @property
    def api_version(self) -> str:
        return "batch/v1" if self.kind == "Job" else "apps/v1"


# --------------------------------------------------------------------------- selectors and terms


def match_labels(**labels: str) -> dict[str, Any]:
    return {"matchLabels": dict(labels)}


def label_in(key: str, values: list[str]) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def required_node_affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    """One required nodeSelectorTerm ANDing ``expressions`` (``{key, operator, values}``)."""
    term = {"matchExpressions": [dict(e) for e in expressions]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def required_anti_affinity(selector: dict[str, Any], topology_key: str = HOSTNAME) -> dict[str, Any]:
    term = {"labelSelector": selector, "topologyKey": topology_key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def zone_spread(selector: dict[str, Any], *, max_skew: int = 1, hard: bool = True) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": selector,
    }


def tolerate(key: str, effect: str = "NoSchedule", value: Optional[str] = None) -> dict[str, Any]:
    if value is None:
        return {"key": key, "operator": "Exists", "effect": effect}
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


# --------------------------------------------------------------------------- the factory


_NAIVE_EPOCH = EPOCH.replace(tzinfo=None)


def _stamp(tick: int) -> str:
    return (_NAIVE_EPOCH + timedelta(seconds=tick)).isoformat() + "Z"


class Factory:
    """Makes the objects of one workload, deterministically from ``seed``, in creation order.

    Objects are appended to ``objects`` as they are made; each gets the next creationTimestamp,
    so the order of calls is the order in which kube-scheduler's queue would see the pods.
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.objects: list[dict[str, Any]] = []
        self.pending: list[str] = []  # keys of pods waiting for our scheduler, in creation order
        self.running: int = 0
        self._tick = 0
        self._names: set[tuple[str, str]] = set()
        self._node_ip: dict[str, str] = {}
        self._pod_ips = 0
        self._templates: dict[tuple[int, str], tuple[PodTemplate, bytes]] = {}
        self._ordinals: dict[tuple[str, str], int] = {}
        self.made = 0  # pods made (a look for Ctrl-C every 256)

    # -- identity ---------------------------------------------------------------------------

    def uid(self) -> str:
        """A random (version 4) UUID, drawn from the factory's generator."""
        h = f"{self.rng.getrandbits(128):032x}"
        variant = "89ab"[int(h[16], 16) & 3]
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}"

    def now(self) -> str:
        self._tick += 1
        return _stamp(self._tick)

    def token(self, length: int) -> str:
        value = self.rng.getrandbits(5 * length)
        chars = []
        for _ in range(length):
            value, digit = divmod(value, 32)
            chars.append(NAME_ALPHABET[digit % len(NAME_ALPHABET)])
        return "".join(chars)

    def _unique(self, namespace: str, prefix: str, length: int = 5) -> str:
        while True:
            name = f"{prefix}-{self.token(length)}"
            if (namespace, name) not in self._names:
                self._names.add((namespace, name))
                return name

    def _claim(self, namespace: str, name: str) -> str:
        if (namespace, name) in self._names:
            raise ValueError(f"duplicate object name {namespace}/{name}")
        self._names.add((namespace, name))
        return name

    # -- cluster-scoped objects -------------------------------------------------------------

    def node(
        self,
        name: str,
        *,
        cpu: str,
        memory: str,
        zone: str,
        pods: str = "110",
        instance_type: str = "bench.xlarge",
        labels: Optional[dict[str, str]] = None,
        taints: Optional[list[dict[str, str]]] = None,
        extended: Optional[dict[str, str]] = None,
        storage: str = "100Gi",
        unschedulable: bool = False,
    ) -> dict[str, Any]:
        self._claim("", name)
        index = len(self._node_ip)
        ip = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
        self._node_ip[name] = ip
        resources = {"cpu": cpu, "memory": memory, "ephemeral-storage": storage, "pods": pods, **(extended or {})}
        spec: dict[str, Any] = {"podCIDR": f"100.{64 + (index >> 8) % 64}.{index & 255}.0/24", "providerID": f"bench://{name}"}
        if taints:
            spec["taints"] = [dict(t) for t in taints]
        if unschedulable:
            spec["unschedulable"] = True
        obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": self.uid(),
                "creationTimestamp": self.now(),
                "labels": {
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/os": "linux",
                    HOSTNAME: name,
                    "topology.kubernetes.io/region": REGION,
                    ZONE: zone,
                    INSTANCE_TYPE: instance_type,
                    **(labels or {}),
                },
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": spec,
            "status": {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": KUBELET_VERSION,
                    "containerRuntimeVersion": "containerd://2.0.5",
                },
            },
        }
        self.objects.append(obj)
        return obj

    def priority_class(self, name: str, value: int, *, preemption_policy: str = DEFAULT_PREEMPTION_POLICY, description: str = "") -> dict[str, Any]:
        self._claim("", f"priorityclass/{name}")
        obj = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "uid": self.uid(), "creationTimestamp": self.now()},
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": preemption_policy,
            "description": description,
        }
        self.objects.append(obj)
        return obj

    # -- namespaced non-pod objects ---------------------------------------------------------

    def pdb(
        self,
        name: str,
        namespace: str,
        selector: dict[str, Any],
        *,
        expected: int,
        min_available: Optional[int | str] = None,
        max_unavailable: Optional[int | str] = None,
    ) -> dict[str, Any]:
        """A PodDisruptionBudget with the status the disruption controller would write when all
        ``expected`` selected pods are healthy."""
        self._claim(namespace, f"pdb/{name}")
        spec: dict[str, Any] = {"selector": selector}
        if min_available is not None:
            spec["minAvailable"] = min_available
            desired = _resolve_int_or_percent(min_available, expected, round_up=True)
        else:
            assert max_unavailable is not None
            spec["maxUnavailable"] = max_unavailable
            desired = expected - _resolve_int_or_percent(max_unavailable, expected, round_up=True)
        desired = max(0, desired)
        obj = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace, "uid": self.uid(), "creationTimestamp": self.now(), "generation": 1},
            "spec": spec,
            "status": {
                "observedGeneration": 1,
                "currentHealthy": expected,
                "desiredHealthy": desired,
                "disruptionsAllowed": max(0, expected - desired),
                "expectedPods": expected,
            },
        }
        self.objects.append(obj)
        return obj

    def pod_group(
        self,
        name: str,
        namespace: str,
        min_member: int,
        *,
        timeout_seconds: Optional[int] = None,
        min_resources: Optional[dict[str, str]] = None,
    ) -> dict[str, Any]:
        self._claim(namespace, f"podgroup/{name}")
        spec: dict[str, Any] = {"minMember": min_member}
        if timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = timeout_seconds
        if min_resources:
            spec["minResources"] = dict(min_resources)
        obj = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "uid": self.uid(), "creationTimestamp": self.now(), "generation": 1},
            "spec": spec,
            "status": {"phase": "Pending"},
        }
        self.objects.append(obj)
        return obj

    # -- controllers and pods ---------------------------------------------------------------

    def replicaset(self, deployment: str, namespace: str) -> Owner:
        """The current ReplicaSet of a Deployment: ``<deployment>-<pod-template-hash>``."""
        template_hash = self.token(10)
        return Owner("ReplicaSet", f"{deployment}-{template_hash}", namespace, self.uid(), template_hash)

    def job(self, name: str, namespace: str) -> Owner:
        return Owner("Job", name, namespace, self.uid())

    def statefulset(self, name: str, namespace: str) -> Owner:
        return Owner("StatefulSet", name, namespace, self.uid(), self.token(10))

    def daemonset(self, name: str, namespace: str) -> Owner:
        return Owner("DaemonSet", name, namespace, self.uid(), self.token(10))

    def pods(self, owner: Owner, template: PodTemplate, nodes: Sequence[Optional[str]], *, group: str = "") -> list[dict[str, Any]]:
        """One pod of ``owner`` per entry of ``nodes``: bound and Running on that node, or pending
        (``None``). StatefulSet pods continue the ordinals of earlier calls."""
        out = []
        for node in nodes:
            out.append(self.pod(owner, template, node, group=group))
        return out

    def pod(
        self,
        owner: Owner,
        template: PodTemplate,
        node: Optional[str],
        *,
        group: str = "",
        name: str = "",
    ) -> dict[str, Any]:
        self.made += 1
        if not self.made % 256:
            checkpoint()  # a 5,000-node cluster is 175,000 pods: Ctrl-C stops its making
        ns = owner.namespace
        labels = template.pod_labels()
        spec = self._spec(owner, template)
        if owner.kind == "ReplicaSet":
            name = self._unique(ns, owner.name)
            labels["pod-template-hash"] = owner.template_hash
        elif owner.kind == "Job":
            name = self._unique(ns, owner.name)
            labels.update({
                "batch.kubernetes.io/controller-uid": owner.uid,
                "batch.kubernetes.io/job-name": owner.name,
                "controller-uid": owner.uid,
                "job-name": owner.name,
            })
        elif owner.kind == "StatefulSet":
            ordinal = self._ordinals.get((ns, owner.name), 0)
            self._ordinals[(ns, owner.name)] = ordinal + 1
            name = self._claim(ns, f"{owner.name}-{ordinal}")
            labels.update({
                "controller-revision-hash": f"{owner.name}-{owner.template_hash}",
                "statefulset.kubernetes.io/pod-name": name,
                "apps.kubernetes.io/pod-index": str(ordinal),
            })
            spec["hostname"] = name
            spec["subdomain"] = owner.name
        elif owner.kind == "DaemonSet":
            if node is None:
                raise ValueError("DaemonSet pods are created for a node")
            name = self._unique(ns, owner.name)
            labels.update({"controller-revision-hash": owner.template_hash, "pod-template-generation": "1"})
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
                    }
                }
            }
        else:
            name = self._claim(ns, name) if name else self._unique(ns, template.app)
        if group:
            labels[POD_GROUP_LABEL] = group
        created = self.now()
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": ns,
            "uid": self.uid(),
            "creationTimestamp": created,
            "labels": labels,
        }
        if template.annotations:
            metadata["annotations"] = dict(template.annotations)
        if owner.kind:
            metadata["ownerReferences"] = [{
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "uid": owner.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }]
        if node is None:
            status: dict[str, Any] = {"phase": "Pending", "qosClass": template.qos_class()}
            if template.scheduler_name == DEFAULT_SCHEDULER_NAME:
                self.pending.append(f"{ns}/{name}")
        else:
            spec["nodeName"] = node
            status = self._running_status(node, created, template.qos_class())
            self.running += 1
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}
        self.objects.append(obj)
        return obj

    def _spec(self, owner: Owner, template: PodTemplate) -> dict[str, Any]:
        """A fresh copy of the template's spec (unmarshalling is the fastest deep copy)."""
        key = (id(template), owner.kind)
        cached = self._templates.get(key)
        if cached is None or cached[0] is not template:  # ids are reused once an object is freed
            spec = template.spec()
            if owner.kind == "DaemonSet":
                spec["tolerations"] = [dict(t) for t in DAEMONSET_TOLERATIONS]
            cached = (template, marshal.dumps(spec))
            self._templates[key] = cached
        return marshal.loads(cached[1])

    def _running_status(self, node: str, created: str, qos: str) -> dict[str, Any]:
        self._pod_ips += 1
        n = self._pod_ips
        ip = f"100.{64 + (n >> 16) % 64}.{(n >> 8) & 255}.{n & 255}"
        return {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": created},
                {"type": "Ready", "status": "True", "lastTransitionTime": created},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": created},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
            ],
            "hostIP": self._node_ip.get(node, ""),
            "podIP": ip,
            "startTime": created,
            "qosClass": qos,
        }


def _resolve_int_or_percent(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    scaled = percent * total
    return -(-scaled // 100) if round_up else scaled // 100
