"""The same PodGroup gangs placed by the real kube-scheduler (1.37: v1beta1 PodGroups, its
GangScheduling and TopologyAwareWorkloadScheduling plugins; 1.36: v1alpha2) and by
cpsat-scheduler, on the same real server, one after the other: gangs placed, pods placed, racks
used by each placed gang.

    python -m tests.e2e.gang_peer [--seeds 3] [--version v1.36.3]   # starts and stops its own control plane

Each workload is contended on purpose: more gang demand than the racks hold, gangs of mixed
sizes, some with a required rack topology, created in an order that makes first-come placement
costly. A scheduler has settled when every pod is bound or marked unschedulable and nothing has
changed for three seconds.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import ensure_default_service_account
from tests.e2e.harness import REPO, kube_scheduler_profile, settle, stop_process

RACK = "example.com/rack"


@dataclass(frozen=True)
class Gang:
    name: str
    size: int
    cpu: int            # per pod, whole CPUs
    topology: bool      # all members in one rack


@dataclass(frozen=True)
class Workload:
    racks: int
    nodes_per_rack: int
    node_cpu: int
    gangs: tuple[Gang, ...]


def workload(seed: int) -> Workload:
    """2 racks x 3 nodes x 4 CPUs (24 CPUs); gangs asking for about 1.6x that."""
    rng = random.Random(seed)
    gangs = []
    demand = 0
    i = 0
    while demand < 38:
        size, cpu = rng.choice([(2, 1), (2, 2), (3, 1), (3, 2), (4, 1), (4, 2), (6, 1), (5, 2)])
        gangs.append(Gang(f"g{i:02d}", size, cpu, rng.random() < 0.5))
        demand += size * cpu
        i += 1
    return Workload(racks=2, nodes_per_rack=3, node_cpu=4, gangs=tuple(gangs))


@dataclass
class Outcome:
    scheduler: str
    gangs_placed: int
    gangs: int
    pods_placed: int
    pods: int
    racks_per_gang: float     # mean racks spanned by a placed gang
    partial_gangs: int        # gangs with some but not all members bound (never allowed)
    seconds: float


def _node_body(name: str, rack: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, RACK: rack}}}


def place(plane: ControlPlane, load: Workload, scheduler: str, *, kube_scheduler: Optional[Path] = None,
          log_dir: Path) -> Outcome:
    """Create `load` in a namespace of its own, run one scheduler on it until it settles, and
    count; then delete what was made and stop the scheduler."""
    api = config.new_client_from_config(str(plane.admin_kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:6]
    ns = f"gangs-{run}"
    core.create_namespace({"metadata": {"name": ns}})
    ensure_default_service_account(core, ns)
    nodes: list[str] = []
    rack_of: dict[str, str] = {}
    proc: Optional[subprocess.Popen[bytes]] = None
    try:
        resources = {"cpu": str(load.node_cpu), "memory": "16Gi", "pods": "110"}
        for r in range(load.racks):
            for n in range(load.nodes_per_rack):
                name = f"{ns}-r{r}-n{n}"
                core.create_node(_node_body(name, f"rack-{r}"))
                core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": resources,
                                                         "conditions": [{"type": "Ready", "status": "True",
                                                                         "reason": "KubeletReady", "message": "e2e"}]}})
                core.patch_node(name, {"spec": {"taints": None}})
                nodes.append(name)
                rack_of[name] = f"rack-{r}"
        # only this run's nodes: others'd pods never land here, and ours stay here
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}}
        pods: dict[str, list[str]] = {}
        for gang in load.gangs:
            spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": gang.size}}}
            if gang.topology:
                spec["schedulingConstraints"] = {"topology": [{"key": RACK}]}
            group, version = plane.features.gang_api.split("/")
            custom.create_namespaced_custom_object(group, version, ns, "podgroups", {
                "apiVersion": plane.features.gang_api, "kind": "PodGroup", "metadata": {"name": gang.name},
                "spec": spec})
        # members arrive interleaved, gang by gang, as jobs submitted together would
        order = [(g, i) for i in range(max(g.size for g in load.gangs)) for g in load.gangs if i < g.size]
        for gang, i in order:
            name = f"{gang.name}-{i}"
            pods.setdefault(gang.name, []).append(name)
            core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {
                "schedulerName": scheduler, "affinity": affinity, "schedulingGroup": {"podGroupName": gang.name},
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": str(gang.cpu), "memory": "64Mi"}}}]}})
        start = time.monotonic()
        log = open(log_dir / f"{scheduler}.log", "wb")
        if kube_scheduler is not None:
            proc = kube_scheduler_profile(plane, scheduler, log_dir, log)
        else:
            proc = subprocess.Popen([sys.executable, "-m", "adapters", "run",
                                     f"--kubeconfig={plane.scheduler_kubeconfig}", "--no-leader-elect",
                                     f"--scheduler-name={scheduler}", "--metrics-addr=127.0.0.1:0",
                                     "--window-wait=500", "--time-limit=10"],
                                    cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        names = [n for members in pods.values() for n in members]

        def state() -> tuple[tuple[str, str], ...]:
            found = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
            out = []
            for n in names:
                p = found[n]
                marked = any(c.type == "PodScheduled" and c.status == "False" for c in (p.status.conditions or []))
                out.append((n, p.spec.node_name or ("unschedulable" if marked else "")))
            return tuple(out)

        last, since = settle(state, lambda now: all(where for _, where in now))
        seconds = since - start
        bound = {n: where for n, where in last if where and where != "unschedulable"}
        placed, racks, partial = 0, [], 0
        for members in pods.values():
            on = [bound[m] for m in members if m in bound]
            if len(on) == len(members):
                placed += 1
                racks.append(len({rack_of[n] for n in on}))
            elif on:
                partial += 1
        return Outcome(scheduler, placed, len(pods), len(bound), len(names),
                       sum(racks) / len(racks) if racks else 0.0, partial, seconds)
    finally:
        stop_process(proc)
        try:
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        except ApiException:
            pass
        for name in nodes:
            try:
                core.delete_node(name)
            except ApiException:
                pass
        api.close()


def compare(plane: ControlPlane, seed: int, log_dir: Path) -> tuple[Outcome, Outcome]:
    assert plane.built is not None
    load = workload(seed)
    kube = place(plane, load, f"kube-{seed}", kube_scheduler=plane.built.path("kube-scheduler"), log_dir=log_dir)
    ours = place(plane, load, f"cpsat-{seed}", log_dir=log_dir)
    return kube, ours


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.gang_peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--version", default=None, help="the control plane's Kubernetes version (default: go.mod's)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(Path(tmp) / "cp", version=args.version) as plane:
        print(f"Kubernetes {plane.built.version if plane.built else '?'}, PodGroups in {plane.features.gang_api}")
        print("seed  scheduler        gangs placed  pods placed  racks/gang  partial  settled after")
        for seed in range(args.seeds):
            load = workload(seed)
            print(f"# seed {seed}: {len(load.gangs)} gangs "
                  f"({sum(g.topology for g in load.gangs)} within one rack), "
                  f"{sum(g.size * g.cpu for g in load.gangs)} CPUs asked of "
                  f"{load.racks * load.nodes_per_rack * load.node_cpu}")
            for outcome in compare(plane, seed, Path(tmp)):
                name = "kube-scheduler" if outcome.scheduler.startswith("kube") else "cpsat-scheduler"
                print(f"{seed:<5} {name:<16} {outcome.gangs_placed:>5}/{outcome.gangs:<6} "
                      f"{outcome.pods_placed:>5}/{outcome.pods:<5} {outcome.racks_per_gang:>10.2f} "
                      f"{outcome.partial_gangs:>8} {outcome.seconds:>10.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
