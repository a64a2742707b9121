"""The same PodGroup gangs placed by the real kube-scheduler (1.37: v1beta1 PodGroups, its
GangScheduling and TopologyAwareWorkloadScheduling plugins; 1.36: v1alpha2) and by
cpsat-scheduler, on the same real server, one after the other: gangs placed, pods placed, racks
used by each placed gang.

    python -m tests.e2e.gang_peer [--seeds 3] [--version v1.36.3] [--only gangs|trees]
    # starts and stops its own control plane

Each workload is contended on purpose: more gang demand than the racks hold, gangs of mixed
sizes, some with a required rack topology, created in an order that makes first-come placement
costly. A scheduler has settled when every pod is bound or marked unschedulable and nothing has
changed for three seconds.

Where the server serves CompositePodGroup (1.37, ``v1alpha3``), each seed also gets a second
scenario, ``trees``: group trees as JobSet would write them (a Workload of templates, a
CompositePodGroup whose gang asks for every child group, v1beta1 child PodGroups naming it as
their parent, some children within one rack) among a few standalone gangs. A tree counts as
placed when every child gang is whole; any pod of a tree bound otherwise is a partial tree.
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
class Tree:
    """A CompositePodGroup whose gang asks for all of its ``children`` (each a PodGroup gang)."""
    name: str
    children: tuple[Gang, ...]


@dataclass(frozen=True)
class Workload:
    racks: int
    nodes_per_rack: int
    node_cpu: int
    gangs: tuple[Gang, ...]     # standalone gangs
    trees: tuple[Tree, ...] = ()

    def all_gangs(self) -> tuple[Gang, ...]:
        """Every PodGroup: the standalone gangs, then the trees' children."""
        return (*self.gangs, *(child for tree in self.trees for child in tree.children))


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


def tree_workload(seed: int) -> Workload:
    """The same 24 CPUs; trees of 2 or 3 child gangs (about two thirds of the demand) and
    standalone gangs, asking for about 1.6x the CPUs in all."""
    rng = random.Random(1000 + seed)  # not the gang scenario's draws
    trees: list[Tree] = []
    gangs: list[Gang] = []
    demand = 0
    while demand < 26:
        name = f"t{len(trees)}"
        children = tuple(Gang(f"{name}-c{j}", *rng.choice([(2, 1), (2, 2), (3, 1)]), rng.random() < 0.5)
                         for j in range(rng.choice([2, 3])))
        trees.append(Tree(name, children))
        demand += sum(c.size * c.cpu for c in children)
    while demand < 38:
        size, cpu = rng.choice([(2, 1), (2, 2), (3, 1), (4, 1)])
        gangs.append(Gang(f"g{len(gangs):02d}", size, cpu, rng.random() < 0.5))
        demand += size * cpu
    return Workload(racks=2, nodes_per_rack=3, node_cpu=4, gangs=tuple(gangs), trees=tuple(trees))


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
    trees_placed: int = 0     # trees with every child gang whole
    trees: int = 0
    partial_trees: int = 0    # trees with a pod bound but a child gang not whole (never allowed)


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
        group, version = plane.features.gang_api.split("/")
        for tree in load.trees:
            _create_tree(plane, custom, ns, tree)
        for gang in load.gangs:
            custom.create_namespaced_custom_object(group, version, ns, "podgroups", {
                "apiVersion": plane.features.gang_api, "kind": "PodGroup", "metadata": {"name": gang.name},
                "spec": _gang_spec(gang)})
        # members arrive interleaved, gang by gang, as jobs submitted together would
        every = load.all_gangs()
        order = [(g, i) for i in range(max(g.size for g in every)) for g in every if i < g.size]
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
        whole: set[str] = set()
        for gang_name, members in pods.items():
            on = [bound[m] for m in members if m in bound]
            if len(on) == len(members):
                placed += 1
                whole.add(gang_name)
                racks.append(len({rack_of[n] for n in on}))
            elif on:
                partial += 1
        trees_placed, partial_trees = 0, 0
        for tree in load.trees:
            children = [c.name for c in tree.children]
            if all(c in whole for c in children):
                trees_placed += 1
            elif any(m in bound for c in children for m in pods[c]):
                partial_trees += 1
        return Outcome(scheduler, placed, len(pods), len(bound), len(names),
                       sum(racks) / len(racks) if racks else 0.0, partial, seconds,
                       trees_placed, len(load.trees), partial_trees)
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


def _gang_spec(gang: Gang) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": gang.size}}}
    if gang.topology:
        spec["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    return spec


def _create_tree(plane: ControlPlane, custom: Any, ns: str, tree: Tree) -> None:
    """``tree`` as a Workload of templates (one composite template holding a template per
    child), its CompositePodGroup, and a child PodGroup per gang naming it as parent (as
    tests/e2e/test_composite_pod_group.py makes one)."""
    assert plane.features.composite_api is not None
    group, version = plane.features.gang_api.split("/")
    composite_version = plane.features.composite_api.split("/")[1]
    every = {"gang": {"minGroupCount": len(tree.children)}}
    templates = [{"name": child.name, **_gang_spec(child)} for child in tree.children]
    custom.create_namespaced_custom_object(group, version, ns, "workloads", {
        "apiVersion": plane.features.gang_api, "kind": "Workload", "metadata": {"name": tree.name},
        "spec": {"podGroupTemplates": [], "compositePodGroupTemplates": [
            {"name": tree.name, "schedulingPolicy": every, "podGroupTemplates": templates}]}})
    custom.create_namespaced_custom_object(group, composite_version, ns, "compositepodgroups", {
        "apiVersion": plane.features.composite_api, "kind": "CompositePodGroup", "metadata": {"name": tree.name},
        "spec": {"workloadRef": {"workloadName": tree.name, "templateName": tree.name}, "schedulingPolicy": every}})
    for child in tree.children:
        custom.create_namespaced_custom_object(group, version, ns, "podgroups", {
            "apiVersion": plane.features.gang_api, "kind": "PodGroup", "metadata": {"name": child.name},
            "spec": {"parentCompositePodGroupName": tree.name,
                     "workloadRef": {"workloadName": tree.name, "templateName": child.name}, **_gang_spec(child)}})


def compare(plane: ControlPlane, seed: int, log_dir: Path, *, trees: bool = False) -> tuple[Outcome, Outcome]:
    """kube-scheduler's outcome and ours on seed ``seed``'s gang scenario (``trees``: its tree
    scenario, which needs a server serving CompositePodGroup)."""
    assert plane.built is not None
    load = tree_workload(seed) if trees else workload(seed)
    kind = "trees" if trees else "gangs"
    kube = place(plane, load, f"kube-{kind}-{seed}", kube_scheduler=plane.built.path("kube-scheduler"),
                 log_dir=log_dir)
    ours = place(plane, load, f"cpsat-{kind}-{seed}", log_dir=log_dir)
    return kube, ours


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.gang_peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--version", default=None, help="the control plane's Kubernetes version (default: go.mod's)")
    parser.add_argument("--only", choices=("gangs", "trees"), default=None,
                        help="one scenario only (default: both, trees where CompositePodGroup is served)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(Path(tmp) / "cp", version=args.version) as plane:
        print(f"Kubernetes {plane.built.version if plane.built else '?'}, PodGroups in {plane.features.gang_api}")
        kinds = [kind for kind in ("gangs", "trees") if args.only in (None, kind)]
        if "trees" in kinds and plane.features.composite_api is None:
            print("(no trees: this version serves no CompositePodGroup)")
            kinds.remove("trees")
        if "gangs" in kinds:
            print("seed  scheduler        gangs placed  pods placed  racks/gang  partial  settled after")
            for seed in range(args.seeds):
                load = workload(seed)
                print(f"# seed {seed}: {_described(load)}")
                for outcome in compare(plane, seed, Path(tmp)):
                    print(f"{seed:<5} {_who(outcome):<16} {outcome.gangs_placed:>5}/{outcome.gangs:<6} "
                          f"{outcome.pods_placed:>5}/{outcome.pods:<5} {outcome.racks_per_gang:>10.2f} "
                          f"{outcome.partial_gangs:>8} {outcome.seconds:>10.1f} s")
        if "trees" in kinds:
            print("seed  scheduler        trees placed  gangs placed  pods placed  partial trees/gangs  settled after")
            for seed in range(args.seeds):
                load = tree_workload(seed)
                print(f"# trees, seed {seed}: {len(load.trees)} trees of "
                      f"{'+'.join(str(len(t.children)) for t in load.trees)} child gangs among {_described(load)}")
                for outcome in compare(plane, seed, Path(tmp), trees=True):
                    print(f"{seed:<5} {_who(outcome):<16} {outcome.trees_placed:>5}/{outcome.trees:<6} "
                          f"{outcome.gangs_placed:>6}/{outcome.gangs:<6} {outcome.pods_placed:>6}/{outcome.pods:<5} "
                          f"{outcome.partial_trees:>13}/{outcome.partial_gangs:<5} {outcome.seconds:>10.1f} s")
    return 0


def _who(outcome: Outcome) -> str:
    return "kube-scheduler" if outcome.scheduler.startswith("kube") else "cpsat-scheduler"


def _described(load: Workload) -> str:
    every = load.all_gangs()
    return (f"{len(every)} gangs ({sum(g.topology for g in every)} within one rack), "
            f"{sum(g.size * g.cpu for g in every)} CPUs asked of {load.racks * load.nodes_per_rack * load.node_cpu}")


if __name__ == "__main__":
    sys.exit(main())
