"""The real kube-scheduler 1.36 as the judge of greedy's fidelity: random windows loaded on a real
server, placed by kube-scheduler one pod at a time, then checked against the project.

    python -m tests.e2e.kube_differential [--windows 50] [--seed 0] [--out disagreements.json]

Each window (``generate``) is a small cluster of mixed node shapes (one of them with an
extended resource, some tainted, labelled by zone and disk) with pods already bound, and a queue
of pending pods drawing on every filter the generator covers: requests (cpu, memory,
``example.com/gpu``, none at all), host ports, taints and tolerations, node selectors and
required/preferred node affinity, required/preferred inter-pod affinity and anti-affinity,
topology spread (DoNotSchedule and ScheduleAnyway), images for ImageLocality. Every pod has
priority 0 and ``preemptionPolicy: Never`` (its PriorityClass's): no preemption in this comparison.

``KubeRun.place`` creates the nodes and bound pods, then the pending pods one at a time, waiting
for each to be bound or marked unschedulable (an unschedulable pod is deleted at once, so no
later event can bring it back: the queue order is definite). kube-scheduler runs with
``percentageOfNodesToScore: 100`` and a profile of its own name; every pending pod carries a
node selector on its window's label, so nodes of other windows or tests are never candidates.

``check`` then asks, on the objects as the server returned them:

(a) kube → us: the placements kube made, as a plan on the pre-window snapshot, pass the
    project's ``validate``;
(b) greedy = kube: pod by pod, on the snapshot with kube's earlier placements bound, greedy's
    filters pass exactly when kube placed the pod, kube's node is among the nodes with greedy's
    best total score, and is greedy's node whenever that best total is unique (kube breaks exact
    ties at random); a window without a tie is also run whole through ``--engine greedy``, which
    must place the same pods on the same nodes.

(d) the kubelets: on every node, the pods kube-scheduler placed, and those of the project's plan
    (check_pinned's, its victims gone), added to the running ones, fit the node's allocatable in
    all the kubelet checks at admission (``kubelet_admission``: cpu, memory, pods, extended
    resources, hugepages); a pod the kubelet would refuse (OutOfcpu, ...) is a disagreement.

Every disagreement is a ``Disagreement`` (window seed, pod, kube's node and message, greedy's
node and message, the per-node totals and per-plugin scores of the nodes in question); the test
writes them to a JSON file and fails on any whose kind is not in ``KNOWN`` (each of which the
docs/rules.md names, with kube's reason).
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml
from kubernetes import client, config as kube_config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import _gates, ensure_default_service_account, free_port
from tests.e2e.kubelet_admission import plan_refusals

SCHEDULER = "kube-diff"
NAMESPACE = "kube-diff"
WINDOW_LABEL = "diff.cpsat.example/window"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GPU = "example.com/gpu"
DISK = "example.com/disk"
APPS = ("web", "db", "cache", "batch")
PAUSE = "registry.k8s.io/pause:3.10"
NGINX = "nginx:1.27"
MI = 1024 * 1024
# The PriorityClass every pod names: priority 0, preemptionPolicy Never (a pod may not set the
# policy itself; the priority admission copies it from the class).
NEVER = "kube-diff-never"
PRIORITY_CLASS = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": NEVER},
                  "value": 0, "preemptionPolicy": "Never"}
# How long one pending pod may take to be bound or marked unschedulable.
POD_TIMEOUT = 30.0
# kube-scheduler's log lines at -v=10 (schedule_one.go): each plugin's weighted score of a node,
# and the node's total
SCORES_LEVEL = 10
_PLUGIN_SCORE = re.compile(rf'"Plugin scored node for pod" pod="{NAMESPACE}/(\S+?)" plugin="(\w+)" node="(\S+?)" score=(-?\d+)')
_TOTAL_SCORE = re.compile(rf'"Calculated node\'s final score for pod" pod="{NAMESPACE}/(\S+?)" node="(\S+?)" score=(-?\d+)')
# Kinds of disagreement docs/rules.md lists as known differences (kind -> kube's reason).
KNOWN: dict[str, str] = {
    "spread-window-guard": "kube-scheduler checks a pod's hard topology spread only when that pod is placed; a "
                           "later pod matching its selector may still skew it. Greedy keeps the window's "
                           "final-state rule (DESIGN.md, Window semantics) and refuses such a later pod there.",
}


# --------------------------------------------------------------------------- windows


@dataclass
class Window:
    seed: int
    nodes: list[dict[str, Any]]      # Node bodies, status included (capacity, allocatable, images)
    running: list[dict[str, Any]]    # Pod bodies bound with spec.nodeName
    pending: list[dict[str, Any]]    # Pod bodies, in queue order
    volumes: list[dict[str, Any]] = field(default_factory=list)  # PersistentVolumes and their bound claims
    csi_nodes: list[dict[str, Any]] = field(default_factory=list)  # CSINodes: the driver's volume limit

    @property
    def wid(self) -> str:
        return f"w{self.seed}"


# (cpu, memory, pods) of the node shapes a window mixes
SHAPES = (("2", "4Gi", "110"), ("4", "8Gi", "110"), ("8", "16Gi", "110"), ("4", "16Gi", "110"),
          ("8", "8Gi", "110"), ("16", "32Gi", "110"), ("4", "8Gi", "4"))
TAINTS = ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
          {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
          {"key": "maintenance", "value": "soon", "effect": "NoExecute"})


def _resources(rng: random.Random) -> dict[str, str]:
    roll = rng.random()
    if roll < 0.08:
        return {}                                     # best-effort
    if roll < 0.16:
        return {"cpu": rng.choice(["100m", "500m", "1"])}
    return {"cpu": rng.choice(["100m", "250m", "500m", "1", "1500m", "2"]),
            "memory": rng.choice(["128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "3Gi", "4Gi"])}


def _pod(name: str, *, app: str, requests: dict[str, str], image: str = PAUSE) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": image}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    if GPU in requests:     # an extended resource is not overcommitted: its limit is its request
        container["resources"]["limits"] = {GPU: requests[GPU]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0,
                     "priorityClassName": NEVER, "containers": [container]}}


def _term(key: str, app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def generate(seed: int, *, nodes: tuple[int, int] = (4, 10), pending: tuple[int, int] = (5, 15)) -> Window:
    """A random window: ``nodes`` and ``pending`` are inclusive ranges of their counts."""
    rng = random.Random(seed)
    wid = f"w{seed}"
    zones = rng.sample(["a", "b", "c"], rng.randint(1, 3))
    node_bodies: list[dict[str, Any]] = []
    free: dict[str, list[int]] = {}      # node -> [milli-cpu, MiB, gpus, pods] left
    for i in range(rng.randint(*nodes)):
        name = f"{wid}-n{i}"
        cpu, memory, pods = rng.choice(SHAPES)
        labels = {HOST: name, "kubernetes.io/os": "linux", WINDOW_LABEL: wid}
        if rng.random() < 0.9:
            labels[ZONE] = rng.choice(zones)
        labels[DISK] = rng.choice(["ssd", "hdd"])
        allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
        gpus = 0
        if rng.random() < 0.3:
            gpus = rng.randint(1, 4)
            allocatable[GPU] = str(gpus)
        taints = [t for t in TAINTS if rng.random() < (0.5 if gpus and t["key"] == "dedicated" else 0.15)]
        images = []
        if rng.random() < 0.4:
            images.append({"names": [NGINX], "sizeBytes": 400 * MI})
        spec: dict[str, Any] = {"taints": taints} if taints else {}
        if rng.random() < 0.05:
            spec["unschedulable"] = True
        node_bodies.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                            "spec": spec,
                            "status": {"capacity": allocatable, "allocatable": allocatable, "images": images}})
        free[name] = [int(float(cpu) * 1000), _mib(memory), gpus, int(pods)]
    volumes, csi_nodes, claims = _volumes(wid, rng, node_bodies)
    running: list[dict[str, Any]] = []
    for node in node_bodies:
        name = node["metadata"]["name"]
        for j in range(rng.randint(0, 3)):
            requests = _resources(rng)
            want = [_milli(requests.get("cpu", "0")), _mib(requests.get("memory", "0")), 0, 1]
            if any(w > f for w, f in zip(want, free[name])):
                continue
            free[name] = [f - w for f, w in zip(free[name], want)]
            body = _pod(f"{wid}-r{len(running)}", app=rng.choice(APPS), requests=requests)
            body["spec"]["nodeName"] = name
            body["spec"]["tolerations"] = [{"operator": "Exists"}]
            if rng.random() < 0.15:
                ports = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
                body["spec"]["containers"][0]["ports"] = ports
            roll = rng.random()
            if roll < 0.15:
                app = body["metadata"]["labels"]["app"]
                body["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    _term(rng.choice([HOST, ZONE]), app)]}}
            elif roll < 0.25:   # counted by InterPodAffinity's score (hardPodAffinityWeight, preferred terms)
                kind = rng.choice(["podAffinity", "podAntiAffinity"])
                body["spec"]["affinity"] = {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng.choice([HOST, ZONE]), rng.choice(APPS))}]}}
                if rng.random() < 0.5:
                    body["spec"]["affinity"]["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                        _term(ZONE, body["metadata"]["labels"]["app"])]}
            usable = [c for c, admits in claims.items() if name in admits]
            if usable and rng.random() < 0.5:   # holds one of the node's CSI volume slots
                _mount(body, usable[0])
                del claims[usable[0]]
            running.append(body)
    pending_bodies = [_pending(f"{wid}-p{k}", rng, zones) for k in range(rng.randint(*pending))]
    for body in pending_bodies:
        if claims and rng.random() < 0.35:
            claim = rng.choice(sorted(claims))
            _mount(body, claim)
            del claims[claim]
    return Window(seed, node_bodies, running, pending_bodies, volumes, csi_nodes)


DRIVER = "disk.csi.example.com"


def _volumes(wid: str, rng: random.Random,
             nodes: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, set[str]]]:
    """Bound CSI volumes for VolumeBinding (a bound volume's node affinity), VolumeZone (its zone
    label) and NodeVolumeLimits (CSINodes allowing 1–3 of the driver's volumes): the PVs and
    claims, the CSINodes, and each claim's nodes its volume admits."""
    if rng.random() < 0.4:
        return [], [], {}
    objects: list[dict[str, Any]] = []
    claims: dict[str, set[str]] = {}
    csi_nodes = [{"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": n["metadata"]["name"]},
                  "spec": {"drivers": [{"name": DRIVER, "nodeID": n["metadata"]["name"],
                                        "allocatable": {"count": rng.randint(1, 2)}}]}}
                 for n in nodes if rng.random() < 0.6]
    for i in range(rng.randint(1, 7)):
        node = rng.choice(nodes)
        labels = node["metadata"]["labels"]
        pv, claim = f"{wid}-pv{i}", f"{wid}-pvc{i}"
        meta: dict[str, Any] = {"name": pv, "labels": {WINDOW_LABEL: wid}}
        spec: dict[str, Any] = {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": DRIVER, "volumeHandle": f"{wid}-vol{i}"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": NAMESPACE, "name": claim}}
        roll = rng.random()
        if ZONE in labels and roll < 0.35:      # only a zone label: VolumeZone alone decides
            meta["labels"][ZONE] = labels[ZONE]
            admits = {n["metadata"]["name"] for n in nodes if n["metadata"]["labels"].get(ZONE) in (None, labels[ZONE])}
        else:
            key, value = (ZONE, labels[ZONE]) if ZONE in labels and roll < 0.6 else (HOST, labels[HOST])
            if key == ZONE:
                meta["labels"][ZONE] = value
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}
            admits = {n["metadata"]["name"] for n in nodes if n["metadata"]["labels"].get(key) == value}
        objects.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
                        "status": {"phase": "Bound"}})
        objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
            "name": claim, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
            "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}})
        claims[claim] = admits
    return objects, csi_nodes, claims


def _mount(body: dict[str, Any], claim: str) -> None:
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]


def _pending(name: str, rng: random.Random, zones: list[str]) -> dict[str, Any]:
    app = rng.choice(APPS)
    requests = _resources(rng)
    if rng.random() < 0.15:
        requests[GPU] = "1"
    body = _pod(name, app=app, requests=requests, image=NGINX if rng.random() < 0.3 else PAUSE)
    body["metadata"]["labels"]["version"] = rng.choice(["v1", "v2"])
    spec = body["spec"]
    roll = rng.random()
    if roll < 0.08:       # a sidecar (restartable init container) whose host port counts from 1.34
        port = rng.choice([8080, 9090])
        spec["initContainers"] = [{"name": "side", "image": PAUSE, "restartPolicy": "Always",
                                   "ports": [{"containerPort": port, "hostPort": port, "protocol": "TCP"}],
                                   "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]
    elif roll < 0.16:     # an init container larger than the pod's containers: the request is its
        spec["initContainers"] = [{"name": "init", "image": PAUSE, "resources": {"requests": {
            "cpu": rng.choice(["1", "2", "3"]), "memory": rng.choice(["1Gi", "4Gi"])}}}]
    elif roll < 0.22 and not requests:   # pod-level resources (PodLevelResources, beta and on)
        spec["resources"] = {"requests": {"cpu": rng.choice(["500m", "1", "2"]),
                                          "memory": rng.choice(["512Mi", "1Gi", "2Gi"])}}
    if rng.random() < 0.1:
        spec["containers"].append({"name": "c2", "image": PAUSE, "resources": {"requests": {"cpu": "200m"}}})
    if rng.random() < 0.15:
        port = rng.choice([8080, 9090])
        spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
    tolerations = []
    if GPU in requests or rng.random() < 0.25:
        tolerations.append({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})
    if rng.random() < 0.25:
        tolerations.append({"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"})
    if tolerations:
        spec["tolerations"] = tolerations
    affinity: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.1:
        spec["nodeSelector"] = {DISK: rng.choice(["ssd", "hdd"])}
    elif roll < 0.2:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": rng.sample(zones, 1)}]},
            {"matchExpressions": [{"key": DISK, "operator": "In", "values": ["ssd"]}]}]}}
    if rng.random() < 0.25:
        preferred = [{"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
            {"key": DISK, "operator": "In", "values": [rng.choice(["ssd", "hdd"])]}]}}]
        if rng.random() < 0.5:
            preferred.append({"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
                {"key": ZONE, "operator": "NotIn", "values": [rng.choice(zones)]}]}})
        affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    roll = rng.random()
    if roll < 0.1:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng.choice([ZONE, HOST]), rng.choice(APPS))]}
    elif roll < 0.25:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng.choice([HOST, ZONE]), app)]}
    if rng.random() < 0.2:
        kind = "podAffinity" if rng.random() < 0.5 else "podAntiAffinity"
        affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng.choice([HOST, ZONE]), rng.choice(APPS))}]
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.1:
        tolerations.append({"key": "maintenance", "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": 60})
        spec["tolerations"] = tolerations
    if rng.random() < 0.3:
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice([1, 1, 2]), "topologyKey": rng.choice([ZONE, HOST]),
            "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
            "labelSelector": {"matchLabels": {"app": app}}}
        if constraint["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.3:
            constraint["minDomains"] = rng.randint(2, 4)
        if rng.random() < 0.2:
            constraint["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.2:
            constraint["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.2:
            constraint["matchLabelKeys"] = ["version"]
        spec["topologySpreadConstraints"] = [constraint]
        if rng.random() < 0.2:
            other = HOST if constraint["topologyKey"] == ZONE else ZONE
            spec["topologySpreadConstraints"].append({
                "maxSkew": 1, "topologyKey": other, "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": [app, "web"]}]}})
    return body


def _milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _mib(q: str) -> int:
    if q.endswith("Gi"):
        return int(q[:-2]) * 1024
    if q.endswith("Mi"):
        return int(q[:-2])
    return int(q)


# --------------------------------------------------------------------------- kube-scheduler


@dataclass
class KubeOutcome:
    """What the real scheduler did with one window, and the objects as the server returned them."""

    window: Window
    nodes: list[dict[str, Any]]
    running: list[dict[str, Any]]
    pending: list[dict[str, Any]]                       # as created (unbound), in queue order
    placed: dict[str, str] = field(default_factory=dict)          # pod name -> node
    unschedulable: dict[str, str] = field(default_factory=dict)   # pod name -> message
    refused: dict[str, str] = field(default_factory=dict)         # object name -> server's message
    unschedulable_messages: dict[str, str] = field(default_factory=dict)  # (c): kube's last refusal
    last_message: str = ""
    unpinned: int = 0           # (c): pods bound without asking kube (_spread_sees_the_pin)
    volumes: list[dict[str, Any]] = field(default_factory=list)   # CSINodes, PVs, claims as read back
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod -> kube's logged scores (KubeRun._scores)


class KubeRun:
    """One kube-scheduler (profile ``kube-diff``, percentageOfNodesToScore 100) and one
    namespace on a running control plane, for any number of windows placed one after another."""

    def __init__(self, plane: ControlPlane, workdir: Path, *, verbosity: int = SCORES_LEVEL,
                 keep_log: bool = False) -> None:
        """At ``verbosity`` 10 (the default) kube-scheduler logs each plugin's weighted score of
        each node it scores ("Plugin scored node for pod") and their totals: ``place`` reads them
        into the outcome (``KubeOutcome.scores``), and the log is emptied after each window
        unless ``keep_log``."""
        assert plane.built is not None
        self.api = kube_config.new_client_from_config(str(plane.admin_kubeconfig))
        self.core = client.CoreV1Api(self.api)
        try:
            self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        ensure_default_service_account(self.core, NAMESPACE)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.storage = client.StorageV1Api(self.api)
        try:
            self.scheduling.create_priority_class(PRIORITY_CLASS)
        except ApiException as exc:
            if exc.status != 409:
                raise
        settings = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(plane.kube_scheduler_kubeconfig), "qps": 200, "burst": 400},
                    "leaderElection": {"leaderElect": False}, "percentageOfNodesToScore": 100,
                    "profiles": [{"schedulerName": SCHEDULER}]}
        path = workdir / "kube-diff-scheduler.yaml"
        path.write_text(yaml.safe_dump(settings))
        self.log_path = workdir / "kube-diff-scheduler.log"
        port = free_port()
        self.verbosity = verbosity
        self.keep_log, self._read = keep_log, 0
        with open(self.log_path, "ab") as log:    # appended to, so that emptying it between windows is safe
            self.proc = subprocess.Popen(
                [str(plane.built.path("kube-scheduler")), f"--config={path}",
                 f"--authentication-kubeconfig={plane.kube_scheduler_kubeconfig}",
                 f"--authorization-kubeconfig={plane.kube_scheduler_kubeconfig}",
                 "--bind-address=127.0.0.1", f"--secure-port={port}", f"--feature-gates={_gates(plane.features.feature_gates)}",
                 f"--v={verbosity}"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_healthy(port)

    def _wait_healthy(self, port: int) -> None:
        import ssl
        import urllib.request

        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kube-scheduler exited {self.proc.returncode}; log: {self.log_path}")
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=insecure, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"kube-scheduler never became healthy; log: {self.log_path}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._clear()
        self.api.close()

    def __enter__(self) -> "KubeRun":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _clear(self, wid: Optional[str] = None) -> None:
        try:
            self.core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
        except ApiException:
            pass
        selector = f"{WINDOW_LABEL}={wid}" if wid else WINDOW_LABEL
        # no controller removes the protection finalizers admission puts on claims and volumes
        unprotect = {"metadata": {"finalizers": None}}
        for claim in self.core.list_namespaced_persistent_volume_claim(NAMESPACE).items:
            try:
                self.core.patch_namespaced_persistent_volume_claim(claim.metadata.name, NAMESPACE, unprotect)
                self.core.delete_namespaced_persistent_volume_claim(claim.metadata.name, NAMESPACE)
            except ApiException:
                pass
        for volume in self.core.list_persistent_volume(label_selector=selector).items:
            try:
                self.core.patch_persistent_volume(volume.metadata.name, unprotect)
                self.core.delete_persistent_volume(volume.metadata.name)
            except ApiException:
                pass
        for node in self.core.list_node(label_selector=selector).items:
            try:
                self.storage.delete_csi_node(node.metadata.name)
            except ApiException:
                pass
            try:
                self.core.delete_node(node.metadata.name)
            except ApiException:
                pass

    def _plain(self, obj: Any, kind: str, api_version: str = "v1") -> dict[str, Any]:
        out = self.api.sanitize_for_serialization(obj)
        out["apiVersion"], out["kind"] = api_version, kind
        return dict(out)

    def place(self, window: Window) -> KubeOutcome:
        """Load ``window``, let kube-scheduler place its pending pods in order, and clear it."""
        outcome = KubeOutcome(window, [], [], [])
        try:
            self._load(window, outcome)
            if not outcome.refused:
                for body in window.pending:
                    self._one(body, outcome)
        finally:
            self._clear(window.wid)
        if self.verbosity >= SCORES_LEVEL:
            outcome.scores = self._scores(window.wid)
        return outcome

    def _scores(self, wid: str) -> dict[str, dict[str, Any]]:
        """kube-scheduler's logged scores of this window's pods (pod name -> {"plugins": node ->
        plugin -> weighted score, "totals": node -> total}); the log is emptied after reading
        (the scheduler appends to it) unless it is kept."""
        with open(self.log_path, "rb") as log:
            log.seek(self._read)
            raw = log.read()
        text = raw.decode(errors="replace")
        if self.keep_log:
            self._read += len(raw)
        else:
            os.truncate(self.log_path, 0)
        found: dict[str, dict[str, Any]] = {}
        for pod, plugin, node, value in _PLUGIN_SCORE.findall(text):
            if pod.startswith(f"{wid}-"):
                entry = found.setdefault(pod, {"plugins": {}, "totals": {}})
                entry["plugins"].setdefault(node, {})[plugin] = int(value)
        for pod, node, value in _TOTAL_SCORE.findall(text):
            if pod.startswith(f"{wid}-"):
                found.setdefault(pod, {"plugins": {}, "totals": {}})["totals"][node] = int(value)
        return found

    def place_pinned(self, window: Window, order: list[tuple[str, str]]) -> tuple[dict[str, str], int]:
        """(c) us → kube: load ``window`` again and create the pods of a plan, in ``order``
        (pod name, planned node), each pinned to its node by a required node affinity on
        ``metadata.name``; a pod kube-scheduler refuses is deleted and tried again after the
        others (it may wait on one of them), until a round binds none. Returns the pods it never
        bound there, with kube's last message (or the node it bound instead), and how many pods
        were bound without asking kube (``_spread_sees_the_pin``)."""
        outcome = KubeOutcome(window, [], [], [])
        bodies = {b["metadata"]["name"]: b for b in window.pending}
        try:
            self._load(window, outcome)
            if outcome.refused:
                return dict(outcome.refused), 0
            left = list(order)
            while left:
                retry = []
                for name, node in left:
                    if _spread_sees_the_pin(bodies[name]):
                        # bound as the plan says, not asked of kube (see _spread_sees_the_pin)
                        self._bind(bodies[name], node, outcome)
                        continue
                    self._one(_pinned(bodies[name], node), outcome)
                    if name in outcome.unschedulable:
                        retry.append((name, node))
                        outcome.unschedulable.pop(name)
                        last = outcome.unschedulable_messages.setdefault(name, "")
                        outcome.unschedulable_messages[name] = outcome.last_message or last
                if len(retry) == len(left):
                    break
                left = retry
            failed = {name: outcome.unschedulable_messages.get(name, "") for name, _ in left} if left else {}
            failed.update({name: f"bound to {where}, not {node}" for name, node in order
                           if (where := outcome.placed.get(name)) and where != node})
            return failed, outcome.unpinned
        finally:
            self._clear(window.wid)

    def _load(self, window: Window, outcome: KubeOutcome) -> None:
        for body in window.nodes:
            name = body["metadata"]["name"]
            try:
                self.core.create_node({k: v for k, v in body.items() if k != "status"})
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                status = {**body["status"], "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e",
                     "lastHeartbeatTime": now, "lastTransitionTime": now}]}
                self.core.patch_node_status(name, {"status": status})
                # the admission's node.kubernetes.io/not-ready taint off, the window's own kept
                self.core.patch_node(name, {"spec": {"taints": body["spec"].get("taints") or None,
                                                     "unschedulable": body["spec"].get("unschedulable")}})
            except ApiException as exc:
                outcome.refused[name] = _message(exc)
        outcome.nodes = [self._plain(n, "Node")
                         for n in self.core.list_node(label_selector=f"{WINDOW_LABEL}={window.wid}").items]
        for body in window.csi_nodes:
            try:
                made = self.storage.create_csi_node(body)
            except ApiException as exc:
                outcome.refused[body["metadata"]["name"]] = _message(exc)
                continue
            outcome.volumes.append(self._plain(made, "CSINode", "storage.k8s.io/v1"))
        for body in window.volumes:
            name, status = body["metadata"]["name"], body["status"]
            try:
                spec = {k: v for k, v in body.items() if k != "status"}
                if body["kind"] == "PersistentVolume":
                    self.core.create_persistent_volume(spec)
                    made = self.core.patch_persistent_volume_status(name, {"status": status})
                else:
                    self.core.create_namespaced_persistent_volume_claim(NAMESPACE, spec)
                    made = self.core.patch_namespaced_persistent_volume_claim_status(name, NAMESPACE, {"status": status})
            except ApiException as exc:
                outcome.refused[name] = _message(exc)
                continue
            outcome.volumes.append(self._plain(made, body["kind"]))
        for body in window.running:
            try:
                made = self.core.create_namespaced_pod(NAMESPACE, body)
            except ApiException as exc:
                outcome.refused[body["metadata"]["name"]] = _message(exc)
                continue
            outcome.running.append(self._plain(made, "Pod"))
        time.sleep(0.3)   # the scheduler's node and pod informers are separate streams: let both catch up

    def _bind(self, body: dict[str, Any], node: str, outcome: KubeOutcome) -> None:
        """Create ``body`` bound to ``node`` already, as a running pod, without the scheduler."""
        body = copy.deepcopy(body)
        body["spec"]["nodeName"] = node
        self.core.create_namespaced_pod(NAMESPACE, body)
        outcome.placed[body["metadata"]["name"]] = node
        outcome.unpinned += 1

    def _one(self, body: dict[str, Any], outcome: KubeOutcome) -> None:
        name = body["metadata"]["name"]
        body = copy.deepcopy(body)
        body["spec"]["nodeSelector"] = {**body["spec"].get("nodeSelector", {}), WINDOW_LABEL: outcome.window.wid}
        try:
            made = self.core.create_namespaced_pod(NAMESPACE, body)
        except ApiException as exc:
            outcome.refused[name] = _message(exc)
            return
        outcome.pending.append(self._plain(made, "Pod"))
        deadline = time.monotonic() + POD_TIMEOUT
        while time.monotonic() < deadline:
            pod = self.core.read_namespaced_pod(name, NAMESPACE)
            if pod.spec.node_name:
                outcome.placed[name] = pod.spec.node_name
                return
            failed = [c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status == "False"]
            if failed:
                outcome.unschedulable[name] = failed[0].message or failed[0].reason or ""
                outcome.last_message = outcome.unschedulable[name]
                # deleted at once: no later event can requeue it, so the order stays definite
                self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
                return
            time.sleep(0.01)
        outcome.unschedulable[name] = f"(no decision within {POD_TIMEOUT:.0f} s)"
        self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)


def _spread_sees_the_pin(body: dict[str, Any]) -> bool:
    """Whether pinning the pod would change its own hard topology spread: with
    ``nodeAffinityPolicy: Honor`` (the default) only nodes its node affinity admits count, and
    pinned, that is one node; a skew against a single domain (or fewer than minDomains) is not
    the skew the plan was checked against. Such a pod is bound where the plan puts it without
    asking kube-scheduler, and counted."""
    return any(c.get("whenUnsatisfiable") == "DoNotSchedule" and c.get("nodeAffinityPolicy", "Honor") == "Honor"
               for c in body["spec"].get("topologySpreadConstraints") or [])


def _self_affine(body: dict[str, Any]) -> bool:
    """Whether the pod has required pod affinity terms and matches them all (matchLabels only, as
    the generator writes them)."""
    terms = ((body["spec"].get("affinity") or {}).get("podAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or []
    labels = body["metadata"].get("labels") or {}
    return bool(terms) and all(
        all(labels.get(k) == v for k, v in (t["labelSelector"].get("matchLabels") or {}).items()) for t in terms)


def _pinned(body: dict[str, Any], node: str) -> dict[str, Any]:
    """``body`` with a required node affinity on ``metadata.name`` = ``node`` (added to each of
    its own required terms, which are ORed, or as the only term)."""
    body = copy.deepcopy(body)
    field_term = {"key": "metadata.name", "operator": "In", "values": [node]}
    affinity = body["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term["matchFields"] = [*term.get("matchFields", []), field_term]
    return body


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message", exc.reason))
    except (TypeError, ValueError):
        return f"{exc.status} {exc.reason}"


# --------------------------------------------------------------------------- the project's side


@dataclass
class Disagreement:
    # (a) "validate"; (b) "filter", "score", "tie", "plugin-score", "message", "whole-window",
    # "spread-window-guard" (known); (c) "us-kube"; (d) "kubelet"
    kind: str
    seed: int
    pod: str
    kube_node: Optional[str]
    greedy_node: Optional[str]
    detail: str
    kube_message: str = ""
    greedy_message: str = ""
    totals: dict[str, int] = field(default_factory=dict)                  # node -> greedy's total
    plugins: dict[str, dict[str, Optional[int]]] = field(default_factory=dict)  # node -> plugin -> score
    kube_plugins: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> plugin -> weighted score
    kube_totals: dict[str, int] = field(default_factory=dict)


@dataclass
class WindowReport:
    seed: int
    nodes: int
    running: int
    pending: int
    kube_placed: int
    greedy_placed: int = 0      # the window run whole through --engine greedy
    unique: int = 0             # pods kube placed whose best total was unique
    ties: int = 0               # pods kube placed among tied best totals
    refused: dict[str, str] = field(default_factory=dict)
    disagreements: list[Disagreement] = field(default_factory=list)
    plan_input: list[dict[str, Any]] = field(default_factory=list, repr=False)   # the pre-window objects
    kube_placed_on: dict[str, str] = field(default_factory=dict, repr=False)
    kube_unschedulable: dict[str, str] = field(default_factory=dict, repr=False)
    planned: int = 0            # (c): placements of the project's plan tried pinned on kube
    messages: int = 0           # unschedulable pods whose FitError message agreed
    scored: int = 0             # placed pods whose every node's score was compared with kube's log
    unpinned: int = 0           # (c): of ``planned``, bound without asking kube (_spread_sees_the_pin)
    admitted: int = 0           # (d): placements of kube's and the project's plans the kubelets admit
    plan_nodes: list[dict[str, Any]] = field(default_factory=list, repr=False)  # (d): the window's nodes
    plan_pods: list[dict[str, Any]] = field(default_factory=list, repr=False)   # (d): running and pending


def check_pinned(kube: KubeRun, report: WindowReport, window: Window) -> None:
    """(c) us → kube: ``schedule``'s plan (CP-SAT, 2 s) for the window, each placement created
    pinned to its node for the real scheduler, which must bind it there."""
    from solver import schedule

    if report.refused or not report.plan_input:
        return
    config = _config().with_overrides(time_limit_seconds=2.0, workers=1)
    plan = schedule(_snapshot(report.plan_input), config)
    order = [(a.pod.split("/", 1)[1], a.node) for a in plan.assignments]
    # (d) the kubelets: no node of the project's plan holds more than it allocates
    report.admitted += _kubelet(report, report.plan_nodes, report.plan_pods, plan.assignment_map(), "the project",
                                evicted=[v.pod for v in plan.preemptions])
    # A pod whose required pod affinity it matches itself may be the first of its group (the
    # self-affinity escape): only while no pod of the group runs, so such pods go first, as the
    # validator orders them; the retries take care of the pods that wait for support.
    bodies = {b["metadata"]["name"]: b for b in window.pending}
    order.sort(key=lambda item: not _self_affine(bodies[item[0]]))
    report.planned = len(order)
    failed, report.unpinned = kube.place_pinned(window, order)
    for name, why in failed.items():
        node = dict(order).get(name)
        report.disagreements.append(Disagreement("us-kube", window.seed, name, None, node,
                                                 f"kube-scheduler did not bind the plan's pod on its node: {why}"))


def _kubelet(report: "WindowReport", nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
             assignments: dict[str, str], whose: str, evicted: Iterable[str] = ()) -> int:
    """(d) Kubelet admission (``kubelet_admission``) of a plan's nodes: each refusal is a
    disagreement of kind "kubelet"; returns how many placements were admitted."""
    refused = plan_refusals(nodes, pods, assignments, evicted)
    ours = whose == "the project"
    for r in refused:
        report.disagreements.append(Disagreement("kubelet", report.seed, r.pod, None if ours else r.node,
                                                 r.node if ours else None, f"{whose}'s plan: {r.line()}"))
    return len(assignments) - sum(1 for r in refused if r.pod in assignments)


# The release the project's side follows (``--kubernetes-version``: "1.34" shows what 1.36's
# BalancedAllocation change does to the comparison).
VERSION = {"kubernetes_version": "1.36"}


def _config() -> Any:
    from models.config import SchedulerConfig

    return SchedulerConfig(scheduler_name=SCHEDULER, percentage_of_nodes_to_score=100, **VERSION)


def _snapshot(items: list[dict[str, Any]]) -> Any:
    from adapters.snapshot_io import read_snapshot

    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    return read_snapshot(io.StringIO(text), label="window").snapshot


def _queued(pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pending pods with creation timestamps one second apart in queue order (the server's
    are whole seconds, so several pods created in one second would tie)."""
    out = []
    for k, body in enumerate(pending):
        body = copy.deepcopy(body)
        body["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_700_000_000 + k))
        out.append(body)
    return out


def check(outcome: KubeOutcome) -> WindowReport:
    """(a) and (b) of the module's docstring, for one window kube-scheduler placed."""
    from models.plan import Assignment, Plan, PlanStats, Unschedulable
    from solver import schedule, validate

    window = outcome.window
    report = WindowReport(window.seed, len(outcome.nodes), len(outcome.running), len(outcome.pending),
                          len(outcome.placed), refused=dict(outcome.refused))
    if outcome.refused:
        return report
    config = _config()
    pending = _queued(outcome.pending)
    key = f"{NAMESPACE}/"
    base = [PRIORITY_CLASS] + outcome.nodes + outcome.volumes + outcome.running

    # (a) kube → us: kube's placements are a valid plan on the pre-window snapshot
    plan = Plan(assignments=tuple(Assignment(pod=key + p, node=n) for p, n in outcome.placed.items()),
                unschedulable=tuple(Unschedulable(pod=key + p, message=m) for p, m in outcome.unschedulable.items()),
                stats=PlanStats(engine="kube-scheduler", status="FEASIBLE"))
    for line in validate(_snapshot(base + pending), plan, config):
        report.disagreements.append(Disagreement("validate", window.seed, "", None, None, line))
    # (d) the kubelets: no node of kube's placements holds more than it allocates
    report.admitted += _kubelet(report, outcome.nodes, outcome.running + pending,
                                {key + p: n for p, n in outcome.placed.items()}, "kube-scheduler")

    # (b) greedy = kube, pod by pod on kube's trajectory
    bound: list[dict[str, Any]] = []
    for body in pending:
        name = body["metadata"]["name"]
        step = _step(_snapshot(base + bound + [body]), config, key + name)
        kube_node = outcome.placed.get(name)
        kube_message = outcome.unschedulable.get(name, "")
        if kube_node is None:
            if step.greedy_node is not None:
                report.disagreements.append(step.disagreement(
                    "filter", window.seed, name, None, "kube found no node; greedy's filters pass some", kube_message))
            elif comparable_message(step.greedy_message) != comparable_message(kube_message):
                report.disagreements.append(step.disagreement(
                    "message", window.seed, name, None, "both refuse the pod, with other reasons", kube_message))
            else:
                report.messages += 1
        elif kube_node not in step.totals:
            report.disagreements.append(step.disagreement(
                "filter", window.seed, name, kube_node, "greedy's filters reject kube's node", kube_message))
        else:
            kube_scores = outcome.scores.get(name)
            if kube_scores and kube_scores["totals"]:
                report.scored += 1
                differ = _score_differences(step, kube_scores, config)
                if differ:
                    found = step.disagreement("plugin-score", window.seed, name, kube_node, differ, kube_message)
                    found.kube_plugins = kube_scores["plugins"]
                    found.kube_totals = kube_scores["totals"]
                    report.disagreements.append(found)
            best = max(step.totals.values())
            tied = [n for n, t in step.totals.items() if t == best]
            if len(tied) == 1:
                report.unique += 1
            else:
                report.ties += 1
            if step.totals[kube_node] != best:
                report.disagreements.append(step.disagreement(
                    "score", window.seed, name, kube_node, "kube's node is not among greedy's best", kube_message))
            elif step.greedy_node not in tied:
                report.disagreements.append(step.disagreement(
                    "tie", window.seed, name, kube_node, "greedy picked a node outside its own best", kube_message))
        if kube_node is not None:
            placed = copy.deepcopy(body)
            placed["spec"]["nodeName"] = kube_node
            bound.append(placed)

    report.plan_input = base + pending
    report.plan_nodes, report.plan_pods = outcome.nodes, outcome.running + pending
    report.kube_placed_on, report.kube_unschedulable = dict(outcome.placed), dict(outcome.unschedulable)
    # the window whole, when every decision was unique: the same pods on the same nodes
    whole_plan = schedule(_snapshot(base + pending), config, engine="greedy")
    report.greedy_placed = len(whole_plan.assignments)
    if report.ties == 0 and not report.disagreements:
        kube = {key + p: n for p, n in outcome.placed.items()}
        differ = _first_difference(whole_plan, kube, pending, key)
        if differ is not None:
            # Greedy's window guard (a known difference) or something else? Without the guard,
            # greedy must then decide the whole window as kube did.
            unguarded = _first_difference(_unguarded(_snapshot(base + pending), config), kube, pending, key)
            name, greedy_node, message = differ if unguarded is None else unguarded
            kind = "spread-window-guard" if unguarded is None else "whole-window"
            report.disagreements.append(Disagreement(
                kind, window.seed, name, outcome.placed.get(name), greedy_node,
                "greedy over the whole window decides this pod otherwise (the first such in queue order)"
                + ("" if unguarded is None else ", even without its spread window guard"),
                outcome.unschedulable.get(name, ""), message))
    return report


# What kube-scheduler 1.36 writes otherwise than the project, in a FitError message (docs/rules.md,
# "Greedy against the real kube-scheduler"): TaintToleration names no taint (1.34 named the
# first untolerated one), and the DynamicResources PostFilter of a pod without claims adds its
# "no new claims to deallocate" before DefaultPreemption's message.
_TAINT = re.compile(r"had untolerated taint \{.*\}$")
_FIT_ERROR = re.compile(r"^(0/\d+ nodes are available: )(.*?)\.( preemption: .*)?$")


def comparable_message(message: str) -> str:
    """A FitError message with the known 1.36 differences read alike, its histogram re-sorted
    as kube-scheduler sorts it (by the whole "count reason" string)."""
    message = message.replace("no new claims to deallocate, ", "")
    found = _FIT_ERROR.match(message)
    if not found:
        return message
    counts: dict[str, int] = {}
    for part in found.group(2).split(", "):
        count, _, reason = part.partition(" ")
        if not count.isdigit():
            return message
        reason = _TAINT.sub("had untolerated taint(s)", reason)
        counts[reason] = counts.get(reason, 0) + int(count)
    histogram = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    return f"{found.group(1)}{histogram}.{found.group(3) or ''}"


def _score_differences(step: "_Step", kube: dict[str, Any], config: Any) -> str:
    """Where kube-scheduler's logged scores of a pod differ from greedy's (the nodes scored, each
    node's total, each plugin's weighted score; kube's plugins greedy lacks must score 0, greedy's
    skipped plugins must be absent from kube's log); "" when they agree."""
    weights = config.scoring.weights
    if set(kube["totals"]) != set(step.totals):
        return f"nodes scored: kube {sorted(kube['totals'])}, greedy {sorted(step.totals)}"
    for node, total in sorted(kube["totals"].items()):
        ours = {p: weights.get(p, 1) * v for p, v in step.plugins[node].items() if v is not None}
        theirs = kube["plugins"].get(node, {})
        for plugin in sorted(set(ours) | set(theirs)):
            mine, kubes = ours.get(plugin), theirs.get(plugin)
            if mine != kubes and not (mine is None and kubes == 0):   # kube's DynamicResources scores 0
                return f"{plugin} on {node}: kube {kubes}, greedy {mine}"
        if total != step.totals[node]:
            return f"total on {node}: kube {total}, greedy {step.totals[node]}"
    return ""


def _first_difference(plan: Any, kube: dict[str, str], pending: list[dict[str, Any]],
                      key: str) -> Optional[tuple[str, Optional[str], str]]:
    """The first pod in queue order that ``plan`` decides otherwise than kube: (name, the plan's
    node, its message), or None when they agree on every pod."""
    placed = plan.assignment_map()
    for body in pending:
        name = body["metadata"]["name"]
        if placed.get(key + name) != kube.get(key + name):
            return name, placed.get(key + name), next((u.message for u in plan.unschedulable if u.pod == key + name), "")
    return None


def _unguarded(snapshot: Any, config: Any) -> Any:
    """``--engine greedy``'s plan with its spread window guard switched off (a test-only patch):
    kube-scheduler's sequential rule alone."""
    from unittest import mock

    from solver import schedule
    from solver.plugins.pod_topology_spread import window_guard

    with mock.patch.object(window_guard.SpreadGuard, "allowed", lambda self, pod: None):
        return schedule(snapshot, config, engine="greedy")


@dataclass
class _Step:
    greedy_node: Optional[str]
    greedy_message: str
    totals: dict[str, int]                           # feasible node -> greedy's total
    plugins: dict[str, dict[str, Optional[int]]]     # feasible node -> plugin -> score

    def disagreement(self, kind: str, seed: int, pod: str, kube_node: Optional[str], detail: str,
                     kube_message: str) -> Disagreement:
        shown = {n for n in (kube_node, self.greedy_node) if n}
        if self.totals:
            best = max(self.totals.values())
            shown |= {n for n, t in self.totals.items() if t == best}
        return Disagreement(kind, seed, pod, kube_node, self.greedy_node, detail, kube_message, self.greedy_message,
                            totals=dict(self.totals), plugins={n: self.plugins[n] for n in shown if n in self.plugins})


def _step(snapshot: Any, config: Any, key: str) -> _Step:
    """Greedy's decision for the one pending pod of ``snapshot``, with the per-node totals it
    chose among (the feasible nodes' ``score_nodes``) and each plugin's part."""
    import numpy as np

    from solver import schedule
    from solver.context import build_context
    from solver.filtering import Cycle, StaticFilters
    from solver.scoring import ScoreContext, plugin_scores, score_nodes

    plan = schedule(snapshot, config, engine="greedy")
    ctx = build_context(snapshot, config)
    pod = ctx.window[0]
    feasible = np.asarray(Cycle(pod, ctx.state, StaticFilters(ctx.nodes, ctx.window),
                                version=config.kubernetes_version).feasible(), dtype=np.int64)
    totals: dict[str, int] = {}
    plugins: dict[str, dict[str, Optional[int]]] = {}
    if len(feasible):
        sctx = ScoreContext.of(ctx)
        names = [ctx.nodes[int(i)].name for i in feasible]
        totals = dict(zip(names, (int(t) for t in score_nodes(pod, feasible, ctx.state, sctx))))
        per = plugin_scores(pod, feasible, ctx.state, sctx)
        plugins = {n: {p: (None if s is None else int(s[j])) for p, s in per.items()} for j, n in enumerate(names)}
    greedy = plan.assignment_map().get(key)
    message = next((u.message for u in plan.unschedulable if u.pod == key), "")
    return _Step(greedy, message, totals, plugins)


# --------------------------------------------------------------------------- a run of windows


@dataclass
class Summary:
    windows: int = 0
    refused: int = 0
    pods: int = 0
    kube_placed: int = 0
    greedy_placed: int = 0
    unique: int = 0
    ties: int = 0
    planned: int = 0
    unpinned: int = 0
    messages: int = 0
    scored: int = 0
    admitted: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    refusals: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, report: WindowReport) -> None:
        self.windows += 1
        if report.refused:
            self.refused += 1
            self.refusals.append({"seed": report.seed, "refused": report.refused})
            return
        self.pods += report.pending
        self.kube_placed += report.kube_placed
        self.greedy_placed += report.greedy_placed
        self.unique += report.unique
        self.ties += report.ties
        self.planned += report.planned
        self.unpinned += report.unpinned
        self.messages += report.messages
        self.admitted += report.admitted
        self.scored += report.scored
        self.disagreements.extend(report.disagreements)

    def unknown(self) -> list[Disagreement]:
        return [d for d in self.disagreements if d.kind not in KNOWN]

    def line(self) -> str:
        kinds: dict[str, int] = {}
        for d in self.disagreements:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        return (f"{self.windows} windows ({self.refused} refused by the server), {self.pods} pending pods: "
                f"kube placed {self.kube_placed}, greedy {self.greedy_placed}; {self.unique} unique best scores, "
                f"{self.ties} ties; {self.scored} pods' scores compared node by node; {self.messages} unschedulable messages alike; {self.planned} planned placements ({self.unpinned} of them bound unasked); {self.admitted} placements admitted by the kubelet check; disagreements {len(self.disagreements)} {kinds or ''} in {self.seconds:.0f} s")

    def write(self, path: Path) -> None:
        path.write_text(json.dumps({"summary": self.line(), "refusals": self.refusals,
                                    "disagreements": [asdict(d) for d in self.disagreements]}, indent=1))


def run(plane: ControlPlane, seeds: Iterable[int], workdir: Path, *, out: Optional[Path] = None,
        progress: bool = False, pinned: bool = False, verbosity: int = SCORES_LEVEL,
        keep_log: bool = False, sizes: Optional[dict[str, tuple[int, int]]] = None) -> Summary:
    """``sizes``: ``generate``'s ``nodes`` and ``pending`` ranges (its defaults otherwise)."""
    summary = Summary()
    start = time.monotonic()
    with KubeRun(plane, workdir, verbosity=verbosity, keep_log=keep_log) as kube:
        for seed in seeds:
            window = generate(seed, **(sizes or {}))
            report = check(kube.place(window))
            if pinned:
                check_pinned(kube, report, window)
            summary.add(report)
            if out is not None and report.disagreements:
                # the window's snapshot (pending pods unbound, in queue order), to replay offline:
                # `cpsat-scheduler schedule --engine greedy` on it, `validate` of kube's plan
                snapshot = {"apiVersion": "v1", "kind": "List", "items": report.plan_input,
                            "kube": {"placed": report.kube_placed_on, "unschedulable": report.kube_unschedulable}}
                (out.parent / f"{out.stem}-w{seed}.json").write_text(json.dumps(snapshot, indent=1))
            if progress:
                print(f"seed {seed}: {report.pending} pods, kube placed {report.kube_placed}, "
                      f"{len(report.disagreements)} disagreement(s)", flush=True)
            if out is not None:
                summary.seconds = time.monotonic() - start
                summary.write(out)
    summary.seconds = time.monotonic() - start
    if out is not None:
        summary.write(out)
    return summary


def _range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.kube_differential", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0, help="first window's seed")
    parser.add_argument("--seeds", help="these windows' seeds instead (comma-separated)")
    parser.add_argument("--out", type=Path, default=Path("kube-differential.json"))
    parser.add_argument("--pinned", action="store_true", help="also (c): the project's plan, pinned, on kube")
    parser.add_argument("--v", type=int, default=SCORES_LEVEL, dest="verbosity",
                        help="kube-scheduler's log level (10, the default: every plugin's score is compared)")
    parser.add_argument("--keep", type=Path, help="a folder for the control plane and logs, kept afterwards")
    parser.add_argument("--kubernetes-version", default="1.36", help="the project's kubernetesVersion")
    parser.add_argument("--nodes", default="4-10", help="nodes per window, a range")
    parser.add_argument("--pending", default="5-15", help="pending pods per window, a range")
    args = parser.parse_args(argv)
    VERSION["kubernetes_version"] = args.kubernetes_version
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        with ControlPlane(work / "cp") as plane:
            seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else range(args.seed, args.seed + args.windows)
            summary = run(plane, seeds, work, out=args.out, progress=True,
                          pinned=args.pinned, verbosity=args.verbosity, keep_log=args.keep is not None,
                          sizes={"nodes": _range(args.nodes), "pending": _range(args.pending)})
    print(summary.line())
    print(f"disagreements written to {args.out}")
    return 1 if summary.unknown() else 0


if __name__ == "__main__":
    sys.exit(main())
