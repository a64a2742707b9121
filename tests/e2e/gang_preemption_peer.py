"""Workload-aware preemption (KEP-5710, beta in 1.37) judged on a real server: a full cluster of
low-priority gangs, some ``disruptionMode: all`` (evicted only together), some ``single``, and a
high-priority gang that fits only once two whole nodes are freed. The project's plan is read from
the server first (``cpsat-scheduler schedule``), then 1.37's kube-scheduler decides for real:
which groups each disrupts, how many pods, and whether an ``all`` group lost only part of itself.

    python -m tests.e2e.gang_preemption_peer [--seeds 3]   # starts and stops its own 1.37 control plane

Layout (seeded): 2 racks x 3 nodes x 4 CPUs; six gangs of four 1-CPU pods, member j of gang k on
node (k + j + seed) mod 6, so every node holds members of four gangs and freeing any two nodes
disrupts at least five gangs; the preemptor is a gang of two 4-CPU pods. Without a kubelet the
victims are deleted at once (terminationGracePeriodSeconds 0).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import ensure_default_service_account
from tests.e2e.harness import REPO, kube_scheduler_profile, settle, stop_process

NODES, GANGS, MEMBERS = 6, 6, 4
LOW, HIGH = 100, 10000


@dataclass
class Verdict:
    scheduler: str
    preemptor_placed: bool
    evicted: set[str] = field(default_factory=set)          # pod names
    groups: set[str] = field(default_factory=set)           # gangs with a member evicted
    partial_all: set[str] = field(default_factory=set)      # `all` gangs evicted in part only


def modes(seed: int) -> dict[str, str]:
    """Gang -> its disruption mode: half `all`, half `single`, which half by seed."""
    return {f"low{k}": "all" if (k + seed) % 2 == 0 else "single" for k in range(GANGS)}


def _verdict(scheduler: str, evicted: set[str], placed: bool, mode: dict[str, str]) -> Verdict:
    groups = {name.rsplit("-", 1)[0] for name in evicted}
    partial = {g for g in groups if mode[g] == "all"
               and len({n for n in evicted if n.rsplit("-", 1)[0] == g}) < MEMBERS}
    return Verdict(scheduler, placed, evicted, groups, partial)


class Case:
    """The layout of `seed` made in a namespace of its own on `plane` (cleaned up by `close`)."""

    def __init__(self, plane: ControlPlane, seed: int) -> None:
        self.plane, self.seed = plane, seed
        self.api = config.new_client_from_config(str(plane.admin_kubeconfig))
        self.core, self.scheduling = client.CoreV1Api(self.api), client.SchedulingV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        run = uuid.uuid4().hex[:6]
        self.ns, self.profile = f"wap-{run}", f"wap-{run}"
        self.classes = {LOW: f"wap-{run}-low", HIGH: f"wap-{run}-high"}
        self.nodes = [f"wap-{run}-n{i}" for i in range(NODES)]
        self.mode = modes(seed)

    def make(self) -> None:
        self.core.create_namespace({"metadata": {"name": self.ns}})
        ensure_default_service_account(self.core, self.ns)
        for value, name in self.classes.items():
            self.scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        for i, name in enumerate(self.nodes):
            self.core.create_node({"metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "example.com/rack": f"rack-{i // 3}"}}})
            self.core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": resources,
                                                          "conditions": [{"type": "Ready", "status": "True",
                                                                          "reason": "KubeletReady", "message": "e2e"}]}})
            self.core.patch_node(name, {"spec": {"taints": None}})
        for k in range(GANGS):
            gang = f"low{k}"
            self._group(gang, MEMBERS, LOW, self.mode[gang])
            for j in range(MEMBERS):
                node = self.nodes[(k + j + self.seed) % NODES]
                self._pod(f"{gang}-{j}", gang, "1", LOW, node=node)
        self._group("high", 2, HIGH, "all")
        for j in range(2):
            self._pod(f"high-{j}", "high", "4", HIGH, node=None)

    def _group(self, name: str, min_count: int, priority: int, mode: str) -> None:
        group, version = self.plane.features.gang_api.split("/")
        self.custom.create_namespaced_custom_object(group, version, self.ns, "podgroups", {
            "apiVersion": self.plane.features.gang_api, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "disruptionMode": {mode: {}},
                     "priorityClassName": self.classes[priority]}})

    def _pod(self, name: str, gang: str, cpu: str, priority: int, *, node: Optional[str]) -> None:
        spec: dict[str, Any] = {
            "schedulerName": self.profile, "priorityClassName": self.classes[priority],
            "schedulingGroup": {"podGroupName": gang}, "terminationGracePeriodSeconds": 0,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": self.nodes}]}]}}},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
        if node:
            spec["nodeName"] = node
        self.core.create_namespaced_pod(self.ns, {"metadata": {"name": name}, "spec": spec})
        if node:
            self.core.patch_namespaced_pod_status(name, self.ns, {"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}]}})

    def ours(self) -> Verdict:
        """The project's plan, read from the server (nothing is changed by it)."""
        done = subprocess.run([sys.executable, "-m", "adapters", "schedule", f"--kubeconfig={self.plane.admin_kubeconfig}",
                               f"--scheduler-name={self.profile}", "-o", "json", "--no-progress", "--workers", "1",
                               "--seed", "1"], cwd=REPO, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise AssertionError(f"cpsat-scheduler schedule exited {done.returncode}: {done.stderr[-2000:]}")
        plan = json.loads(done.stdout)
        mine = f"{self.ns}/"
        evicted = {p["pod"][len(mine):] for p in plan["preemptions"] if p["pod"].startswith(mine)}
        placed = {a["pod"][len(mine):] for a in plan["assignments"] if a["pod"].startswith(mine)}
        return _verdict("cpsat-scheduler", evicted, {"high-0", "high-1"} <= placed, self.mode)

    def kube(self, log_dir: Path) -> Verdict:
        """kube-scheduler 1.37 deciding for real, until the cluster settles."""
        log = open(log_dir / f"{self.profile}-kube-scheduler.log", "wb")
        proc = kube_scheduler_profile(self.plane, self.profile, log_dir, log, verbosity=2)
        log.close()
        low = {f"low{k}-{j}" for k in range(GANGS) for j in range(MEMBERS)}
        try:
            def state() -> tuple[frozenset[str], frozenset[str]]:
                pods = {p.metadata.name: p for p in self.core.list_namespaced_pod(self.ns).items}
                bound = frozenset(n for n in ("high-0", "high-1") if n in pods and pods[n].spec.node_name)
                return bound, frozenset(low - set(pods))

            (bound, gone), _ = settle(state, lambda now: len(now[0]) == 2, quiet=4.0, limit=120.0)
        finally:
            stop_process(proc)
        return _verdict("kube-scheduler", set(gone), len(bound) == 2, self.mode)

    def close(self) -> None:
        for cleanup in [lambda: self.core.delete_collection_namespaced_pod(self.ns, grace_period_seconds=0),
                        *[lambda n=n: self.core.delete_node(n) for n in self.nodes],
                        lambda: self.core.delete_namespace(self.ns),
                        *[lambda c=c: self.scheduling.delete_priority_class(c) for c in self.classes.values()]]:
            try:
                cleanup()
            except ApiException:
                pass
        self.api.close()


def compare(plane: ControlPlane, seed: int, log_dir: Path) -> tuple[Verdict, Verdict]:
    """(kube-scheduler's, the project's) verdicts on the layout of `seed`."""
    case = Case(plane, seed)
    try:
        case.make()
        ours = case.ours()
        return case.kube(log_dir), ours
    finally:
        case.close()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.gang_preemption_peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(Path(tmp) / "cp") as plane:
        print(f"Kubernetes {plane.built.version if plane.built else '?'}, PodGroups in {plane.features.gang_api}")
        print("seed  scheduler        preemptor  pods evicted  groups disrupted  `all` groups cut")
        for seed in range(args.seeds):
            for v in compare(plane, seed, Path(tmp)):
                print(f"{seed:<5} {v.scheduler:<16} {'placed' if v.preemptor_placed else 'pending':<10} "
                      f"{len(v.evicted):>12} {len(v.groups):>17} {len(v.partial_all):>17}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
